"""Icechunk repositories with virtual chunks, read through gdsstore's engine.

VirtualiZarr writes an archive's references into an Icechunk repository (``vds.vz.to_icechunk(
session.store)``); each virtual chunk is a (URL, offset, length) triple stamped with the ETag or the
last-modified time of its file when it was written. :func:`from_icechunk` gathers every array's chunk
references from a session in columnar batches (``IcechunkStore.array_chunk_iterator``: numpy arrays of
coordinates, offsets and lengths, one Python call per batch of ``batch_size`` chunks, never one per
chunk) into :class:`~gdsstore.archives.refs.ArrayRefs`, and :func:`open_icechunk` reads them with
the archives' reader (planned, coalesced, one batch per selection, GPU decode).

The stamps: icechunk's Python API hands out no chunk's ETag or last-modified time (its batches hold
location, offset and length only; icechunk 2.3). :func:`open_icechunk` therefore asks icechunk itself
to check them: after the files are stamped for the reader (size and mtime of local files, the
reader's own checks from then on), one byte of one virtual chunk of every referenced file is read
through icechunk's store, all files at once; icechunk refuses a file whose ETag or modification
time no longer matches and that becomes :class:`~gdsstore.errors.ArchiveChangedError`. A file
changed before the open fails there, one changed after it fails the read (never mixes). This checks
one chunk's stamp per file: chunks of one file written by one ``to_icechunk`` call share theirs.

Native chunks (the arrays VirtualiZarr loads and writes into the repository: coordinates, usually)
are read through icechunk's store when the references are gathered (all at once) and kept as
inlined chunks; inline chunks are taken from the batches as they are.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from gdsstore.archives.refs import INLINED, MISSING, ArrayRefs, codecs_v3, file_table
from gdsstore.errors import ArchiveChangedError

__all__ = ["from_icechunk", "icechunk_store", "is_icechunk", "verify_stamps"]

#: icechunk.ChunkType values in the batches of ``array_chunk_iterator``.
_NATIVE, _VIRTUAL, _INLINE = 1, 2, 3
#: Chunk references per batch of ``array_chunk_iterator`` (icechunk's default).
BATCH_SIZE = 100_000


def is_icechunk(source: Any) -> bool:
    """Whether ``source`` is an icechunk ``Repository``, ``Session`` or ``IcechunkStore``."""
    return type(source).__module__.split(".", 1)[0] == "icechunk" and type(source).__name__ in (
        "Repository", "Session", "IcechunkStore",
    )


def icechunk_store(
    source: Any, *, branch: str | None = None, tag: str | None = None, snapshot_id: str | None = None
) -> Any:
    """The ``IcechunkStore`` a source reads from: a ``Repository``'s read-only session (``branch``,
    ``tag`` or ``snapshot_id``; the ``main`` branch when none is named), a ``Session``'s store, or the
    store itself.

    Raises:
        TypeError: not an icechunk object, or a version named for a session or a store.
    """
    name = type(source).__name__
    if not is_icechunk(source):
        raise TypeError(f"icechunk_store(): expected an icechunk Repository, Session or IcechunkStore, got {name}")
    if name == "Repository":
        if branch is None and tag is None and snapshot_id is None:
            branch = "main"
        return source.readonly_session(branch, tag=tag, snapshot_id=snapshot_id).store
    if branch is not None or tag is not None or snapshot_id is not None:
        raise TypeError(f"icechunk_store(): branch/tag/snapshot_id name a version of a Repository, not of a {name}")
    return source.store if name == "Session" else source


def _arrays(store: Any) -> list[tuple[str, Any]]:
    """Every array of the repository's hierarchy by path (``"t"``, ``"grp/t"``)."""
    import zarr

    root = zarr.open_group(store, mode="r", zarr_format=3)
    return [(path, node) for path, node in root.members(max_depth=None) if isinstance(node, zarr.Array)]


async def _batches(store: Any, path: str, batch_size: int) -> list[tuple[Any, ...]]:
    return [batch async for batch in store.array_chunk_iterator(path, batch_size)]


