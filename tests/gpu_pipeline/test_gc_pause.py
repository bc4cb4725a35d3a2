"""``pause_gc``: the pipeline's calls run with Python's cyclic garbage collector paused (a full collection in
the middle of a read of thousands of chunks cost a third of it on the H200), and the pause never outlives
its call: not after a failure, not beside a user's own ``gc.disable()``, not across concurrent calls, not
in a child forked during a call."""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr
from forked import run_forked

import gdsstore
from gdsstore.gpu.execute import collections_paused, one_call


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_inside_a_call_and_on_after_it() -> None:
    seen = one_call(gc.isenabled)
    assert seen is False
    assert gc.isenabled()


def test_a_failing_call_ends_the_pause() -> None:
    def boom() -> None:
        raise OSError("the read failed")

    with pytest.raises(OSError, match="the read failed"):
        one_call(boom)
    assert gc.isenabled()


def test_the_setting_off_leaves_the_collector_alone() -> None:
    with gdsstore.config.set({"pause_gc": False}):
        assert one_call(gc.isenabled) is True


def test_a_collector_the_user_turned_off_stays_off() -> None:
    gc.disable()
    assert one_call(gc.isenabled) is False
    assert not gc.isenabled()


def test_concurrent_calls_leave_the_collector_on_once_all_returned() -> None:
    inside = threading.Barrier(4)

    def call() -> None:
        def body() -> None:
            inside.wait(timeout=10)  # all four calls at once, in some order
            assert not gc.isenabled()
            inside.wait(timeout=10)

        one_call(body)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    with collections_paused():
        inside.wait(timeout=10)
        inside.wait(timeout=10)
    for t in threads:
        t.join(timeout=10)
    assert gc.isenabled()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork() with threads: what users do
def test_a_child_forked_during_a_call_has_the_collector_on() -> None:
    def body() -> int | None:
        assert not gc.isenabled()
        return run_forked(lambda: 0 if gc.isenabled() else 3, timeout=30)

    assert one_call(body) == 0
    assert gc.isenabled()


def _collections_inside(name: str, read: Callable[[], object]) -> int:
    """How many automatic collections ran while a frame of ``name`` was on the collecting thread's stack."""
    count = [0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase != "start":
            return
        f = sys._getframe(1)
        while f is not None:
            if f.f_code.co_name == name:
                count[0] += 1
                return
            f = f.f_back

    gc.callbacks.append(on_gc)
    try:
        read()
    finally:
        gc.callbacks.remove(on_gc)
    return count[0]


@pytest.mark.parametrize("pause", [True, False])
def test_no_collection_runs_inside_a_read_of_many_chunks(tmp_path: Path, pause: bool) -> None:
    src = np.arange(64 * 64, dtype="u2").reshape(64, 64)
    store = gdsstore.GDSStore(str(tmp_path / "a.zarr"))
    zarr.create_array(store, shape=src.shape, chunks=(2, 2), dtype="u2", compressors=None)[:] = src  # 1,024 chunks
    rows = cols = np.arange(64)
    got: list[np.ndarray] = []
    with gdsstore.enable_pipeline(), gdsstore.config.set({"pause_gc": pause}):
        # an orthogonal selection: each chunk placed by zarr's scatter on this thread, a few objects each (a
        # selection of slices makes none per chunk)
        n = _collections_inside("read_chunks", lambda: got.append(zarr.open_array(store, mode="r").oindex[rows, cols]))
    np.testing.assert_array_equal(got[0], src)
    if pause:
        assert n == 0
    else:
        assert n > 0  # what the pause takes away: without it, 1,024 chunks' objects set the collector off
