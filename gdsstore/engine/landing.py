"""The landing layer: an address table's bytes in one buffer of host, pinned or device memory.

To *land* an :class:`AddressTable` (per item a key, a start, a stop or none, and the size it is expected
to have) is to read every item into its own slot of one buffer (:func:`slot_layout`: 64-byte aligned, in
order) and hand back one :class:`Landed`. :func:`land` is the one entry: it takes the memory (host, the
pinned pool's, or a GPU's) and asks the backend to land the table
(:meth:`gdsstore.engine.backend.Backend.land`): local files by the batched ``preadv`` or the native core
(``gdsstore.engine.localfs.land_files``), remote objects in one wave (``gdsstore.engine.remote.wave.read_wave``), any other
backend by one size lookup and one read per item (:func:`land_objects`). A ``Landed`` may also hold its
items in several buffers (a window's chunks as each decoder left them: ``Landed.empty``), so that every
buffer of items in gdsstore is one type.

Pinned buffers come from one pool beside the bounce ring (``gdsstore.engine.bounce.pinned_pool``),
counted in the ring's account: the ring's slots and the landing buffers stay within
``pinned_memory_limit`` together.

Examples:
    >>> slot_layout(np.array([5, -1, 64, 0]))[0].tolist(), slot_layout(np.array([5, -1, 64, 0]))[1]
    ([0, 64, 64, 128], 128)
    >>> t = AddressTable.from_ranges(["a", "b", "c"], [None, ByteRange("range", 2, 4), ByteRange("suffix", 3)])
    >>> t.clamp(np.array([10, 10, -1]))
    (array([0, 2, 0]), array([10,  2, -1]))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine import bounce, cuda
from gdsstore.engine.pool import map_all
from gdsstore.engine.ranges import ByteRange

__all__ = [
    "ALIGN",
    "MISSING_KEY",
    "AddressTable",
    "BatchResult",
    "Landed",
    "alloc_host",
    "device_pointer",
    "empty_slots",
    "from_host_buffers",
    "land",
    "land_objects",
    "release_host",
    "slot_layout",
]

#: Slots start on a cache line (nvCOMP wants 8-16 bytes; 64 keeps every item on lines of its own).
ALIGN = 64

#: The exceptions that mean "no such key" (zarr's missing chunk): a file or object that is not there, a
#: directory where a key was asked for, a file where a directory of the key's path should be.
MISSING_KEY: tuple[type[OSError], ...] = (FileNotFoundError, IsADirectoryError, NotADirectoryError)

#: ``alloc(nbytes) -> (uint8 array, owner)``: the landing buffer and what to give back for it.
Alloc = Callable[[int], tuple[np.ndarray, Any]]
Free = Callable[[Any], None]


def slot_layout(sizes: Any, align: int = ALIGN) -> tuple[np.ndarray, int]:
    """Slot offsets (``align``-byte aligned, in order) for ``sizes`` (``-1``: missing, no room), and
    the bytes of the buffer that holds them all (the last slot padded too).

    Examples:
        >>> [o.tolist() for o in slot_layout([300, 1], align=256)[:1]], slot_layout([300, 1], align=256)[1]
        ([[0, 512]], 768)
    """
    padded = (np.asarray(sizes, dtype=np.int64).clip(0) + align - 1) // align * align
    ends = np.cumsum(padded)
    return ends - padded, int(ends[-1]) if len(ends) else 0


class BatchResult:
    """Per item of a batch (:meth:`Backend.get_batch`, :meth:`Backend.put_batch`): its buffer (None:
    missing, or a write) and, where it failed, its error; one item's failure fails it alone."""

    __slots__ = ("bufs", "errors")

    def __init__(self, n: int) -> None:
        self.bufs: list[Any] = [None] * n
        #: item -> the exception that failed it.
        self.errors: dict[int, BaseException] = {}


def device_pointer(a: Any) -> int:
    """Address of a device (or host) array's first byte: CuPy's ``data.ptr``, numpy's ``ctypes.data``."""
    return int(a.data.ptr) if hasattr(a, "__cuda_array_interface__") else int(a.ctypes.data)