async def _gather_refs(store: Any, paths: list[str], batch_size: int) -> list[list[tuple[Any, ...]]]:
    """Every array's batches, the arrays gathered concurrently."""
    return list(await asyncio.gather(*(_batches(store, p, batch_size) for p in paths)))


def _columns(batches: list[tuple[Any, ...]], ndim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[int, bytes]]:
    """One array's batches as whole columns: coordinates, kinds, locations, offsets, lengths, inline bytes
    (by row)."""
    if not batches:
        z = np.zeros(0, dtype=np.int64)
        return np.zeros((0, ndim), dtype=np.int64), z, np.zeros(0, dtype=str), z, z, {}
    coords = np.concatenate([np.asarray(b[0], dtype=np.int64).reshape(len(b[1]), ndim) for b in batches])
    kinds = np.concatenate([np.asarray(b[1]) for b in batches])
    # Fixed-width strings: np.unique sorts them faster than Python objects.
    paths = np.array([p for b in batches for p in b[2]], dtype=str)
    offsets = np.concatenate([np.asarray(b[3], dtype=np.int64) for b in batches])
    lengths = np.concatenate([np.asarray(b[4], dtype=np.int64) for b in batches])
    inline: dict[int, bytes] = {}
    start = 0
    for b in batches:
        inline.update({start + int(i): bytes(v) for i, v in b[5].items()})
        start += len(b[1])
    return coords, kinds, paths, offsets, lengths, inline


Native = list[tuple[str, tuple[int, ...]]]


def _array_refs(name: str, arr: Any, batches: list[tuple[Any, ...]], where: str) -> tuple[ArrayRefs, Native]:
    """One array's references, and the key and grid index of each native chunk (read through icechunk
    after)."""
    md = arr.metadata
    dtype, codecs = codecs_v3(md, where)
    shape = tuple(int(s) for s in md.shape)
    chunks = tuple(int(c) for c in md.chunks)
    grid = tuple(math.ceil(s / c) if c else 0 for s, c in zip(shape, chunks))
    coords, kinds, paths, offsets, lengths, inline = _columns(batches, len(shape))
    flat = np.ravel_multi_index(tuple(coords.T), grid) if len(shape) else np.zeros(len(kinds), dtype=np.int64)
    virtual = kinds == _VIRTUAL
    files, ids = file_table(np.where(virtual, paths, ""), where)
    file_ids = np.full(math.prod(grid), MISSING, dtype=np.int64)
    offs = np.zeros(file_ids.shape, dtype=np.int64)
    lens = np.zeros(file_ids.shape, dtype=np.int64)
    file_ids[flat[virtual]] = ids[virtual]
    offs[flat[virtual]], lens[flat[virtual]] = offsets[virtual], lengths[virtual]
    stored = np.flatnonzero(~virtual)
    file_ids[flat[stored]] = INLINED
    inlined = {tuple(int(c) for c in coords[i]): inline[int(i)] for i in stored.tolist() if kinds[i] == _INLINE}
    enc = md.chunk_key_encoding
    native = [(f"{name}/{enc.encode_chunk_key(idx)}", idx) for idx in map(tuple, coords[kinds == _NATIVE].tolist())]
    refs = ArrayRefs(
        name=name, shape=shape, chunks=chunks, dtype=dtype, fill_value=md.fill_value, codecs=codecs, files=files,
        file_ids=file_ids.reshape(grid), offsets=offs.reshape(grid), lengths=lens.reshape(grid), inlined=inlined,
        attrs=dict(md.attributes),
    )
    return refs, native


async def _get_all(store: Any, keys: list[str], byte_range: Any = None) -> list[Any]:
    from zarr.core.buffer import default_buffer_prototype

    proto = default_buffer_prototype()
    return list(await asyncio.gather(*(store.get(k, proto, byte_range) for k in keys), return_exceptions=True))


