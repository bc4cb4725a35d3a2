"""Publishing a write batch's objects through the store's engine backend, many at once.

Each object is put atomically by the backend (temporary file + rename locally, PUT/multipart on S3,
CREATE on WebHDFS); here they run in parallel on the engine's pool (:func:`map_on_pool`), and each
batch records one ``write`` trace row (``batch-put``), sizes in the columns.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine.backend import Backend
from gdsstore.engine.pool import map_all

__all__ = ["map_on_pool", "publish", "publish_each"]


def map_on_pool(fn: Callable[[int], Any], n: int, backend: Backend | None = None) -> list[Any]:
    """``[fn(0), ..., fn(n - 1)]`` on the engine pool (inline for one item): ``num_threads`` at a time
    for local work, ``remote.concurrency`` for tasks that wait on a remote ``backend``. Through
    :func:`~gdsstore.engine.pool.map_all`, whose waiting thread runs pieces itself, so puts that run
    their own pieces (multipart parts) on the same pool cannot deadlock it."""
    if n <= 1:
        return [fn(i) for i in range(n)]
    s = policy.settings()
    if backend is not None and not _is_local(backend):
        return map_all(fn, range(n), s.remote_concurrency)
    return map_all(fn, range(n), s.num_threads)


def _is_local(backend: Backend) -> bool:
    from gdsstore.engine.localfs import LocalBackend

    return isinstance(backend, LocalBackend)


def _put_reason(backend: Backend) -> str:
    return f"{type(backend).__name__}.put, parallel, atomic per object"


def publish(backend: Backend, puts: Sequence[tuple[str, Any]], deletes: Sequence[str], device: bool) -> None:
    """Put every ``(key, host bytes)`` and delete every key, in parallel on the engine's write pool;
    one ``write`` trace row for the batch (each put is atomic: see the backend's ``put``)."""
    t0 = time.perf_counter()
    jobs: list[Callable[[], None]] = [functools.partial(backend.put, k, b) for k, b in puts]
    jobs += [functools.partial(backend.delete, k) for k in deletes]
    map_on_pool(lambda i: jobs[i](), len(jobs), backend)
    nbytes = sum(int(np.asarray(b).nbytes) for _, b in puts)
    seconds = time.perf_counter() - t0
    _trace.record("write", "batch-put", _put_reason(backend), nbytes, seconds, backend.url, 0 if device else None)


def publish_each(
    backend: Backend,
    keys: Sequence[str],
    make: Callable[[int], np.ndarray | None],
    made: tuple[str, str, int | None],
    device: int | None = None,
) -> None:
    """Make and publish each object in one pool task, so its bytes are written while they are still in
    the CPU's cache: ``make(i)``, the bytes of ``keys[i]`` (``None``: delete the key).

    Two trace rows share the batch's wall time by the work each step did: ``made`` ``(route, reason,
    bytes)`` for the making (``bytes`` ``None``: the bytes written), and the batch's ``write`` row
    (``device``: the GPU the values came from).
    """
    t0 = time.perf_counter()
    spent = np.zeros((len(keys), 2))  # make, publish seconds of each object
    written = np.zeros(len(keys), dtype=np.int64)

    def one(i: int) -> None:
        ta = time.perf_counter()
        blob = make(i)
        tb = time.perf_counter()
        if blob is None:
            backend.delete(keys[i])
        else:
            backend.put(keys[i], blob)
            written[i] = blob.nbytes
        spent[i] = (tb - ta, time.perf_counter() - tb)

    map_on_pool(one, len(keys), backend)
    wall = time.perf_counter() - t0
    share = spent.sum(axis=0) / max(float(spent.sum()), 1e-12) * wall  # wall time split by work done
    route, reason, nbytes = made
    total = int(written.sum())
    _trace.record("encode", route, reason, total if nbytes is None else nbytes, float(share[0]))
    _trace.record("write", "batch-put", _put_reason(backend), total, float(share[1]), backend.url, device)