class Landed:
    """Items in buffers: per item ``i`` an offset and a size (``offsets[i]``/``sizes[i]``, ``int64``;
    ``sizes[i] == -1``: absent: missing, failed with ``errors="return"`` of a wave, or left to another
    decoder) and the buffer it is in.

    A landing holds every item in one buffer: host memory (pinned or not), or device memory (``dev``) when
    the items were landed through the bounce ring straight on the GPU; ``host`` of a device landing is a copy
    made on first use. A window's decoded chunks come out of several decoders at once (nvCOMP's output, the
    staging itself for chunks stored raw, blosc's groups, the host decoder's copy), and gathering them in one
    buffer would cost a device copy of every window: ``Landed.empty(n)`` makes a ``Landed`` whose items
    ``add`` and ``take`` place in buffers of their own (item ``i`` in ``buffers[buffer_of[i]]``).

    Attributes:
        pinned: the pool's pinned buffer behind ``host`` (given back by :meth:`release`), else None.
        errors: per item, the exception that failed it (a wave's ``errors="return"``), else None.
        requests: how many requests a wave sent (retries not counted).
        etags: per key, the ETag every answer of a wave carried, where it saw them all.
        split: makes :meth:`all_bytes` (the native core's copies on several threads); None: one by one.
        buffer_of: per item, its buffer in ``buffers`` (``-1``: absent); None: every item in the one buffer.
        buffers: the buffers of a landing in several (kept alive with it), else empty.
        absent_reason: why absent items were left to another decoder (the trace's reason), else None.

    Examples:
        >>> a = Landed(np.arange(8, dtype=np.uint8), [0, 4], [3, -1])
        >>> a.item(0).tolist(), a.item(1), a.absent.tolist()
        ([0, 1, 2], None, [1])
        >>> b = Landed.empty(3)
        >>> b.add(np.arange(4, dtype=np.uint8), [2], [1], [2])
        >>> b.take(a, [1, 0])
        >>> [None if v is None else v.tolist() for v in map(b.item, range(3))]
        [None, [0, 1, 2], [1, 2]]
    """

    __slots__ = (
        "_host", "absent_reason", "buffer_of", "buffers", "dev", "errors", "etags", "offsets", "pinned",
        "requests", "sizes", "split",
    )

    def __init__(
        self,
        host: np.ndarray | None,
        offsets: Any,
        sizes: Any,
        pinned: Any = None,
        dev: Any = None,
        *,
        errors: list[BaseException | None] | None = None,
        requests: int = 0,
        etags: dict[str, str] | None = None,
        split: Callable[[Any, Any, Any], list[bytes | None]] | None = None,
        buffer_of: np.ndarray | None = None,
    ) -> None:
        if host is None and dev is None and buffer_of is None:
            raise ValueError("Landed(): neither a host nor a device buffer (Landed.empty(n) for items added later)")
        self._host = host
        self.dev = dev
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.pinned = pinned
        self.errors = errors
        self.requests = requests
        self.etags = etags if etags is not None else {}
        self.split = split
        self.buffer_of = buffer_of
        self.buffers: list[Any] = []
        self.absent_reason: str | None = None

    @classmethod
    def empty(cls, n: int) -> Landed:
        """``n`` absent items, for :meth:`add` and :meth:`take` to place in buffers of their own."""
        return cls(None, np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64), buffer_of=np.full(n, -1, dtype=np.int64))

    @classmethod
    def each(cls, views: Sequence[Any]) -> Landed:
        """Item ``i`` is ``views[i]`` (a ``uint8`` array, host or device; ``None``: absent), each in its own
        buffer: no copy."""
        out = cls.empty(len(views))
        for i, v in enumerate(views):
            if v is not None:
                out.add(v, [i], [0], [v.size])
        return out

    def add(self, buf: Any, ids: Any, offsets: Any, sizes: Any) -> None:
        """Items ``ids`` are ``sizes`` bytes at ``offsets`` of ``buf`` (a ``uint8`` array, host or device).

        Raises:
            ValueError: this landing holds its items in one buffer (it was not made by :meth:`empty`).
        """
        if self.buffer_of is None:
            raise ValueError("Landed.add(): this landing holds its items in one buffer; add to Landed.empty(n)")
        self.buffer_of[ids] = len(self.buffers)
        self.offsets[ids] = offsets
        self.sizes[ids] = sizes
        self.buffers.append(buf)

    def take(self, other: Landed, ids: Any) -> None:
        """``other``'s present items as items ``ids`` of this one (``ids[k]``: ``other``'s item ``k``), in
        ``other``'s buffers (kept alive with this one); ``other``'s absent items stay as they are here."""
        ids = np.asarray(ids, dtype=np.int64)
        if other.buffer_of is None:
            k = other.present
            self.add(other._one_buffer(), ids[k], other.offsets[k], other.sizes[k])
            return
        for b, buf in enumerate(other.buffers):
            k = np.flatnonzero(other.buffer_of == b)
            self.add(buf, ids[k], other.offsets[k], other.sizes[k])

    def hold(self, buf: Any) -> None:
        """Keep ``buf`` alive with the items (a device staging that work queued on its stream still reads)."""
        self.buffers.append(buf)

    @property
    def host(self) -> np.ndarray:
        """The one host buffer (a device landing's copied on first use).

        Raises:
            ValueError: the items are in several buffers (:meth:`item` or :meth:`view` each).
        """
        if self._host is None:
            if self.buffer_of is not None:
                raise ValueError("Landed.host: the items are in several buffers; take each by item(i) or view(i)")
            self._host = self.dev.get()
        return self._host

    @property
    def present(self) -> np.ndarray:
        """Indices of the items that are here."""
        return np.flatnonzero(self.sizes >= 0)

    @property
    def absent(self) -> np.ndarray:
        """Indices of the items that are not here (missing, failed, or left to another decoder)."""
        return np.flatnonzero(self.sizes < 0)

    @property
    def nbytes(self) -> int:
        return int(self.sizes.clip(0).sum())

    def sub(self, offsets: Any, sizes: Any) -> Landed:
        """Other items in the same buffer (inner chunks of coalesced reads); shares the memory.

        Raises:
            ValueError: the items are in several buffers.
        """
        if self.buffer_of is not None:
            raise ValueError("Landed.sub(): the items are in several buffers; sub() takes items of one")
        return Landed(self._host, offsets, sizes, self.pinned, self.dev)

    def item(self, i: int) -> Any:
        """Item ``i`` as a ``uint8`` view of the buffer it is in (device memory for a device landing or a
        device decoder's output), or None when absent."""
        n = int(self.sizes[i])
        if n < 0:
            return None
        a = int(self.offsets[i])
        buf = self.buffers[int(self.buffer_of[i])] if self.buffer_of is not None else self._one_buffer()
        return buf[a : a + n]

    def _one_buffer(self) -> Any:
        """The one buffer of a landing in one: on the device where it landed there, else the host's."""
        return self.dev if self.dev is not None else self._host

    def view(self, i: int) -> np.ndarray | None:
        """Item ``i`` in host memory (a view of :attr:`host`; a copy where it is in one of several device
        buffers), or None when absent."""
        if self.buffer_of is not None:
            v = self.item(i)
            return v if v is None or isinstance(v, np.ndarray) else v.get()
        n = int(self.sizes[i])
        if n < 0:
            return None
        a = int(self.offsets[i])
        return self.host[a : a + n]

    def ptrs(self) -> np.ndarray:
        """Address of each item's first byte in its buffer (``int64``; 0: absent)."""
        if self.buffer_of is None:
            base = np.int64(device_pointer(self._one_buffer()))
            out: np.ndarray = np.where(self.sizes >= 0, base + self.offsets, 0)
            return out
        bases = np.array([device_pointer(b) for b in self.buffers] + [0], dtype=np.int64)  # [-1]: absent's 0
        out = np.where(self.sizes >= 0, bases[self.buffer_of] + self.offsets, 0)
        return out

    def all_bytes(self) -> list[bytes | None]:
        """Every item as ``bytes`` (None: absent)."""
        if self.split is not None:
            return self.split(self.host, self.offsets, self.sizes)
        return [None if v is None else v.tobytes() for v in map(self.view, range(len(self.sizes)))]

    def release(self) -> None:
        """Give the pinned buffer back to the pool and drop the device buffers."""
        release_host(self.pinned)
        self.pinned = None
        self.dev = None
        self.buffers = []


