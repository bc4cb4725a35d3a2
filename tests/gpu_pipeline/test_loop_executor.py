"""Reads through stores other than ``GDSStore`` under ``enable_pipeline()`` never wait for the event loop from
a thread of its executor (issue 35: as many reads at once as zarr's pool has threads hung forever, each
thread waiting for a ``store.get`` that needed a thread of the same pool).

Each case runs in a forked child whose zarr pool has 2 threads (``threading.max_workers``: zarr builds its
pool and loop afresh after a fork), with a deadline as the hang guard: the assertion is that it finishes
and reads the right values."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from forked import run_forked
from zarr.storage import LocalStore

import gdsstore

DATA = np.arange(64 * 48, dtype="f4").reshape(64, 48)
HANG_GUARD_S = 60.0
THREADS = 6  # more reads at once than zarr's pool (2 threads) in the child


def _write(store: Any, sharded: bool) -> None:
    kw: dict[str, Any] = {"shards": (16, 24)} if sharded else {}
    z = zarr.create_array(store, shape=DATA.shape, chunks=(8, 8), dtype="f4", compressors=zarr.codecs.ZstdCodec(), **kw)
    z[:] = DATA


def _in_child(body: Callable[[], bool]) -> int | None:
    """``body()`` in a forked child with a 2-thread zarr pool under ``enable_pipeline()``: exit code 0 when
    it returns True, None when it hangs past the guard."""

    def child() -> int:
        zarr.config.set({"threading.max_workers": 2})
        with gdsstore.enable_pipeline():
            return 0 if body() else 3

    return run_forked(child, HANG_GUARD_S)


def _rows_from_threads(open_array: Callable[[], Any]) -> bool:
    """THREADS threads each read one row's sum at the same time; whether every sum is right."""
    a = open_array()
    sums: list[Any] = [None] * THREADS
    start = threading.Barrier(THREADS)

    def read(i: int) -> None:
        start.wait()
        sums[i] = np.asarray(a[i * 8 + 1]).sum()

    threads = [threading.Thread(target=read, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return all(s == DATA[i * 8 + 1].sum() for i, s in enumerate(sums))


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
def test_threads_reading_a_local_store_at_once_finish(tmp_path: Path, sharded: bool) -> None:
    _write(LocalStore(tmp_path / "a.zarr"), sharded)
    code = _in_child(lambda: _rows_from_threads(lambda: zarr.open_array(LocalStore(tmp_path / "a.zarr"), mode="r")))
    assert code == 0, "hung" if code is None else f"child exit {code}"


def test_threads_reading_a_gds_url_at_once_finish(tmp_path: Path) -> None:
    """The documented ``zarr.open_array("gds:///path")`` form: zarr's FsspecStore over gdsstore's filesystem."""
    _write(LocalStore(tmp_path / "u.zarr"), sharded=False)
    url = f"gds://{tmp_path / 'u.zarr'}"
    code = _in_child(lambda: _rows_from_threads(lambda: zarr.open_array(url, mode="r")))
    assert code == 0, "hung" if code is None else f"child exit {code}"


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
def test_from_array_between_local_stores_finishes(tmp_path: Path, sharded: bool) -> None:
    """``zarr.from_array`` copies region by region, many reads of the source at once."""
    _write(LocalStore(tmp_path / "src.zarr"), sharded)

    def copy() -> bool:
        src = zarr.open_array(LocalStore(tmp_path / "src.zarr"), mode="r")
        dst = zarr.from_array(LocalStore(tmp_path / "dst.zarr"), data=src)
        return np.array_equal(np.asarray(dst[:]), DATA)

    code = _in_child(copy)
    assert code == 0, "hung" if code is None else f"child exit {code}"
