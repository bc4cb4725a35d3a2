"""The engine's one thread pool, and the future that joins the pieces of one request.

One pool serves local pieces, remote ranges, batched chunk reads and the adapters' background work. It
is created on first use (never at import), sized by the settings (``max(num_threads,
remote.concurrency, remote.wave_concurrency)``), and dropped in a forked child (``os.register_at_fork``), which gets a fresh
one on its first request: the parent's worker threads do not exist in the child, so a request queued
on the inherited pool would wait forever.

A request runs at most ``concurrency`` pieces at once (its own bound: ``num_threads`` for local I/O,
``remote.concurrency`` for remote ranges): it hands the pool that many workers, each taking the next
piece not yet started. A thread that waits for the request's result takes pieces too while fewer than
``concurrency`` threads do, so a wait never depends on a free pool worker: a task on the pool that
waits for a nested request never deadlocks, however busy the pool is.

Examples:
    >>> fut = run_pieces([lambda: 4, lambda: 4], [4, 4], concurrency=2)
    >>> fut.result()
    8
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

__all__ = ["PiecesFuture", "completed", "engine_pool", "map_all", "run_pieces"]

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_settings_size = 0  # the settings' size when the pool was built
_pool_lock = threading.Lock()


def engine_pool(min_workers: int = 1) -> ThreadPoolExecutor:
    """The process's engine pool: ``max(num_threads, remote.concurrency, remote.wave_concurrency)``
    threads (started as work arrives), grown (never
    shrunk) to ``min_workers`` when a request asks for more.

    Rebuilt when those settings change (the old pool finishes its queue and goes); a request that asks
    for more threads than the settings grows the pool once instead of rebuilding it back and forth.
    """
    from gdsstore import policy

    global _pool, _pool_size, _settings_size
    s = policy.settings()
    # The wave's bound too: a pool grown mid-read would shut down the pool a window prefetch holds.
    want = max(s.num_threads, s.remote_concurrency, policy.python_wave_concurrency(s))
    with _pool_lock:
        same_settings = _pool is not None and _settings_size == want
        if not same_settings or _pool_size < min_workers:
            size = max(want, min_workers, _pool_size if same_settings else 0)
            old = _pool
            _pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="gdsstore")
            _pool_size, _settings_size = size, want
            if old is not None:
                old.shutdown(wait=False)
        assert _pool is not None
        return _pool


def _forget_pool_in_child() -> None:
    """After ``fork()``: the inherited pool's threads are gone; the next request builds a fresh pool."""
    global _pool, _pool_size, _settings_size, _pool_lock
    _pool, _pool_size, _settings_size, _pool_lock = None, 0, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def completed(value: int) -> Future[int]:
    """A future already resolved to ``value``."""
    fut: Future[int] = Future()
    fut.set_result(value)
    return fut


class _Pieces:
    """The pieces of one request: handed out one at a time, to pool workers and to waiting threads."""

    def __init__(
        self,
        pieces: Sequence[Callable[[], int]],
        expected: Sequence[int],
        on_done: Callable[[int, BaseException | None], None] | None,
        out: PiecesFuture,
        concurrency: int,
    ) -> None:
        self._pieces = pieces
        self._expected = expected
        self._on_done = on_done
        self._out = out
        self._results = [0] * len(pieces)
        self._errors: list[BaseException] = []
        self._next = 0
        self._remaining = len(pieces)
        self._concurrency = concurrency
        self._active = 0  # threads taking pieces now: never more than the request's concurrency
        self._lock = threading.Lock()

    def _take(self) -> int | None:
        with self._lock:
            if self._next == len(self._pieces):
                return None
            self._next += 1
            return self._next - 1

    def drain(self) -> None:
        """Run pieces not yet started until none is left (returns at once when ``concurrency`` threads
        already take pieces: they finish the request)."""
        with self._lock:
            if self._active >= self._concurrency:
                return
            self._active += 1
        try:
            self._drain()
        finally:
            with self._lock:
                self._active -= 1

    def _drain(self) -> None:
        while (i := self._take()) is not None:
            try:
                self._results[i] = self._pieces[i]()
            except BaseException as exc:
                with self._lock:
                    self._errors.append(exc)
            with self._lock:
                self._remaining -= 1
                last = self._remaining == 0
            if last:
                self._finish()

    def _finish(self) -> None:
        out, on_done = self._out, self._on_done
        out._pieces = None  # nothing left to run; the future no longer holds the request's closures
        if self._errors:
            try:
                if on_done:
                    on_done(0, self._errors[0])
            except BaseException:  # the pieces' first error is the one to report
                pass
            out.set_exception(self._errors[0])  # resolved whatever on_done did: a waiter never hangs
            return
        total = 0
        for got, want in zip(self._results, self._expected):
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


class PiecesFuture(Future[int]):
    """The future of :func:`run_pieces`: ``result()`` runs pieces not yet started in the calling thread
    before it waits, so a wait never depends on a free pool worker."""

    _pieces: _Pieces | None = None

    def result(self, timeout: float | None = None) -> int:
        run = self._pieces
        if run is not None:
            run.drain()
        return super().result(timeout)


def run_pieces(
    pieces: Sequence[Callable[[], int]],
    expected: Sequence[int],
    concurrency: int,
    on_done: Callable[[int, BaseException | None], None] | None = None,
) -> PiecesFuture:
    """Run ``pieces`` on the engine pool, at most ``concurrency`` at once; the future resolves after
    *all* of them finished.

    The result is the length of the contiguous prefix transferred: the pieces' counts summed up to
    and including the first short one (a file that shrank mid-read leaves no holes in what we report).
    The first exception wins, but only once every piece has stopped touching the buffer.
    ``on_done(total, error)`` runs before the future resolves; an exception it raises fails the future.
    """
    out = PiecesFuture()
    out.set_running_or_notify_cancel()
    workers = max(1, min(concurrency, len(pieces)))
    run = _Pieces(pieces, expected, on_done, out, workers)
    if len(pieces) == 0:
        out.set_result(0)
        if on_done:
            on_done(0, None)
        return out
    if len(pieces) == 1:
        # One piece: no hop through the pool (small chunk reads are latency-bound).
        run.drain()
        return out
    out._pieces = run
    pool = engine_pool(workers)
    for _ in range(workers):
        pool.submit(run.drain)
    return out


def map_all(fn: Callable[[Any], Any], items: Sequence[Any], concurrency: int | None = None) -> list[Any]:
    """``[fn(x) for x in items]`` on the engine pool (at most ``concurrency`` at once; default: the
    pool's size); the first error is raised once every call has returned.

    Examples:
        >>> map_all(lambda x: x * 2, [1, 2, 3])
        [2, 4, 6]
    """
    out: list[Any] = [None] * len(items)

    def call(i: int) -> int:
        out[i] = fn(items[i])
        return 0

    if concurrency is None:
        engine_pool()
        concurrency = _pool_size
    width = concurrency
    run_pieces([partial(call, i) for i in range(len(items))], [0] * len(items), width).result()
    return out
