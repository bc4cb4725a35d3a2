"""Reads of many files or byte ranges at once, for the ``gds`` filesystem's ``cat`` and ``cat_ranges``.

Remote items that need no size lookup go as one wave per backend (every request in flight together,
one buffer for all the bodies); the others are opened a batch of files at a time, their nearby ranges
coalesced into one engine read each, every read of a batch started before any is awaited.

Each function fills ``out[i]`` with the ``bytes`` of item ``i``, or the exception that failed it alone.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from gdsstore.adapters.fsspec.file import BytesBuilder, byte_range, open_for_reading, resolve_range
from gdsstore.engine.backend import Backend
from gdsstore.engine.landing import Alloc
from gdsstore.engine.ranges import ByteRange, RangeRead, start_range_reads

#: ``path -> (the backend holding it, its key there)``: the filesystem's ``_locate``.
Locate = Callable[[str], tuple[Backend, str]]
#: ``paths -> (each one's backend (None: refused), each one's key there, {index: the exception that refused
#: it})``: the filesystem's ``_locate_many``, each backend looked up once for thousands of paths.
LocateMany = Callable[[list[str]], tuple[list[Backend | None], list[str], dict[int, Exception]]]

# cat_ranges merges ranges of one file closer than this into one engine read: reading a small gap
# costs less than another request (a syscall locally, a round trip remotely).
MAX_GAP_LOCAL = 64 << 10
MAX_GAP_REMOTE = 1 << 20
_MAX_BLOCK = 64 << 20
# Files opened at once by cat_ranges (each holds a descriptor or a connection).
_OPEN_BATCH = 64


#: The largest wave buffer kept between calls (a ``cat`` of 4,096 objects of 16 KiB lands in 64 MiB).
SCRATCH_MAX = 64 << 20


class _Scratch:
    """One host buffer kept between the waves whose bytes are copied out at once (``cat``, ``cat_ranges``):
    fresh memory costs its page faults (the kernel zeroing every page) on every call again, about a sixth of
    the CPU of a ``cat`` of 4,096 objects of 16 KiB. At most one buffer of at most :data:`SCRATCH_MAX` bytes
    is kept; a wave that finds it taken (another thread's) or too small gets fresh memory."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.kept: np.ndarray | None = None

    def wave_alloc(self) -> tuple[Alloc, Callable[[], None]]:
        """An ``alloc`` for one wave, and the call that takes its buffer back once the wave's bytes are copied
        out. The wave's first buffer is the kept one where that is large enough; a later one (the wave grows
        and copies its bytes over) is always fresh memory."""
        with self._lock:
            kept, self.kept = self.kept, None
        first: list[np.ndarray] = []

        def alloc(n: int) -> tuple[np.ndarray, None]:
            if first:  # never the buffer the wave copies from
                return np.empty(n, np.uint8), None
            first.append(kept if kept is not None and kept.nbytes >= n else np.empty(n, np.uint8))
            return first[0][:n], None

        def done() -> None:
            keep = first[0] if first and first[0].nbytes <= SCRATCH_MAX else kept
            with self._lock:
                if keep is not None and (self.kept is None or self.kept.nbytes < keep.nbytes):
                    self.kept = keep

        return alloc, done


_scratch = _Scratch()


def _fresh_scratch_in_child() -> None:
    global _scratch
    _scratch = _Scratch()  # the parent's lock may have been held by a thread the child does not have


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_scratch_in_child)


def _view(b: BytesBuilder) -> memoryview:
    return b.view


def cat_wave(locate_many: LocateMany, paths: list[str]) -> list[Any]:
    """Whole remote objects, one wave per backend: ``bytes``, or the exception of a path."""
    out: list[Any] = [None] * len(paths)
    wave_into(locate_many, out, paths, list(range(len(paths))), [None] * len(paths), 0, "GDSFileSystem.cat()")
    return out


def _by_backend(backends: list[Backend | None]) -> list[tuple[Backend, list[int]]]:
    """The located items grouped by backend (``None``: refused, in none), each group's items in order."""
    if None not in backends and len(set(map(id, backends))) == 1:  # one backend (the usual cat): every item
        return [(backends[0], list(range(len(backends))))]  # type: ignore[list-item]
    groups: dict[int, tuple[Backend, list[int]]] = {}
    for k, backend in enumerate(backends):
        if backend is not None:
            groups.setdefault(id(backend), (backend, []))[1].append(k)
    return list(groups.values())


