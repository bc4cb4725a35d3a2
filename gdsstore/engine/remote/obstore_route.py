"""The wave's native route: obstore (Rust's ``object_store``) fetches byte ranges and whole objects.

obstore runs each request on its own Rust runtime (tokio, hyper) and hands back the body whole; Python
only starts the request and copies the body into the wave's slot. A wave gives it its byte ranges (shard
entries) and its whole objects of unknown size (compressed chunks) of ``remote.native_min_size`` and more;
chunks of known size and small requests stay with gdsstore's own pipelined client, which lands bodies
straight in their slots. On the H200 machine that split read shards at 1.31x and compressed 4 MiB chunks at
0.78x the best other reader, against 1.16x and 0.40x with the own client alone (one run; the A/B is on the
docs' Performance page).

Checks, per request, as gdsstore's own client makes them:

- a range: obstore refuses an answer whose ``Content-Range`` is not the range asked (``UnexpectedRange``)
  and a ``200`` to a range request (``RangeNotSupported``); the length is checked here (obstore hands a
  short body back as it came): the whole range for an exact one, up to the object's end otherwise;
- a whole object: one ``GET``; its length must be the size the array's metadata gives where it gives one
  (a chunk without compression), so a stored object of another size is an error, never a prefix; an
  answer with a ``Content-Encoding`` is refused (those would be the encoded bytes);
- the last bytes of an object (a shard's index): one ``GET`` of the suffix, no size lookup first; obstore
  checks the ``Content-Range``, gdsstore that it ends at the object's end and has the length it says;
- one request, one version of the object: there is nothing to mix.

A ``404`` is a missing object (the URLs taken are sent as they are: plain paths, no query). Every other
failure leaves the request to gdsstore's own client, which retries, follows redirects and says what went
wrong with its URL. obstore's own retries are off
so that one retry policy (``remote.retries``) holds.

Only plain URLs go this way: HTTP(S) without custom headers, TLS settings, credentials or a query
(obstore's HTTP store takes a path, not a query: S3's presigned URLs stay with gdsstore's own client).

One event loop thread per process drives obstore. obstore's Rust runtime does not survive ``fork()``: in a
child of a process that used it, a call would hang, so there the route is off and the child's waves go
through gdsstore's own client (a child that never inherited a started runtime uses the route).
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from gdsstore import policy
from gdsstore.errors import RemoteIOError

__all__ = ["NativeRead", "available", "fetch", "takes"]

_COPY_IN_LOOP = 1 << 20  # bodies this small are copied on the event loop; larger ones on its executor


@dataclass
class NativeRead:
    """``size`` bytes of ``url`` from ``offset`` into ``dest``.

    ``size`` -1: the whole object (``whole``) of unknown size, or its last ``suffix`` bytes: ``dest`` is
    called with the size and returns where the bytes go. ``whole`` with a ``size``: the object must be exactly that. ``exact``: a
    range inside its object (else one that may end early where the object ends, zarr's clamping).
    After :func:`fetch`: ``got`` the bytes that landed (-1: missing), ``error`` why it was not taken.
    """

    url: str
    offset: int
    size: int
    dest: Any
    whole: bool = False
    exact: bool = True
    suffix: int | None = None
    got: int = -1
    error: BaseException | None = field(default=None, repr=False)


_lock = threading.Lock()
_state: dict[str, Any] = {}


def _obstore() -> Any | None:
    with _lock:
        if "obstore" not in _state:
            try:
                import obstore
                from obstore.store import HTTPStore

                _state["obstore"] = (obstore, HTTPStore)
            except ImportError:
                _state["obstore"] = None
        return _state["obstore"]


def available() -> bool:
    """Whether the route runs here: ``remote.native`` on, obstore importable, and not a forked child of
    a process that started obstore's runtime (its threads are not in the child: a call would hang)."""
    started = _state.get("runtime_pid")
    if started is not None and started != os.getpid():
        return False
    return policy.settings().remote_native and _obstore() is not None


class _Loop:
    """One event loop thread per process, with obstore's stores per origin and settings."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.stores: dict[tuple[str, float, float], Any] = {}
        self.thread = threading.Thread(target=self.loop.run_forever, name="gdsstore-obstore", daemon=True)
        self.thread.start()

    def store(self, origin: str) -> Any:
        s = policy.settings()
        key = (origin, s.remote_connect_timeout, s.remote_timeout)
        found = self.stores.get(key)
        if found is None:
            found = _obstore()[1].from_url(  # type: ignore[index]
                origin,
                client_options={
                    "allow_http": True,
                    "connect_timeout": f"{max(1, round(s.remote_connect_timeout * 1000))}ms",
                    "timeout": f"{max(1, round(s.remote_timeout * 1000))}ms",
                },
                retry_config={"max_retries": 0, "retry_timeout": timedelta(0)},  # gdsstore's own client retries
            )
            self.stores[key] = found
        return found


def _loop() -> _Loop:
    with _lock:
        lp = _state.get("loop")
        if lp is None or lp.pid != os.getpid():  # a forked child: the parent's thread is not here
            lp = _state["loop"] = _Loop()
        return lp  # type: ignore[no-any-return]


def fetch(reads: Sequence[NativeRead]) -> None:
    """Run every read (``remote.wave_concurrency`` in flight); each one's ``got`` and ``error`` tell what
    happened. Requires :func:`available`."""
    lib = _obstore()
    if lib is None or not reads:
        for r in reads:
            r.error = r.error or OSError("obstore is not available")
        return
    lp = _loop()
    _state.setdefault("runtime_pid", os.getpid())
    limit = policy.settings().remote_wave_concurrency
    asyncio.run_coroutine_threadsafe(_all(lib[0], lp, reads, limit), lp.loop).result()


async def _all(obs: Any, lp: _Loop, reads: Sequence[NativeRead], limit: int) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(r: NativeRead) -> None:
        async with gate:
            try:
                await _read(obs, lp, r)
            except FileNotFoundError:  # a 404 for a path sent as it is: the object is missing
                r.got = -1
            except Exception as exc:  # the usual way asks again and says why
                r.error = exc

    await asyncio.gather(*(one(r) for r in reads))


_PLAIN_PATH = re.compile(r"[A-Za-z0-9._~/-]*")


def takes(url: str) -> bool:
    """Whether ``url`` can go this way: http(s), no query, no credentials, a path obstore sends as it is
    (so that its ``404`` means the object is missing, not that a path was quoted otherwise)."""
    parts = urlsplit(url)
    return (parts.scheme in ("http", "https") and not parts.query and not parts.fragment
            and "@" not in parts.netloc and _PLAIN_PATH.fullmatch(parts.path) is not None)


async def _read(obs: Any, lp: _Loop, r: NativeRead) -> None:
    parts = urlsplit(r.url)
    store = lp.store(f"{parts.scheme}://{parts.netloc}")
    if r.suffix is not None:
        asked: Any = {"suffix": r.suffix}
    else:
        asked = None if r.whole else (r.offset, r.offset + r.size)
    res = await obs.get_async(store, parts.path.lstrip("/"), options=None if asked is None else {"range": asked})
    what = f"GET {r.url}" + ("" if asked is None else f" {res.range}")
    enc = str(res.attributes.get("Content-Encoding", "identity")).strip().lower()
    if enc not in ("identity", ""):  # encoded bytes are not the object's bytes
        raise RemoteIOError(f"{what}: the server sent Content-Encoding {enc!r}")
    body = await res.bytes_async()
    n, (first, end), size = len(body), res.range, int(res.meta["size"])
    if end - first != n:  # obstore hands a short body back as it came
        raise RemoteIOError(f"{what}: {n} bytes arrived for {end - first}")
    if r.suffix is not None and (end != size or n != min(r.suffix, size)):
        raise RemoteIOError(f"{what}: not the last {r.suffix} bytes of a {size}-byte object")
    if (r.whole or r.exact) and r.size >= 0 and n != r.size:
        raise RemoteIOError(f"{what}: {'the object' if r.whole else 'the range'} is {n} bytes, not the {r.size} asked")
    dest = r.dest(n) if callable(r.dest) else r.dest[:n]
    src = np.frombuffer(body, dtype=np.uint8)
    if n >= _COPY_IN_LOOP:  # numpy copies without the GIL: large bodies land in parallel
        await asyncio.get_running_loop().run_in_executor(None, np.copyto, dest, src)
    elif n:
        dest[:] = src
    r.got = n
