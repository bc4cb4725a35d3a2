"""``gdsstore.pagecache``: residency of a file's pages, and dropping them (``gdsstore bench --cold``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gdsstore import pagecache


def test_pagecache_resident_and_drop(tmp_path: Path) -> None:
    p = tmp_path / "pc.bin"
    p.write_bytes(os.urandom(4 << 20))
    p.read_bytes()
    r = pagecache.resident(p)
    assert r.total_pages == (4 << 20) // os.sysconf("SC_PAGE_SIZE")
    after = pagecache.drop(p)
    assert after.resident_pages <= r.resident_pages
    if after.resident_pages:  # some filesystems (tmpfs, overlay) cannot drop pages
        pytest.skip(f"filesystem kept {after.fraction:.0%} resident after DONTNEED")
    p.read_bytes()
    assert pagecache.resident(p).fraction == 1.0
    assert pagecache.resident(tmp_path / "pc.bin").total_pages == r.total_pages


def test_empty_file_residency(tmp_path: Path) -> None:
    p = tmp_path / "e"
    p.write_bytes(b"")
    assert pagecache.resident(p).fraction == 1.0