def _wave_values(backend: Backend, keys: list[str], ranges: list[ByteRange | None], gap: int, where: str,
                 names: list[str]) -> list[Any]:
    """One backend's wave: each item's ``bytes``, or the exception that failed it (FileNotFoundError, naming
    ``names[m]``, for a missing file)."""
    alloc, done = _scratch.wave_alloc()
    try:
        wave = backend.get_many(keys, ranges, alloc, errors="return", max_gap=gap, max_bytes=_MAX_BLOCK, where=where)
        values: list[Any] = wave.all_bytes()  # one bytes each, copied in parallel
    finally:
        done()  # the wave's bytes are copied out (or it failed): its buffer is free for the next
    errors = wave.errors or []
    if None in values or any(errors):
        for m, (value, err) in enumerate(zip(values, errors or [None] * len(values), strict=True)):
            if err is not None:
                values[m] = err
            elif value is None:
                values[m] = FileNotFoundError(f"{where}: no such file: {names[m]!r}")
    return values


def wave_into(
    locate_many: LocateMany,
    out: list[Any],
    paths: list[str],
    items: list[int],
    ranges: list[ByteRange | None],
    gap: int,
    where: str,
) -> None:
    """Items ``items`` (``paths[i]``, ``ranges[k]`` of it) in one wave per backend: ``out[i]`` gets
    ``bytes`` or the exception that failed the item (FileNotFoundError for a missing file)."""
    named = [paths[i] for i in items]
    backends, keys, refused = locate_many(named)
    for k, exc in refused.items():
        out[items[k]] = exc
    for backend, ks in _by_backend(backends) if items else ():
        values = _wave_values(backend, [keys[k] for k in ks], [ranges[k] for k in ks], gap, where,
                              [named[k] for k in ks])
        if len(ks) == len(out) == len(items):  # every item in order: out is this wave's values
            out[:] = values
        else:
            for k, value in zip(ks, values, strict=True):
                out[items[k]] = value


def cat_ranges(
    locate: Locate, locate_many: LocateMany, paths: list[str], starts: list[int | None], ends: list[int | None],
    gap: int, *, waves: bool,
) -> list[Any]:
    """Ranges ``[starts[i], ends[i])`` of ``paths[i]`` (fsspec's convention): ``bytes`` or the
    exception of each. ``waves``: remote paths, whose ranges that need no size lookup go in one wave."""
    out: list[Any] = [None] * len(paths)
    rest = list(range(len(paths)))
    if waves:
        ranges = [byte_range(starts[i], ends[i]) for i in rest]
        sized = [i for i in rest if ranges[i] is not False]
        rest = [i for i in rest if ranges[i] is False]
        wave_into(locate_many, out, paths, sized, [ranges[i] or None for i in sized], gap,
                  "GDSFileSystem.cat_ranges()")
    by_path: dict[str, list[int]] = {}
    for i in rest:
        by_path.setdefault(paths[i], []).append(i)
    files = list(by_path.items())
    for b in range(0, len(files), _OPEN_BATCH):
        _read_files_ranges(locate, files[b : b + _OPEN_BATCH], starts, ends, gap, out)
    return out


def _read_files_ranges(
    locate: Locate,
    files: list[tuple[str, list[int]]],
    starts: list[int | None],
    ends: list[int | None],
    gap: int,
    out: list[Any],
) -> None:
    """Read the ranges of a batch of files: every file's reads start before any is awaited."""
    opened: list[Any] = []
    reads: list[tuple[list[int], RangeRead[BytesBuilder]]] = []  # (out index of each span, read)
    try:
        for path, items in files:
            try:
                backend, key = locate(path)
                f = open_for_reading(backend, key, path, "GDSFileSystem.cat_ranges()")
            except Exception as exc:
                for i in items:
                    out[i] = exc
                continue
            opened.append(f)
            spans = [resolve_range(starts[i], ends[i], f.size) for i in items]
            where = f"GDSFileSystem.cat_ranges({path!r})"
            started = start_range_reads(
                f, spans, BytesBuilder, max_gap=gap, max_bytes=_MAX_BLOCK, target=_view, where=where
            )
            reads.extend((items, read) for read in started)
        for items, read in reads:
            try:
                buf = read.result()
                # A range that fills its read becomes its bytes without a copy; others are sliced.
                for m, a, b in read.slices():
                    out[items[m]] = buf.to_bytes(a, b)
            except Exception as exc:
                for m, _, _ in read.members:
                    out[items[m]] = exc
    finally:
        for f in opened:
            f.close()