def _read_native(store: Any, arrays: dict[str, ArrayRefs], native: dict[str, Native]) -> None:
    """The native chunks of every array, read through icechunk's store at once, kept as inlined chunks."""
    from zarr.core.sync import sync

    todo = [(name, key, idx) for name, chunks in native.items() for key, idx in chunks]
    if not todo:
        return
    for (name, key, idx), buf in zip(todo, sync(_get_all(store, [k for _, k, _ in todo]))):
        if isinstance(buf, BaseException):
            raise OSError(f"from_icechunk(): reading native chunk {key!r} through icechunk failed: {buf}") from buf
        if buf is None:
            arrays[name].file_ids[idx] = MISSING
        else:
            arrays[name].inlined[idx] = buf.to_bytes()


def from_icechunk(
    source: Any, *, branch: str | None = None, tag: str | None = None, snapshot_id: str | None = None,
    batch_size: int = BATCH_SIZE,
) -> dict[str, ArrayRefs]:
    """Every array of an Icechunk repository's version as :class:`~gdsstore.archives.refs.ArrayRefs`.

    Args:
        source: an icechunk ``Repository`` (with ``branch``, ``tag`` or ``snapshot_id``; ``main`` by
            default), a ``Session`` or an ``IcechunkStore``.
        batch_size: chunk references per batch of icechunk's ``array_chunk_iterator``.

    Returns:
        The arrays by path. Virtual chunks reference their files; native chunks are read now through
        icechunk's store and held as inlined chunks.

    Raises:
        NotImplementedError: a codec the archives' reader does not undo, or a target scheme it does not read.
    """
    from zarr.core.sync import sync

    store = icechunk_store(source, branch=branch, tag=tag, snapshot_id=snapshot_id)
    nodes = _arrays(store)
    batches = sync(_gather_refs(store, [p for p, _ in nodes], batch_size))
    out: dict[str, ArrayRefs] = {}
    native: dict[str, Native] = {}
    for (path, arr), bs in zip(nodes, batches):
        out[path], native[path] = _array_refs(path, arr, bs, f"from_icechunk(): array {path!r}")
    _read_native(store, out, native)
    return out


def _probes(arrays: Mapping[str, ArrayRefs]) -> dict[str, str]:
    """One virtual chunk's key per referenced file: what icechunk reads to check the file's stamp."""
    import zarr.core.chunk_key_encodings as cke

    enc = cke.DefaultChunkKeyEncoding(separator="/")  # icechunk keys are zarr v3 default keys
    probes: dict[str, str] = {}
    for name, r in arrays.items():
        ids = r.file_ids.reshape(-1)
        present = np.flatnonzero(ids >= 0)
        files, first = np.unique(ids[present], return_index=True)  # each file's first chunk
        for f, flat in zip(files.tolist(), present[first].tolist()):
            if r.files[f] not in probes:
                idx = np.unravel_index(flat, r.grid) if r.grid else ()
                probes[r.files[f]] = f"{name}/{enc.encode_chunk_key(tuple(int(i) for i in idx))}"
    return probes


def verify_stamps(store: Any, arrays: Mapping[str, ArrayRefs]) -> None:
    """Ask icechunk to check each referenced file's ETag / last-modified stamp (one byte of one chunk per
    file, all files at once).

    Raises:
        ArchiveChangedError: a file changed since its references were written to the repository.
        OSError: icechunk cannot read a file (no virtual chunk container or credentials for it).
    """
    from zarr.abc.store import RangeByteRequest
    from zarr.core.sync import sync

    probes = _probes(arrays)
    results = sync(_get_all(store, list(probes.values()), RangeByteRequest(0, 1)))
    for (target, key), got in zip(probes.items(), results):
        if not isinstance(got, BaseException):
            continue
        text = str(got).split("\n", 1)[0]
        if "has changed" in text or "modified" in text:
            raise ArchiveChangedError(
                f"{target}: changed since its references were written to the Icechunk repository "
                f"(icechunk: {text}); write the references again"
            ) from got
        raise OSError(
            f"open_icechunk(): icechunk could not read {target} (chunk {key!r}) to check its ETag / "
            f"last-modified stamp: {text}. Open the repository with authorize_virtual_chunk_access for "
            "its virtual chunk containers, or pass check_stamps=False"
        ) from got
