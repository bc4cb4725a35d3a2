"""gdsstore.engine.batch: batched local reads (pieces, missing files, bounds, one trace event)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import gdsstore
from gdsstore.engine import batch
from gdsstore.gpu import staging


@pytest.fixture
def files(tmp_path: Path) -> tuple[list[str], list[bytes]]:
    rng = np.random.default_rng(0)
    datas = [rng.integers(0, 255, n, dtype=np.uint8).tobytes() for n in (3 << 20, 100, (2 << 20) + 5)]
    paths = []
    for i, b in enumerate(datas):
        (tmp_path / str(i)).write_bytes(b)
        paths.append(str(tmp_path / str(i)))
    return [*paths, str(tmp_path / "missing")], datas


def test_read_batch_splits_big_reads_and_reports_counts(files: tuple[list[str], list[bytes]]) -> None:
    paths, datas = files
    sizes = np.array([3 << 20, 100, (2 << 20) + 99, 1 << 20])  # the third asks past EOF: short
    dst = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    dest = np.zeros(int(sizes.sum()), np.uint8)
    with gdsstore.config.set({"task_size": 1 << 20}), gdsstore.trace() as t:
        got = batch.read_batch(paths, np.zeros(4, np.int64), sizes, dest, dst, 4, into="test")
    assert got.tolist() == [len(d) for d in datas] + [-1]
    for i, d in enumerate(datas):
        assert bytes(dest[dst[i] : dst[i] + len(d)]) == d
    events = [(op, route, r) for (op, route, r) in t.by_reason() if op == "read"]
    assert events == [("read", "posix", "batch of 4 reads into test")]  # one event per batch
    assert t.totals["posix"]["bytes"] == sum(len(d) for d in datas)


def test_read_batch_offsets_and_bounds(files: tuple[list[str], list[bytes]]) -> None:
    paths, datas = files
    dest = np.zeros(64, np.uint8)
    got = batch.read_batch(paths[1:2], np.array([10]), np.array([50]), dest, np.array([7]))
    assert got.tolist() == [50] and bytes(dest[7:57]) == datas[1][10:60]
    with pytest.raises(ValueError, match="overflow"):
        batch.read_batch(paths[1:2], np.array([0]), np.array([60]), dest, np.array([10]))


def test_stat_batch_and_local_paths(files: tuple[list[str], list[bytes]], tmp_path: Path) -> None:
    paths, datas = files
    assert batch.stat_batch([*paths, str(tmp_path)]).tolist() == [len(d) for d in datas] + [-1, -1]
    assert batch.local_paths(str(tmp_path), ["0", "c/1"], "t") == [
        os.path.join(str(tmp_path), "0"),
        os.path.join(str(tmp_path), "c", "1"),
    ]
    for bad in ("../x", "a//b", "/abs", "a/./b"):
        with pytest.raises(ValueError, match="invalid key"):
            batch.local_paths(str(tmp_path), ["ok", bad], "t")


def test_stage_local_expect_checks_sizes(tmp_path: Path) -> None:
    backend = gdsstore.GDSStore(str(tmp_path)).backend
    (tmp_path / "a").write_bytes(b"x" * 10)
    (tmp_path / "b").write_bytes(b"y" * 12)
    st = staging.stage_local(backend, ["a", "gone"], pinned=False, expect=np.array([10, 10]))
    assert st.sizes.tolist() == [10, -1] and bytes(st.view(0)) == b"x" * 10
    with pytest.raises(OSError, match="larger than the 10 bytes"):
        staging.stage_local(backend, ["b"], pinned=False, expect=np.array([10]))
    with pytest.raises(OSError, match="10 bytes, not the 11"):
        staging.stage_local(backend, ["a"], pinned=False, expect=np.array([11]))
