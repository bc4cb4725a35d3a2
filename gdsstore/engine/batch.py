"""Batched local reads: many whole files or byte ranges into slots of one host buffer.

A zarr selection touches hundreds or thousands of chunk files. Reading them through one
:class:`~gdsstore.engine.local.LocalFile` each costs ~100 us of Python per file (settings, buffer
checks, routing) that a batch into one host buffer does not need: its route is POSIX into host
memory, decided once per batch by the policy ("host buffer"). Here a pool of ``num_threads`` threads
takes contiguous groups of the batch and runs ``open``/``preadv``/``close`` straight into each slot
(the syscalls release the GIL); one trace event records the whole batch. Where the native core
(``gdsstore._core``) is built, :func:`read_batch` hands it the whole batch (or each staging slot's reads)
in one call that runs them in Rust with the GIL released (:func:`gdsstore.policy.decide_local_batch`;
its reason is in the trace): no Python per file, no GIL hand-off between the reading threads.

Everything is vectorized on the caller's side: offsets, sizes and destination offsets are numpy
arrays, and the result is one numpy array of byte counts.

Example:
    >>> import numpy as np, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for name, data in (("a", b"hello"), ("b", b"world!")):
    ...     with open(os.path.join(d, name), "wb") as f:
    ...         _ = f.write(data)
    >>> paths = [os.path.join(d, n) for n in ("a", "b", "missing")]
    >>> sizes = stat_batch(paths)
    >>> sizes.tolist()
    [5, 6, -1]
    >>> dest = np.zeros(16, dtype=np.uint8)
    >>> got = read_batch(paths, np.zeros(3, np.int64), sizes.clip(0), dest, np.array([0, 8, 0]))
    >>> got.tolist(), bytes(dest[:5]), bytes(dest[8:14])
    ([5, 6, 0], b'hello', b'world!')
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine import native
from gdsstore.engine.landing import MISSING_KEY, BatchResult
from gdsstore.engine.pool import run_pieces
from gdsstore.engine.ranges import ByteRange

__all__ = ["HostSink", "Sink", "groups", "piece_size", "read_batch", "read_objects", "stat_batch"]

_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_S_IFMT, _S_IFREG = 0o170000, 0o100000
#: Bytes a pool task of :func:`read_objects` should have at least: below it, one more thread costs
#: more in hand-offs than it saves (a batch of 64 KiB chunks runs in the calling thread).
_GROUP_BYTES = 1 << 20


def groups(n: int, parts: int) -> list[range]:
    """``range(n)`` cut into at most ``parts`` contiguous groups (one pool task each).

    One task per file would cost more in futures than in reads for small chunks.
    """
    if n <= 0:
        return []
    parts = max(1, min(parts, n))
    step = -(-n // parts)
    return [range(a, min(n, a + step)) for a in range(0, n, step)]


def _threads(num_threads: int | None) -> int:
    return num_threads if num_threads and num_threads > 0 else policy.settings().num_threads


def _run_groups(run: Callable[[range], None], n: int, threads: int) -> None:
    """``run`` over contiguous groups on the engine pool; the first error is raised only once every
    group has finished (no thread still writes into the caller's buffer)."""

    def task(g: range) -> int:
        run(g)
        return 0

    gs = groups(n, threads)
    run_pieces([partial(task, g) for g in gs], [0] * len(gs), threads).result()


def stat_batch(paths: Sequence[str], num_threads: int | None = None, *, core: bool = True) -> np.ndarray:
    """Sizes of many files (``int64``; ``-1`` where a path does not exist or is not a file).

    Args:
        paths: local file paths.
        num_threads: threads to use (default: the policy's ``num_threads``).
        core: let the native core look them up (one call, as :func:`read_batch`); ``False``: Python threads.
    """
    n = len(paths)
    out = np.full(n, -1, dtype=np.int64)
    if core and policy.decide_local_batch(core_missing=_core_missing(), reads=n).route == "core":
        # One call, the GIL released; a helper thread per 512 paths (a stat is ~1 us there).
        t = max(1, min(_threads(num_threads), n // 512))
        _raise_core_errors(_core_module().stat_files(list(paths), out, threads=t), paths)
        return out

    def run(g: range) -> None:
        stat = os.stat
        for i in g:
            try:
                st = stat(paths[i])
            except MISSING_KEY:
                continue
            if st.st_mode & 0o170000 == 0o100000:  # S_ISREG without a call per file
                out[i] = st.st_size

    _run_groups(run, n, _threads(num_threads))
    return out


def _check_batch(
    where: str, n: int, offsets: np.ndarray, sizes: np.ndarray, dest_offsets: np.ndarray, dest_nbytes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    offsets = np.asarray(offsets, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    dest_offsets = np.asarray(dest_offsets, dtype=np.int64)
    if not (len(offsets) == len(sizes) == len(dest_offsets) == n):
        raise ValueError(
            f"{where}: {n} paths but {len(offsets)} offsets, {len(sizes)} sizes, {len(dest_offsets)} dest_offsets"
        )
    if n and int((dest_offsets + sizes.clip(0)).max()) > dest_nbytes:
        raise ValueError(f"{where}: reads overflow the destination of {dest_nbytes} bytes")
    if n and int(dest_offsets.min()) < 0:
        raise ValueError(f"{where}: negative destination offset {int(dest_offsets.min())}")
    return offsets, sizes, dest_offsets


def _cut(
    offsets: np.ndarray, sizes: np.ndarray, dest_offsets: np.ndarray, piece: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cut reads where the destination crosses a multiple of ``piece``: ``(owner, file offset, size,
    destination offset)`` per part, so no part straddles two pieces of the destination. Reads of
    size <= 0 keep one part of their own size (skipped by the readers)."""
    n = len(sizes)
    s = sizes.clip(0)
    first = dest_offsets // piece
    cuts = (dest_offsets + np.maximum(s, 1) - 1) // piece - first + 1
    if n == 0 or int(cuts.max()) == 1:
        return np.arange(n), offsets, sizes, dest_offsets
    owner = np.repeat(np.arange(n), cuts)
    k = np.arange(len(owner)) - (np.cumsum(cuts) - cuts)[owner]  # part number within its read
    d0 = dest_offsets[owner]
    lo = np.maximum(d0, (first[owner] + k) * piece)
    hi = np.minimum(d0 + s[owner], (first[owner] + k + 1) * piece)
    return owner, offsets[owner] + (lo - d0), np.where(sizes[owner] <= 0, sizes[owner], hi - lo), lo


def _fold(n: int, owner: np.ndarray, pgot: np.ndarray, p_size: np.ndarray) -> np.ndarray:
    """Per-read byte counts from per-part counts: the parts' bytes up to the first short one;
    -1 where the file is gone."""
    if len(owner) == n:
        return pgot
    got = np.zeros(n, dtype=np.int64)
    short = pgot < p_size
    first_short = np.full(n, len(owner), dtype=np.int64)
    np.minimum.at(first_short, owner[short], np.flatnonzero(short))
    counted = np.arange(len(owner)) <= first_short[owner]
    np.add.at(got, owner[counted], pgot[counted].clip(0))
    got[owner[pgot < 0]] = -1
    return got


def _pread_path(path: str, view: memoryview, d0: int, size: int, off: int) -> int:
    """``size`` bytes at ``off`` of ``path`` into ``view[d0:]``: bytes read (short at end of file),
    0 for ``size <= 0``, -1 when the file does not exist."""
    if size <= 0:
        return 0
    try:
        fd = os.open(path, _FLAGS)
    except MISSING_KEY:
        return -1
    try:
        done = 0
        while done < size:
            k = os.preadv(fd, [view[d0 + done : d0 + size]], off + done)
            done += k
            if k == 0 or done < size:  # short read of a regular file: end of file, no 2nd call
                break
    finally:
        os.close(fd)
    return done


def _core_module() -> Any:
    """The native core (:func:`gdsstore.engine.native.load`), or None where it cannot be imported."""
    return native.load()


def _core_missing() -> str | None:
    """Why the native core cannot run a batch; None when it can."""
    return native.unavailable_reason()




def _overlapping(dst: np.ndarray, size: np.ndarray) -> bool:
    """Whether reads sorted by destination (``dst``) land on shared bytes (reads of size <= 0 land none)."""
    s = size.clip(0)
    if len(s) < 2:
        return False
    ends = np.maximum.accumulate(dst + s)
    return bool(np.any((s[1:] > 0) & (dst[1:] < ends[:-1])))


@dataclass
class _Units:
    """The parts of a batch sorted by destination, and its units of work: ``bounds[j]:bounds[j + 1]``
    of the sorted parts share a slot whose destination starts at ``bases[j]``."""

    order: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray
    dests: np.ndarray
    bounds: list[int]
    bases: list[int]


def _units_by_python(units: _Units, paths: list[str], sink: Sink, threads: int) -> np.ndarray:
    """Every unit on the engine's threads, each part by ``open``/``preadv``/``close`` from Python."""
    bounds, bases = units.bounds, units.bases
    pgot = np.zeros(len(units.order), dtype=np.int64)
    # Python ints once, not numpy scalars per file.
    offs, szs, dos, idx = units.offsets.tolist(), units.sizes.tolist(), units.dests.tolist(), units.order.tolist()

    def run(g: range) -> None:
        for j in g:
            base = bases[j]
            view, handle = sink.acquire()
            lo, hi = len(view), 0
            try:
                for i in idx[bounds[j] : bounds[j + 1]]:
                    d = dos[i] - base
                    got = pgot[i] = _pread_path(paths[i], view, d, szs[i], offs[i])
                    if got > 0:
                        lo, hi = min(lo, d), max(hi, d + got)
            except BaseException:
                sink.discard(handle)
                raise
            if hi > lo:
                sink.flush(handle, lo, hi, base)
            else:
                sink.discard(handle)

    _run_groups(run, len(bases), threads)
    return pgot


def _raise_core_errors(errors: list[tuple[int, str, int, str]], paths: Sequence[str]) -> None:
    """The first failed item's error as the OSError the Python route raises; missing files are not errors
    (their count is -1)."""
    for i, kind, errno, message in errors:
        if kind != "not_found":
            if errno:
                raise OSError(errno, os.strerror(errno), paths[i])
            raise OSError(f"read_batch(): {paths[i]!r}: {message}")


def _units_by_core(units: _Units, paths: list[str], sink: Sink, threads: int) -> np.ndarray:
    """The batch through the native core: in place, one call on up to ``threads`` threads (one per
    ~1 MiB); through slots, one call per slot on the engine's threads."""
    core = _core_module()
    order = units.order
    spaths = [paths[i] for i in order.tolist()]
    offs, szs, dsts = units.offsets[order], units.sizes[order], units.dests[order]
    sgot = np.zeros(len(order), dtype=np.int64)
    if sink.piece is None:
        view, _ = sink.acquire()
        t = max(1, min(threads, int(szs.clip(0).sum()) // _GROUP_BYTES))
        _raise_core_errors(core.read_files(spaths, offs, szs, view, dsts, sgot, threads=t), spaths)
    else:
        bounds, bases = units.bounds, units.bases

        def run(g: range) -> None:
            for j in g:
                a, b = bounds[j], bounds[j + 1]
                view, handle = sink.acquire()
                try:
                    d = dsts[a:b] - bases[j]
                    errors = core.read_files(spaths[a:b], offs[a:b], szs[a:b], view, d, sgot[a:b])
                    _raise_core_errors(errors, spaths[a:b])
                except BaseException:
                    sink.discard(handle)
                    raise
                landed = sgot[a:b] > 0
                if landed.any():
                    sink.flush(handle, int(d[landed].min()), int((d + sgot[a:b])[landed].max()), bases[j])
                else:
                    sink.discard(handle)

        _run_groups(run, len(bases), threads)
    pgot = np.empty_like(sgot)
    pgot[order] = sgot
    return pgot


class Sink(Protocol):
    """Where :func:`read_batch` lands its reads: host memory in place (:class:`HostSink`), or device
    memory through slots of the POSIX route's pinned ring (:class:`~gdsstore.engine.bounce.DeviceSink`)."""

    @property
    def nbytes(self) -> int:
        """Size of the destination."""
        ...

    @property
    def piece(self) -> int | None:
        """Bytes of destination per slot (parts never straddle a multiple of it); ``None``: no slots,
        every read lands in place."""
        ...

    @property
    def device(self) -> int | None:
        """The destination's GPU ordinal (``None``: host memory), for the trace."""
        ...

    def acquire(self) -> tuple[memoryview, Any]:
        """A free slot (its writable view, ``piece`` bytes at least) and a handle for the calls below;
        without slots, a view of the whole destination."""
        ...

    def flush(self, handle: Any, lo: int, hi: int, base: int) -> None:
        """Send ``slot[lo:hi]`` to ``dest[base + lo : base + hi]`` and release the slot (asynchronous)."""
        ...

    def discard(self, handle: Any) -> None:
        """Release a slot without sending it (its reads failed)."""
        ...

    def finish(self) -> None:
        """Wait until every flushed slot has landed."""
        ...


class HostSink:
    """A host ``uint8`` array as a :class:`Sink`: reads land in place, nothing to send."""

    piece = None
    device = None

    def __init__(self, dest: np.ndarray) -> None:
        self._view = memoryview(dest).cast("B")
        self.nbytes = self._view.nbytes

    def acquire(self) -> tuple[memoryview, Any]:
        return self._view, None

    def flush(self, handle: Any, lo: int, hi: int, base: int) -> None:
        """Nothing to send: the bytes are in place."""

    def discard(self, handle: Any) -> None:
        """Nothing to release."""

    def finish(self) -> None:
        """Nothing in flight."""


def read_batch(
    paths: Sequence[str],
    offsets: np.ndarray,
    sizes: np.ndarray,
    dest: np.ndarray | Sink,
    dest_offsets: np.ndarray,
    num_threads: int | None = None,
    *,
    into: str | None = None,
    url: str = "",
    core: bool = True,
) -> np.ndarray:
    """Read ``sizes[i]`` bytes at ``offsets[i]`` of ``paths[i]`` into ``dest[dest_offsets[i]:]``.

    Host destinations are read in place, reads larger than ``task_size`` cut into pieces so that a few
    big reads (coalesced shard ranges) still keep every thread busy. A device destination (a
    :class:`Sink` with slots) is cut into ``sink.piece``-byte pieces; a thread reads every part of a
    piece into one pinned slot, then the slot goes out in one copy while the thread reads its next
    piece into another slot: many small files share one copy (small copies are slow), and a slot stays
    in the CPU cache between its read and its copy. Destination bytes between two reads of a piece
    (alignment padding) are then overwritten with undefined bytes.

    Args:
        paths: local file paths (one per read; the same file may appear several times).
        offsets: byte offset in each file (``int64``).
        sizes: bytes to read from each (``int64``; entries ``<= 0`` are skipped and read as 0).
        dest: a ``uint8`` host array (pinned or pageable), or a :class:`Sink`.
        dest_offsets: where each read lands in ``dest``.
        num_threads: threads to use (default: the policy's ``num_threads``).
        into: what ``dest`` is, for the trace reason (default ``"host buffer"`` / ``"device staging"``).
        url: the trace's path column (the backend's URL).
        core: let the native core run the reads where :func:`gdsstore.policy.decide_local_batch` chooses
            it (``False``: the engine's Python threads, the route where the core is not built).

    Returns:
        ``int64`` array of bytes read per entry: short at end of file, ``-1`` where the file does not
        exist (deleted since its size was looked up: missing, as zarr says). Copies have landed.

    Raises:
        ValueError: a read would overflow ``dest``.
        OSError: any other I/O error (the first one; every read has stopped touching ``dest``).
    """
    sink: Sink = HostSink(dest) if isinstance(dest, np.ndarray) else dest
    n = len(paths)
    offsets, sizes, dest_offsets = _check_batch("read_batch()", n, offsets, sizes, dest_offsets, sink.nbytes)
    t0 = time.perf_counter()
    piece = sink.piece
    owner, p_off, p_size, p_dst = _cut(
        offsets, sizes, dest_offsets, piece or max(1 << 20, policy.settings().task_size)
    )
    order = np.argsort(p_dst, kind="stable")
    # A unit of work: the parts that share one slot (every part alone when reads land in place).
    key = p_dst[order] // piece if piece else np.arange(len(order))
    starts = np.flatnonzero(np.diff(key, prepend=-1)) if len(key) else np.zeros(0, dtype=np.int64)
    bases = (key[starts] * piece).tolist() if piece else [0] * len(starts)
    decision = policy.decide_local_batch(
        core_missing=_core_missing() if core else "core=False", reads=len(order), overlapping=_overlapping(p_dst[order], p_size[order])
    )
    units = _Units(order, p_off, p_size, p_dst, np.append(starts, len(key)).tolist(), bases)
    pp = [paths[i] for i in owner.tolist()] if len(owner) != n else list(paths)
    run = _units_by_core if decision.route == "core" else _units_by_python
    try:
        pgot = run(units, pp, sink, _threads(num_threads))
    finally:
        sink.finish()  # no copy still reads a slot or writes the destination
    got = _fold(n, owner, pgot, p_size)
    # No count in the reason (the trace's ops and bytes columns hold them): one row per route and reason.
    reason = f"batch of reads into {into or ('host buffer' if piece is None else 'device staging')}"
    if piece is not None:
        reason += " through pinned bounce slots, async H2D"
    reason += f"; {decision.reason}"
    _trace.record("read", "posix", reason, int(got.clip(0).sum()), time.perf_counter() - t0, url, sink.device)
    return got


def _read_object(path: str, br: ByteRange | None, alloc: Callable[[int], Any]) -> Any:
    """One whole file (or ``br`` of it, zarr's clamping) into ``alloc(n)``; None when ``path`` is
    missing or not a regular file (a directory is not a key)."""
    try:
        fd = os.open(path, _FLAGS)
    except MISSING_KEY:
        return None
    try:
        st = os.fstat(fd)
        if st.st_mode & _S_IFMT != _S_IFREG:
            return None
        off, n = br.resolve(st.st_size) if br is not None else (0, st.st_size)
        buf = alloc(n)
        view = memoryview(buf).cast("B")
        done = 0
        while done < n:
            k = os.preadv(fd, [view[done:]], off + done)
            if k == 0:
                break
            done += k
    finally:
        os.close(fd)
    if done != n:  # the file shrank under us: never hand out a buffer with a stale tail
        raise OSError(f"read_objects(): short read of {path!r}: {done} of {n} bytes")
    return buf


def read_objects(
    paths: Sequence[str],
    ranges: Sequence[ByteRange | None] | None,
    alloc: Callable[[int], Any],
    num_threads: int | None = None,
    *,
    url: str = "",
) -> BatchResult:
    """Many whole files (or a byte range of each) into a host buffer each, as one batch.

    The batch a zarr selection's chunk reads make: each file opened, sized, read with ``preadv`` and
    closed by a pool thread (no per-file settings, routing or futures); contiguous groups of the
    batch share ``num_threads`` threads, a group of at least ~1 MiB each. One trace event records the
    batch (route "posix", reason "batch of reads into host buffer": host memory needs no probe).

    Args:
        paths: local file paths.
        ranges: per item, a :class:`~gdsstore.engine.ranges.ByteRange` (clamped to the file) or None
            for the whole file; None: all whole.
        alloc: ``alloc(nbytes)`` -> a writable host buffer (each item gets its own).
        num_threads: threads to use (default: the policy's ``num_threads``).
        url: the trace's path column (a batch of one file: that file's path).

    Returns:
        :class:`~gdsstore.engine.backend.BatchResult`: buffers (None where a file is missing or a
        directory) and per-item errors (a failed item fails alone).
    """
    n = len(paths)
    out = BatchResult(n)
    rs: Sequence[ByteRange | None] = ranges if ranges is not None else [None] * n
    t0 = time.perf_counter()
    bufs, errors = out.bufs, out.errors

    def run(g: range) -> None:
        for i in g:
            try:
                bufs[i] = _read_object(paths[i], rs[i], alloc)
            except Exception as exc:  # one item's failure (permissions, I/O) is that item's answer
                errors[i] = exc

    threads = _threads(num_threads)
    if n:
        # Whole-file sizes are unknown before the reads: the first file's size stands for all.
        first = rs[0].nbytes if rs[0] is not None and rs[0].kind == "range" else _size_hint(paths[0])
        threads = max(1, min(threads, n * max(first, 1) // _GROUP_BYTES))
    _run_groups(run, n, threads)
    if _trace.active():
        nbytes = sum(memoryview(b).nbytes for b in bufs if b is not None)
        where = paths[0] if n == 1 else url  # a batch of one names its file, as a single read does
        _trace.record("read", "posix", "batch of reads into host buffer", nbytes, time.perf_counter() - t0, where)
    return out


def _size_hint(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def piece_size(total: int, threads: int, cap: int, floor: int = 1 << 20) -> int:
    """A slot's share of ``total`` bytes: at most ``cap``, at least ``floor``, and near a multiple of
    ``threads`` pieces in all, so that the last round of pieces keeps every thread busy.

    Example:
        >>> piece_size(1 << 30, 16, 8 << 20) == 8 << 20
        True
        >>> piece_size((1 << 30) + 2048, 16, 8 << 20)  # 144 pieces: 9 full rounds, not 128 + 1
        7458816
        >>> piece_size(40 << 20, 16, 8 << 20)  # too little for 16 pieces of 1 MiB or more
        2621440
    """
    rounds = max(1, -(-total // (threads * cap)))
    want = -(-total // (threads * rounds))
    want = -(-want // 4096) * 4096
    return max(min(floor, cap), min(cap, want))
