"""Reads of many files or byte ranges at once, for the ``gds`` filesystem's ``cat`` and ``cat_ranges``.

Remote items that need no size lookup go as one wave per backend (every request in flight together,
one buffer for all the bodies); the others are opened a batch of files at a time, their nearby ranges
coalesced into one engine read each, every read of a batch started before any is awaited.

Each function fills ``out[i]`` with the ``bytes`` of item ``i``, or the exception that failed it alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gdsstore.adapters.fsspec.file import BytesBuilder, byte_range, open_for_reading, resolve_range
from gdsstore.engine.backend import Backend, host_alloc
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


def _view(b: BytesBuilder) -> memoryview:
    return b.view


def cat_wave(locate_many: LocateMany, paths: list[str]) -> list[Any]:
    """Whole remote objects, one wave per backend: ``bytes``, or the exception of a path."""
    out: list[Any] = [None] * len(paths)
    wave_into(locate_many, out, paths, list(range(len(paths))), [None] * len(paths), 0, "GDSFileSystem.cat()")
    return out


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
    backends, keys, refused = locate_many([paths[i] for i in items])
    for k, exc in refused.items():
        out[items[k]] = exc
    if refused or len(set(map(id, backends))) > 1:
        groups: dict[int, tuple[Backend, list[int]]] = {}
        for k, backend in enumerate(backends):
            if backend is not None:
                groups.setdefault(id(backend), (backend, []))[1].append(k)
    else:  # one backend (the usual cat): its wave is every item, in order
        only = backends[0] if backends else None
        groups = {0: (only, list(range(len(items))))} if only is not None else {}
    for backend, ks in groups.values():
        wave = backend.get_many(
            [keys[k] for k in ks], [ranges[k] for k in ks], host_alloc, errors="return", max_gap=gap,
            max_bytes=_MAX_BLOCK, where=where,
        )
        values: list[Any] = wave.all_bytes()  # one bytes each, copied in parallel
        errors = wave.errors or []
        if None in values or any(errors):
            for m, (value, err) in enumerate(zip(values, errors or [None] * len(values), strict=True)):
                if err is not None:
                    values[m] = err
                elif value is None:
                    values[m] = FileNotFoundError(f"{where}: no such file: {paths[items[ks[m]]]!r}")
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
