"""What the writer-contract tests share (tests/engine/test_writer_contract.py, tests/adapters/test_fsspec_writers.py):
the old value a writer must leave whole, the error raised inside its block, the temporary files it must not
leave behind."""

from __future__ import annotations

import os
from pathlib import Path

from gdsstore.engine.localfs import TMP_SUFFIX

__all__ = ["OLD", "Boom", "leftovers", "write_old"]

OLD = b"OLD"


class Boom(Exception):
    """The error a test raises inside a writer's block."""


def write_old(d: Path) -> Path:
    """``d/x.bin`` holding :data:`OLD`."""
    p = d / "x.bin"
    p.write_bytes(OLD)
    return p


def leftovers(d: Path) -> list[str]:
    """The temporary files of writers in ``d``."""
    return sorted(n for n in os.listdir(d) if n.endswith(TMP_SUFFIX))
