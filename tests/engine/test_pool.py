"""gdsstore.engine.pool: one engine pool (lazy, sized by the settings, fresh after fork) and the future
that joins a request's pieces."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from forked import run_forked

import gdsstore
from gdsstore.engine.pool import engine_pool, map_all, run_pieces


def test_counts_stop_at_the_first_short_piece() -> None:
    fut = run_pieces([lambda: 4, lambda: 2, lambda: 4], [4, 4, 4], 3)
    assert fut.result(timeout=10) == 6  # no holes: the third piece's bytes follow a short one


def test_first_error_after_every_piece_stopped() -> None:
    release = threading.Event()
    done: list[str] = []

    def slow() -> int:
        release.wait(10)
        done.append("slow")
        return 1

    def bad() -> int:
        release.set()
        raise OSError("piece failed")

    fut = run_pieces([slow, bad], [1, 1], 2)
    with pytest.raises(OSError, match="piece failed"):
        fut.result(timeout=10)
    assert done == ["slow"]


def test_a_failing_on_done_fails_the_future_instead_of_hanging_it() -> None:
    """on_done waits for device copies and checks versions: its error is the request's error."""
    seen: list[tuple[int, object]] = []

    def on_done(n: int, exc: BaseException | None) -> None:
        seen.append((n, exc))
        raise ValueError("copy failed")

    fut = run_pieces([lambda: 3, lambda: 3], [3, 3], 2, on_done)
    with pytest.raises(ValueError, match="copy failed"):
        fut.result(timeout=10)
    assert seen == [(6, None)]


def test_one_engine_pool_sized_by_the_settings_never_created_at_import() -> None:
    code = (
        "import gdsstore, gdsstore.engine.pool as p, gdsstore.gpu.pipeline, gdsstore.adapters.fsspec\n"
        "import threading\n"
        "assert p._pool is None, 'a pool was created at import'\n"
        "assert not [t for t in threading.enumerate() if t.name.startswith('gdsstore')]\n"
        "with gdsstore.config.set({'num_threads': 3, 'remote.concurrency': 5, 'remote.wave_concurrency': 4}):\n"
        "    print(p.engine_pool()._max_workers)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "5"


def test_a_request_runs_at_most_its_concurrency_at_once() -> None:
    lock = threading.Lock()
    running = [0]
    peak = [0]

    def piece() -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        return 1

    with gdsstore.config.set({"num_threads": 8}):
        assert run_pieces([piece] * 24, [1] * 24, 3).result(timeout=30) == 24
    assert 1 <= peak[0] <= 3  # the waiting thread helps, within the same bound


def test_nested_requests_on_a_saturated_pool_never_deadlock() -> None:
    """Every pool worker waits for a nested request: the waiters run its pieces themselves."""
    with gdsstore.config.set({"num_threads": 2, "remote.concurrency": 2}):

        def outer(_: int) -> int:
            return run_pieces([lambda: 1] * 8, [1] * 8, 2).result(timeout=30)

        assert map_all(outer, list(range(6)), concurrency=2) == [8] * 6


def test_map_all_raises_the_first_error_after_every_call() -> None:
    done: list[int] = []

    def fn(x: int) -> int:
        if x == 0:
            raise KeyError("first")
        time.sleep(0.01)
        done.append(x)
        return x

    with pytest.raises(KeyError, match="first"):
        map_all(fn, [0, 1, 2, 3])
    assert sorted(done) == [1, 2, 3]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork() with threads: what users do
def test_a_forked_child_gets_a_fresh_pool_and_reads(tmp_path: Path) -> None:
    """Issue 16: a child forked after the parent used the pool hung forever on its first large read."""
    data = np.random.default_rng(1).integers(0, 255, 24 << 20, dtype=np.uint8)
    path = tmp_path / "big.bin"
    data.tofile(path)
    with gdsstore.config.set({"task_size": 1 << 20, "num_threads": 4}):
        buf = np.empty_like(data)
        with gdsstore.open(str(path)) as f:
            assert f.read(buf) == data.nbytes  # the parent's pool has live workers now

        def child() -> int:
            got = np.zeros_like(data)
            with gdsstore.open(str(path)) as f:
                n = f.read(got)
            ok_pool = engine_pool().submit(lambda: 7).result(timeout=20) == 7
            return 0 if n == data.nbytes and np.array_equal(got, data) and ok_pool else 2

        code = run_forked(child, timeout=60)
    if code is None:
        pytest.fail("the forked child hung reading through the engine pool")
    assert code == 0


def test_a_failing_on_done_after_a_failed_piece_still_resolves_the_future() -> None:
    def on_done(n: int, exc: BaseException | None) -> None:
        raise RuntimeError("cleanup failed too")

    def bad() -> int:
        raise OSError("piece failed")

    fut = run_pieces([bad, lambda: 1], [1, 1], 2, on_done)
    with pytest.raises(OSError, match="piece failed"):
        fut.result(timeout=10)