@dataclass(frozen=True)
class AddressTable:
    """What to land: per item ``keys[i]``, from ``starts[i]`` to ``stops[i]``.

    ``starts`` None: every item is a whole object. Else ``stops[i] == -1``: to the end of the object, and
    ``starts[i] < 0``: its last ``-starts[i]`` bytes. Ranges are clamped to their objects as zarr says
    (:meth:`clamp`), unless ``exact``: they lie inside them, and a shorter answer is an error. ``expect``:
    whole objects' sizes when known (no size lookup; an object of another size is an error).
    ``max_request``: the most bytes one request of a wave carries when it joins touching ranges of an
    object (None: ``remote.max_range_size``): a large read cut into ranges of that size stays that many
    requests, all in flight at once.
    """

    keys: Sequence[str]
    starts: np.ndarray | None = None
    stops: np.ndarray | None = None
    expect: np.ndarray | None = None
    exact: bool = False
    max_request: int | None = None

    @classmethod
    def from_ranges(cls, keys: Sequence[str], ranges: Sequence[ByteRange | None] | None) -> AddressTable:
        """The table of zarr's requests (``None``: the whole object)."""
        if ranges is None:
            return cls(keys)
        starts = np.zeros(len(keys), dtype=np.int64)
        stops = np.full(len(keys), -1, dtype=np.int64)
        for i, br in enumerate(ranges):
            if br is not None:
                starts[i] = -br.start if br.kind == "suffix" else br.start
                if br.kind == "range" and br.end is not None:
                    stops[i] = br.end
        return cls(keys, starts, stops)

    def byte_ranges(self) -> list[ByteRange | None] | None:
        """The items as zarr's requests (a wave's), ``None`` for all whole objects."""
        if self.starts is None:
            return None
        assert self.stops is not None
        out: list[ByteRange | None] = []
        for a, b in zip(self.starts.tolist(), self.stops.tolist()):
            out.append(ByteRange("suffix", -a) if a < 0 else ByteRange("offset", a) if b < 0 else ByteRange("range", a, b))
        return out

    def clamp(self, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each item's ``(offset, nbytes)`` in objects of ``sizes`` (``-1``: missing, kept), clamped as
        ``ByteRange.resolve`` clamps one."""
        sizes = np.asarray(sizes, dtype=np.int64)
        if self.starts is None:
            return np.zeros(len(sizes), dtype=np.int64), sizes
        assert self.stops is not None
        size = sizes.clip(0)
        suffix = self.starts < 0
        off = np.where(suffix, size - np.minimum(-self.starts, size), np.minimum(self.starts, size))
        end = np.where(self.stops < 0, size, np.minimum(self.stops, size))
        n = np.where(sizes < 0, -1, np.maximum(0, end - off))
        return np.where(sizes < 0, 0, off), n


def alloc_host(total: int, pinned: bool) -> tuple[np.ndarray, Any]:
    """``total`` bytes of host memory and their owner: a pinned pool buffer (``bounce.pinned_pool``) when ``pinned`` and a
    GPU is here (``None`` owner: pageable, also when ``pinned_memory_limit`` leaves no room, traced)."""
    if pinned and cuda.gpu_available():
        buf = bounce.pinned_pool.get(total)
        if buf is not None:
            return np.frombuffer(buf.view, dtype=np.uint8, count=total), buf
        _trace.record("stage", "pageable", "pinned_memory_limit reached: staged in pageable memory", total, 0.0)
    return np.empty(total, dtype=np.uint8), None


def release_host(owner: Any) -> None:
    """Give an :func:`alloc_host` owner back to the pinned pool (``None``: nothing to give back)."""
    if owner is not None:
        bounce.pinned_pool.put(owner)


def empty_slots(sizes: Any, *, pinned: bool) -> Landed:
    """One buffer with a slot of ``sizes[i]`` bytes for item ``i`` (``-1``: absent), for the caller to fill:
    pinned where ``pinned`` and a GPU is here (:func:`alloc_host`)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    offsets, total = slot_layout(sizes)
    host, owner = alloc_host(total, pinned)
    return Landed(host, offsets, sizes, owner)


def from_host_buffers(bufs: Sequence[Any], *, pinned: bool) -> Landed:
    """Host byte buffers (numpy arrays, or bytes-like; ``None``: missing) copied into the slots of one buffer
    (:func:`empty_slots`): items that did not come through a backend (another zarr store's, decoded payloads).

    Examples:
        >>> [bytes(v) for v in map(from_host_buffers([b"ab", np.arange(3, dtype=np.uint8)], pinned=False).view, (0, 1))]
        [b'ab', b'\\x00\\x01\\x02']
    """
    landed = empty_slots([-1 if b is None else int(np.asarray(b).nbytes) for b in bufs], pinned=pinned)
    host = landed.host
    for b, a, n in zip(bufs, landed.offsets.tolist(), landed.sizes.tolist()):
        if b is not None:
            host[a : a + n] = b.view(np.uint8).reshape(-1) if isinstance(b, np.ndarray) else np.frombuffer(b, np.uint8)
    return landed


def land(
    backend: Any,
    table: AddressTable,
    *,
    into: Literal["host", "pinned"] | int | np.ndarray = "host",
    room: int | None = None,
    where: str = "land()",
) -> Landed:
    """Land ``table``'s items of ``backend`` in one buffer (:func:`slot_layout`).

    Args:
        backend: a :class:`~gdsstore.engine.backend.Backend`; its :meth:`land` reads the items.
        table: the items.
        into: ``"host"`` (pageable), ``"pinned"`` (the pinned pool's, pageable where a GPU is missing or
            ``pinned_memory_limit`` is reached), or a GPU ordinal: on that GPU, through the bounce ring,
            where the backend lands on devices (:attr:`~gdsstore.engine.backend.Backend.lands_on_device`),
            else in pinned memory (the caller copies it over). Or a host ``uint8`` array of the caller's
            (a run of a larger buffer): the items land in its first bytes where it holds them all, else in
            a new host buffer (``landed.host`` tells which); the caller owns it, nothing is given back.
        room: bytes a wave sets aside for whole objects of unknown size (see ``read_wave``).
        where: the caller, for messages.

    Returns:
        The :class:`Landed` items (``sizes[i] == -1``: missing).

    Raises:
        OSError: a short read, an object not of its expected size, or a request failed for good.
    """
    device = into if isinstance(into, int) and not isinstance(into, bool) else None
    alloc: Alloc
    free: Free
    if isinstance(into, np.ndarray):
        alloc, free = _in_region(into), _caller_owns
    else:
        pinned = into == "pinned" or device is not None
        alloc, free = (lambda n: alloc_host(n, pinned)), release_host
    if device is not None and not backend.lands_on_device:
        device = None
    landed: Landed = backend.land(table, alloc, free, device=device, room=room, where=where)
    return landed


def _in_region(region: np.ndarray) -> Alloc:
    """``alloc`` of a landing into the caller's ``region``: its first bytes, or a new host buffer where it
    is too small."""

    def alloc(n: int) -> tuple[np.ndarray, Any]:
        return (region[:n], None) if n <= region.size else (np.empty(n, dtype=np.uint8), None)

    return alloc


def _caller_owns(owner: Any) -> None:
    """``free`` of a landing into the caller's memory: nothing to give back."""


def _short(keys: Sequence[str], got: np.ndarray, sizes: np.ndarray, offsets: np.ndarray, where: str) -> None:
    """Refuse items that got fewer bytes than their slots (a file or object shorter than asked)."""
    short = np.flatnonzero((got >= 0) & (got < sizes.clip(0)))
    if len(short):
        i = int(short[0])
        raise OSError(
            f"{where}: short read of {keys[i]!r}: {int(got[i])} of {int(sizes[i])} bytes at offset {int(offsets[i])}"
        )


def checked_sizes(
    table: AddressTable, offsets: np.ndarray, sizes: np.ndarray, got: np.ndarray, where: str
) -> np.ndarray:
    """The landed sizes after reads that returned ``got`` bytes per item (``-1``: missing).

    With ``table.expect`` one byte more than expected was asked for, so that a larger object is seen.

    Raises:
        OSError: a short read, or an object not of its expected size.
    """
    gone = got < 0
    if gone.any():
        sizes = np.where(gone, -1, sizes)  # deleted since its size was looked up: missing, as zarr says
    if table.expect is not None:
        bad = np.flatnonzero((got >= 0) & (got != sizes - 1))
        if len(bad):
            i = int(bad[0])
            what = "larger than" if got[i] == sizes[i] else f"{int(got[i])} bytes, not"
            raise OSError(f"{where}: {table.keys[i]!r} is {what} the {int(sizes[i]) - 1} bytes expected")
        sizes = np.where(gone, -1, sizes - 1)
    _short(table.keys, got, sizes, offsets, where)
    return sizes


def land_objects(backend: Any, table: AddressTable, alloc: Alloc, free: Free, where: str) -> Landed:
    """Any backend: one size lookup per item, then one read per item into its slot, ``num_threads`` at a
    time on the engine's pool (items missing or deleted meanwhile: ``-1``)."""
    threads = policy.settings().num_threads
    keys = table.keys

    def size(key: str) -> int:
        try:
            return int(backend.size(key))
        except MISSING_KEY:
            return -1

    found = np.array(map_all(size, keys, threads), dtype=np.int64)
    if table.expect is not None:
        bad = np.flatnonzero((found >= 0) & (found != table.expect))
        if len(bad):
            i = int(bad[0])
            raise OSError(f"{where}: {keys[i]!r} is {int(found[i])} bytes, not the {int(table.expect[i])} expected")
    offsets, sizes = table.clamp(found)
    slots, total = slot_layout(sizes)
    host, owner = alloc(total)
    got = sizes.copy()
    offs, lens, dests = offsets.tolist(), sizes.tolist(), slots.tolist()

    def read(i: int) -> None:
        if lens[i] <= 0:
            return
        try:
            with backend.open(keys[i], "rb") as fh:
                got[i] = fh.read(host[dests[i] : dests[i] + lens[i]], lens[i], offs[i])
        except MISSING_KEY:
            got[i] = -1

    try:
        map_all(read, range(len(keys)), threads)
        sizes = np.where(got < 0, -1, sizes)
        _short(keys, got, sizes, offsets, where)
    except BaseException:
        free(owner)
        raise
    return Landed(host, slots, sizes, owner)
