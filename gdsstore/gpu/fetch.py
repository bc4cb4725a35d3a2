"""Fetchers: how the pipeline's reads become one landed buffer per window.

- :class:`EngineFetcher`: a gdsstore backend (``GDSStore.backend``), through the engine's one landing
  function (:func:`gdsstore.engine.landing.land`): no size lookups where sizes are known, on the GPU
  through the bounce ring when the plan says so and the backend can;
- :class:`StoreFetcher`: any other zarr store, through the byte getters' async ``get`` run
  concurrently on the caller's event loop before the executor's thread runs (it never waits for the loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any, Literal

import numpy as np

from gdsstore.engine.backend import Backend
from gdsstore.engine.landing import AddressTable, Landed, from_host_buffers, land
from gdsstore.engine.ranges import ByteRange

__all__ = ["EngineFetcher", "Fetcher", "StoreFetcher", "backend_of", "fetcher_for"]


def backend_of(byte_getter: Any) -> Backend | None:
    """The gdsstore backend behind a zarr byte getter (a ``GDSStore`` path), else ``None``."""
    backend = getattr(getattr(byte_getter, "store", None), "backend", None)
    return backend if isinstance(backend, Backend) else None


class Fetcher:
    """Lands a list of ``(byte getter, range or None)`` in one buffer.

    ``chunk_bound``: set by the pipeline before it reads compressed chunks: a chunk's raw size, about the
    most a stored chunk takes (the first guess of their sizes, before any was read).
    """

    chunk_bound: int | None = None

    def __call__(self, items: list[tuple[Any, ByteRange | None]], pinned: bool) -> Landed:
        raise NotImplementedError

    def whole(self, keys: list[str], expect: np.ndarray | None, pinned: bool, device: int | None = None) -> Landed | None:
        """Whole objects by key, landed the fastest way this fetcher knows; ``None``: no such way
        (the caller uses ``__call__``)."""
        return None

    def ranges(
        self,
        getters: Sequence[Any],
        starts: np.ndarray,
        stops: np.ndarray,
        pinned: bool,
        device: int | None = None,
    ) -> Landed:
        """Byte ranges known to lie inside their objects (shard index entries); ``device``: landed on that
        GPU where the fetcher can."""
        return self._exact(getters, starts, stops, pinned, device)

    def _exact(self, getters: Sequence[Any], starts: np.ndarray, stops: np.ndarray, pinned: bool,
               device: int | None) -> Landed:
        """:meth:`ranges` here: as zarr's range requests, in host memory."""
        items: list[tuple[Any, ByteRange | None]] = [
            (getter, ByteRange("range", a, b))
            for getter, a, b in zip(getters, starts.tolist(), stops.tolist())
        ]
        return self(items, pinned)


def _into(pinned: bool, device: int | None) -> Literal["host", "pinned"] | int:
    return device if device is not None else "pinned" if pinned else "host"


