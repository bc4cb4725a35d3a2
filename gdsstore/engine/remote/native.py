"""The native transport of a wave: kvikio's libcurl pool, for requests whose size is known.

Python HTTP clients pay a few hundred microseconds of GIL-holding work per request, which caps a wave of
small chunk objects near 2,700 requests/s whatever the thread count. kvikio's ``RemoteFile`` runs the
request in C++ (libcurl, its own thread pool): on the H200 machine it fetched 1,024 objects of 256 KiB at
6.6 GB/s (25,000 objects/s) against 1.3 for obstore, 1.2 for tensorstore and 0.3 for gdsstore's own
client (``benchmarks/probe_transports.py``; the A/B is on the docs' Performance page).

kvikio needs the CUDA driver even for host buffers, so this route exists only on GPU machines, and it
takes only what it can do without losing a check:

- a whole object: its size is asked of the server (``RemoteFile.open_http``, a HEAD in C++), and where
  the array's metadata fixes it (an uncompressed chunk) checked against it, so a stored object of another
  size is never read as a prefix; or a byte range known to lie inside its object (a shard's index entry);
- one request per object or range: one response, one version of the object;
- a plain URL: HTTP(S) without custom headers or client certificates, or S3 through a presigned URL.

The size is asked just before the read: an object replaced in between by a larger one would be read as
its prefix. A zarr chunk keeps its size (uncompressed) or ends in a checked frame (zstd, gzip, lz4,
blosc), so such a read fails in decoding; the usual client, which pins the ETag, is what ``remote.native``
``False`` gives where objects change under readers.

What kvikio does not check, and why the route is opt-in (``remote.native_client`` ``"kvikio"``): the
``Content-Range`` of an answer. On the H200 a fault server answering a range with another range, or with
fewer bytes, had its bytes taken as the range asked (``tests/remote/test_native.py`` pins this); gdsstore's
own client refuses both. Turn it on for servers you trust (your own nginx, S3).

Anything else, and every request kvikio fails (a missing key, a 5xx after kvikio's own retries, a server
that ignores ``Range``, a short body), goes through gdsstore's own reader, which knows what each failure
means (``FileNotFoundError`` for a missing chunk, retries, ``Content-Range`` checks).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
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
    """``size`` bytes of ``url`` from ``offset`` into ``dest``; ``whole``: the object is exactly ``size``.

    A whole object of unknown size has ``size`` -1 and a ``dest`` that takes the size the server gives
    and returns where the bytes go; ``got`` is set to it.
    """

    url: str
    offset: int
    size: int
    dest: np.ndarray | Callable[[int], np.ndarray]
    whole: bool
    got: int = -1


def native_reader() -> Any | None:
    """kvikio's module when the native route can run here (``remote.native`` on with
    ``remote.native_client`` ``"kvikio"``, kvikio importable, a CUDA driver present), else ``None``. kvikio's thread pool is sized to ``remote.wave_concurrency``
    at most 64 when it is at kvikio's default (one thread) and ``KVIKIO_NTHREADS`` is not set."""
    s = policy.settings()
    if not s.remote_native or s.remote_native_client != "kvikio":
        return None
    with _lock:
        if "kvikio" not in _state:
            _state["kvikio"] = _load()
        kv = _state["kvikio"]
        if kv is not None and "threads" not in _state:
            _state["threads"] = _size_pool(min(64, s.remote_wave_concurrency))
    return kv


def _load() -> Any | None:
    if not cuda.gpu_available():  # kvikio's remote I/O loads libcuda even for host buffers
        return None
    try:
        import kvikio
    except Exception:
        return None
    return kvikio if hasattr(kvikio, "RemoteFile") else None


def _size_pool(threads: int) -> int:
    import kvikio.defaults

    current = int(kvikio.defaults.get("num_threads")) if hasattr(kvikio.defaults, "get") else 1
    if current == 1 and "KVIKIO_NTHREADS" not in os.environ and threads > 1:
        kvikio.defaults.set({"num_threads": threads})
        return threads
    return current


def read_native(kv: Any, requests: Sequence[NativeRequest], openers: int = 1) -> list[BaseException | None]:
    """Issue every request on kvikio's pool and wait for all; per request, ``None`` (its bytes landed in
    ``dest``) or why it failed (the caller asks it again through its own client). Whole objects are
    opened (their size asked) ``openers`` at a time on the engine pool; each read starts as soon as its
    object is open."""
    from gdsstore.engine.pool import map_all

    n = len(requests)
    errs: list[BaseException | None] = [None] * n
    files: list[Any] = [None] * n
    futures: list[Any] = [None] * n

    def start(i: int) -> int:
        try:
            files[i], futures[i] = _start(kv, requests[i])
        except Exception as exc:  # one failure must not stop the wave's other requests
            errs[i] = exc
        return 0

    try:
        if openers > 1 and n > 1 and any(r.whole for r in requests):
            map_all(start, range(n), openers)
        else:
            for i in range(n):
                start(i)
        for i, fut in enumerate(futures):
            if fut is None:
                continue
            try:
                got = int(fut.get())
                if got != requests[i].got:
                    errs[i] = RemoteIOError(f"native read: {got} of {requests[i].got} bytes")
            except Exception as exc:
                errs[i] = exc
    finally:
        for f in files:
            if f is not None:
                f.close()
    return errs


def _start(kv: Any, r: NativeRequest) -> tuple[Any, Any]:
    """Open ``r``'s object (a whole one: its size asked and checked) and start its read: ``(file, future)``."""
    size = r.size
    if r.whole:
        f = kv.RemoteFile.open_http(r.url)  # asks the size: exactly r.size, never a prefix
        if size < 0:
            size = int(f.nbytes())
        elif int(f.nbytes()) != size:
            f.close()
            raise RemoteIOError(f"native read: the object is {int(f.nbytes())} bytes, not {size}")
    else:
        f = kv.RemoteFile.open_http(r.url, nbytes=r.offset + size)
    try:
        dest = r.dest(size) if callable(r.dest) else r.dest
        r.got = size
        return f, (f.pread(dest, size, r.offset) if size else None)
    except BaseException:
        f.close()
        raise
