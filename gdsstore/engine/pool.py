"""The engine's bounded thread pool and the future that joins the pieces of one request."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["completed", "get_pool", "run_pieces"]

_pools: dict[str, tuple[ThreadPoolExecutor, int]] = {}
_pool_lock = threading.Lock()


def get_pool(num_threads: int, name: str = "local") -> ThreadPoolExecutor:
    """The process-wide pool ``name`` ("local" I/O, "remote" requests), resized when ``num_threads``
    changes (the old pool drains on its own). Separate pools: num_threads and remote.concurrency
    differ, and one must not rebuild the other's pool on every call."""
    with _pool_lock:
        entry = _pools.get(name)
        if entry is None or entry[1] != num_threads:
            pool = ThreadPoolExecutor(max_workers=num_threads, thread_name_prefix=f"gdsstore-{name}")
            _pools[name] = (pool, num_threads)
            if entry is not None:
                entry[0].shutdown(wait=False)
            return pool
        return entry[0]


def completed(value: int) -> Future[int]:
    fut: Future[int] = Future()
    fut.set_result(value)
    return fut


def run_pieces(
    pieces: Sequence[Callable[[], int]],
    expected: Sequence[int],
    num_threads: int,
    on_done: Callable[[int, BaseException | None], None] | None = None,
    pool: str = "local",
) -> Future[int]:
    """Run ``pieces`` on the pool; the future resolves after *all* of them finished.

    The result is the length of the contiguous prefix transferred: the pieces' counts summed up to
    and including the first short one (a file that shrank mid-read leaves no holes in what we report).
    The first exception wins, but only once every piece has stopped touching the buffer.
    ``on_done(total, error)`` runs before the future resolves; an exception it raises fails the future.
    """
    out: Future[int] = Future()
    out.set_running_or_notify_cancel()
    if len(pieces) == 0:
        out.set_result(0)
        if on_done:
            on_done(0, None)
        return out
    executor = get_pool(num_threads, pool)
    results: list[int] = [0] * len(pieces)
    errors: list[BaseException] = []
    remaining = [len(pieces)]
    lock = threading.Lock()

    def finish() -> None:
        if errors:
            if on_done:
                on_done(0, errors[0])
            out.set_exception(errors[0])
            return
        total = 0
        for got, want in zip(results, expected):
            total += got
            if got < want:
                break
        if on_done:
            try:
                on_done(total, None)  # waits for copies, checks versions: it may fail the request
            except BaseException as exc:
                out.set_exception(exc)
                return
        out.set_result(total)

    def make(i: int, fn: Callable[[], int]) -> Callable[[], None]:
        def task() -> None:
            try:
                results[i] = fn()
            except BaseException as exc:
                with lock:
                    errors.append(exc)
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                finish()

        return task

    if len(pieces) == 1:
        # One piece: no hop through the pool (small chunk reads are latency-bound).
        make(0, pieces[0])()
        return out
    for i, fn in enumerate(pieces):
        executor.submit(make(i, fn))
    return out
