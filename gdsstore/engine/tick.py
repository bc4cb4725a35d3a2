"""``TickGatherer``: the calls of one store that arrive in one event-loop tick, run as one batch.

zarr's pipeline reads (and writes) a selection's chunks as concurrent coroutines,
``async.concurrency`` of them at once; one thread hop per chunk would cost more than a small chunk's
read. The stores over the engine (:class:`gdsstore.GDSStore`, the archives' ``VirtualStore``) hand
each tick's calls to the engine as one batch through a gatherer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gdsstore.engine.backend import BatchResult

__all__ = ["TickGatherer", "executor_shut_down"]

class TickGatherer[Owner]:
    """Calls of one store that arrive in the same event-loop tick, run as one batch in one thread.

    The first call of a tick schedules a flush at the end of that tick; the calls that join before it
    go to ``run(owner, items)`` as one batch, each awaiting its own item (a failed item fails its
    caller alone). Nothing is held between ticks, and each event loop has its own batch.

    Args:
        owner: what ``run`` reads through (a :class:`~gdsstore.engine.backend.Backend`, or a store).
        run: the batch, in a worker thread: ``run(owner, items)`` -> one result per item.
        max_items: a batch this long is flushed at once, before the end of its tick.
    """

    def __init__(
        self, owner: Owner, run: Callable[[Owner, list[Any]], BatchResult], max_items: int = 1 << 30
    ) -> None:
        self._owner = owner
        self._run = run
        self._max_items = max_items
        self._pending: dict[asyncio.AbstractEventLoop, tuple[list[Any], list[asyncio.Future[Any]]]] = {}

    def submit(self, item: Any) -> asyncio.Future[Any]:
        """Join this tick's batch; the future gets ``item``'s result, or its error."""
        loop = asyncio.get_running_loop()
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = ([], [])
            loop.call_soon(self._flush, loop, pending)
        fut: asyncio.Future[Any] = loop.create_future()
        pending[0].append(item)
        pending[1].append(fut)
        if len(pending[0]) >= self._max_items:
            self._flush(loop, pending)
        return fut

    def _flush(self, loop: asyncio.AbstractEventLoop, pending: tuple[list[Any], list[asyncio.Future[Any]]]) -> None:
        if self._pending.get(loop) is not pending:
            return  # flushed already (it filled up before the end of its tick)
        del self._pending[loop]
        items, futs = pending
        try:
            done = loop.run_in_executor(None, self._run, self._owner, items)
        except RuntimeError as exc:
            if not executor_shut_down(exc):
                raise
            # zarr's atexit cleanup: its queued work is cancelled, and so are these callers, instead of
            # waiting forever and being reported at exit.
            for f in futs:
                f.cancel()
            return
        done.add_done_callback(lambda d: _settle(d, futs))


def executor_shut_down(exc: RuntimeError) -> bool:
    """Whether ``exc`` is an executor's refusal of new work after its shutdown or the interpreter's (zarr's
    executor, at exit)."""
    return str(exc).startswith("cannot schedule new futures")


def _settle(done: asyncio.Future[BatchResult], futs: list[asyncio.Future[Any]]) -> None:
    """Hand each caller of a batch its item (callers cancelled meanwhile are skipped)."""
    exc = None if done.cancelled() else done.exception()
    if done.cancelled() or exc is not None:
        for f in futs:
            if not f.done():
                f.set_exception(exc) if exc is not None else f.cancel()
        return
    out = done.result()
    for i, f in enumerate(futs):
        if f.done():
            continue
        err = out.errors.get(i)
        if err is not None:
            f.set_exception(err)
        else:
            f.set_result(out.bufs[i])
