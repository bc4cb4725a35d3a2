"""The native transport of a wave: kvikio's libcurl pool, for requests whose size is known.

Python HTTP clients pay a few hundred microseconds of GIL-holding work per request, which caps a wave of
small chunk objects near 2,700 requests/s whatever the thread count. kvikio's ``RemoteFile`` runs the
request in C++ (libcurl, its own thread pool): on the H200 machine it fetched 1,024 objects of 256 KiB at
6.6 GB/s (25,000 objects/s) against 1.3 for obstore, 1.2 for tensorstore and 0.3 for gdsstore's own
client (``benchmarks/probe_transports.py``; the A/B is on the docs' Performance page).

kvikio needs the CUDA driver even for host buffers, so this route exists only on GPU machines, and it
takes only what it can do without losing a check:

- a request of known size: a whole object whose size the array's metadata fixes (an uncompressed chunk),
  or a byte range known to lie inside its object (a shard's index entry);
- a whole object's size is checked against the server's (``RemoteFile.open_http`` asks it, in C++), so a
  stored object of another size is never read as a prefix;
- one request per object or range: one response, one version of the object;
- a plain URL: HTTP(S) without custom headers or client certificates, or S3 through a presigned URL.

Anything else, and every request kvikio fails (a missing key, a 5xx after kvikio's own retries, a server
that ignores ``Range``, a short body), goes through gdsstore's own reader, which knows what each failure
means (``FileNotFoundError`` for a missing chunk, retries, ``Content-Range`` checks). ``remote.native``
turns the route off.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gdsstore import policy
from gdsstore.engine import cuda
from gdsstore.errors import RemoteIOError

__all__ = ["NativeRequest", "native_reader", "read_native"]

_lock = threading.Lock()
_state: dict[str, Any] = {}


@dataclass
class NativeRequest:
    """``size`` bytes of ``url`` from ``offset`` into ``dest``; ``whole``: the object is exactly ``size``."""

    url: str
    offset: int
    size: int
    dest: np.ndarray
    whole: bool


def native_reader() -> Any | None:
    """kvikio's module when the native route can run here (``remote.native`` on, kvikio importable, a
    CUDA driver present), else ``None``. kvikio's thread pool is sized to ``remote.wave_concurrency``
    at most 64 when it is at kvikio's default (one thread) and ``KVIKIO_NTHREADS`` is not set."""
    s = policy.settings()
    if not s.remote_native:
        return None
    with _lock:
        if "kvikio" not in _state:
            _state["kvikio"] = _load()
        kv = _state["kvikio"]
        if kv is not None and "threads" not in _state:
            _state["threads"] = _size_pool(kv, min(64, s.remote_wave_concurrency))
    return kv


def _load() -> Any | None:
    if not cuda.gpu_available():  # kvikio's remote I/O loads libcuda even for host buffers
        return None
    try:
        import kvikio
    except Exception:
        return None
    return kvikio if hasattr(kvikio, "RemoteFile") else None


def _size_pool(kv: Any, threads: int) -> int:
    import kvikio.defaults

    current = int(kvikio.defaults.get("num_threads")) if hasattr(kvikio.defaults, "get") else 1
    if current == 1 and "KVIKIO_NTHREADS" not in os.environ and threads > 1:
        kvikio.defaults.set({"num_threads": threads})
        return threads
    return current


def read_native(kv: Any, requests: Sequence[NativeRequest]) -> list[BaseException | None]:
    """Issue every request at once on kvikio's pool and wait for all; per request, ``None`` (its bytes
    landed in ``dest``) or why it failed (the caller retries it through its own reader)."""
    errs: list[BaseException | None] = [None] * len(requests)
    files: list[Any] = []
    futures: list[tuple[int, Any]] = []
    try:
        for i, r in enumerate(requests):
            try:
                if r.whole:
                    f = kv.RemoteFile.open_http(r.url)  # asks the size: the object must be exactly r.size
                    files.append(f)
                    if int(f.nbytes()) != r.size:
                        raise RemoteIOError(f"native read: the object is {int(f.nbytes())} bytes, not {r.size}")
                else:
                    f = kv.RemoteFile.open_http(r.url, nbytes=r.offset + r.size)
                    files.append(f)
                futures.append((i, f.pread(r.dest, r.size, r.offset)))
            except Exception as exc:  # one failure must not stop the wave's other requests
                errs[i] = exc
        for i, fut in futures:
            try:
                got = int(fut.get())
                if got != requests[i].size:
                    errs[i] = RemoteIOError(f"native read: {got} of {requests[i].size} bytes")
            except Exception as exc:
                errs[i] = exc
    finally:
        for f in files:
            f.close()
    return errs