class EngineFetcher(Fetcher):
    """Lands through a gdsstore backend (:func:`gdsstore.engine.landing.land`): local files by the batched
    ``preadv``, remote objects in one wave of concurrent requests per window."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._seen = [0, 0]  # bytes and objects of unknown size read so far: the room the next wave sets aside

    def _room(self, unknown: int, pinned: bool) -> int | None:
        """Room for ``unknown`` objects of unknown size, which also tells the wave how large they are
        expected to be (how many connections, which client): a quarter more than those seen so far
        average; before any was seen, the chunks' raw size (:attr:`chunk_bound`), else 256 KiB each
        pinned (pinning is paid for every byte) or the wave's default in host memory (None). Only waves
        set room aside."""
        if not self.backend.waves:
            return None
        nbytes, count = self._seen
        if count:
            return unknown * (nbytes // count + nbytes // count // 4 + 64)
        if self.chunk_bound:
            return min(unknown * self.chunk_bound, 1 << 30)  # a first guess; more costs one copy, once
        return min(unknown * (256 << 10), 1 << 30) if pinned else None

    def _land(self, table: AddressTable, unknown: np.ndarray | None, pinned: bool, device: int | None) -> Landed:
        """Land ``table``; learn the sizes of its ``unknown`` items (objects of unknown size)."""
        room = None if unknown is None else self._room(int(unknown.sum()), pinned)
        landed = land(self.backend, table, into=_into(pinned, device), room=room, where="land(GDSCodecPipeline)")
        if unknown is not None:
            sizes = landed.sizes[unknown]
            self._seen[0] += int(sizes.clip(0).sum())
            self._seen[1] += int((sizes >= 0).sum())
        return landed

    def __call__(self, items: list[tuple[Any, ByteRange | None]], pinned: bool) -> Landed:
        table = AddressTable.from_ranges([getter.path for getter, _ in items], [br for _, br in items])
        unknown = np.array([br is None or br.kind != "range" for _, br in items], dtype=bool)
        return self._land(table, unknown, pinned, None)

    def whole(self, keys: list[str], expect: np.ndarray | None, pinned: bool, device: int | None = None) -> Landed:
        """Whole objects: of known size (``expect``, uncompressed chunks: no size lookup, an object of
        another size is an error), else sized as they land (remote: each one GET) or by one batched ``stat``
        (local files); ``device``: landed on that GPU where the backend can."""
        unknown = None if expect is not None else np.ones(len(keys), dtype=bool)
        return self._land(AddressTable(keys, expect=expect), unknown, pinned, device)

    def _exact(self, getters: Sequence[Any], starts: np.ndarray, stops: np.ndarray, pinned: bool,
               device: int | None) -> Landed:
        """:meth:`ranges` here: no size lookups (remote: touching ranges of one object share a request)."""
        table = AddressTable([getter.path for getter in getters], starts, stops, exact=True)
        return self._land(table, None, pinned, device)


def _to_zarr_request(br: ByteRange | None) -> Any:
    from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest

    if br is None:
        return None
    if br.kind == "range":
        assert br.end is not None
        return RangeByteRequest(br.start, br.end)
    if br.kind == "offset":
        return OffsetByteRequest(br.start)
    return SuffixByteRequest(br.start)


class StoreFetcher(Fetcher):
    """Fetches through the byte getters' async ``get`` (any zarr store), on the event loop, before the
    executor runs: :meth:`load` awaits the reads a plan step needs, and the executor's calls are then
    served from what was loaded.

    Why not wait for the loop from the executor's thread: that thread is one of the loop's default
    executor (zarr's pool), and the stores' ``get`` coroutines need threads of that same pool (zarr's
    ``LocalStore``, fsspec's sync filesystems); with as many reads at once as the pool has threads,
    each would wait for a thread that is waiting for it.
    """

    def __init__(self) -> None:
        self._loaded: dict[tuple[int, str, int, int | None], np.ndarray | None] = {}

    @staticmethod
    def _key(getter: Any, br: ByteRange | None) -> tuple[int, str, int, int | None]:
        # the batch holds its byte getters for the whole read: their ids name them
        return (id(getter), "", 0, None) if br is None else (id(getter), br.kind, br.start, br.end)

    async def load(self, items: Sequence[tuple[Any, ByteRange | None]]) -> None:
        """Read ``items`` concurrently on the running loop (``async.concurrency`` at a time) and keep
        their bytes (``None``: missing) for the executor's calls."""
        from zarr.core.buffer.cpu import numpy_buffer_prototype
        from zarr.core.common import concurrent_map
        from zarr.core.config import config as zarr_config

        proto = numpy_buffer_prototype()
        bufs = await concurrent_map(
            [(getter, _to_zarr_request(br)) for getter, br in items],
            lambda getter, req: getter.get(prototype=proto, byte_range=req),
            zarr_config.get("async.concurrency"),
        )
        for (getter, br), buf in zip(items, bufs):
            self._loaded[self._key(getter, br)] = None if buf is None else buf.as_numpy_array()

    def __call__(self, items: list[tuple[Any, ByteRange | None]], pinned: bool) -> Landed:
        try:
            bufs = [self._loaded[self._key(getter, br)] for getter, br in items]
        except KeyError as exc:
            raise RuntimeError(
                f"StoreFetcher: {exc.args[0]!r} was not loaded before the executor asked for it "
                "(a bug in gdsstore's pipeline: please report it)"
            ) from None
        return from_host_buffers(bufs, pinned=pinned)


def fetcher_for(getters: Sequence[Any]) -> Fetcher:
    """The engine when every byte getter is a path of one ``GDSStore``, else the store's ``get``
    (:class:`StoreFetcher`: its reads are loaded on the event loop before the executor runs)."""
    backend = backend_of(getters[0])
    if backend is not None and (_one_store(getters) or all(backend_of(g) is backend for g in getters)):
        return EngineFetcher(backend)
    return StoreFetcher()


def _one_store(getters: Sequence[Any]) -> bool:
    """Whether every byte getter is a path of one store object (a zarr read's are): checked in C, with no
    Python per getter; False where one has no store (then each is asked)."""
    try:
        return len(set(map(id, map(attrgetter("store"), getters)))) == 1
    except AttributeError:
        return False
