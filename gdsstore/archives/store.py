"""``VirtualStore``: a read-only zarr store over virtual references, its chunk reads batched per tick.

For users of ``zarr.open_group`` and ``xarray.open_zarr``: the references' metadata documents are
served as they are (VirtualiZarr's ``zarr.json``, kerchunk's ``.zarray``/``.zgroup``/``.zattrs``), and
the chunk gets that zarr's pipeline issues in one event-loop tick become one batch, as in
:class:`gdsstore.GDSStore` (its tick gatherer): the chunks' triples planned together (grouped by file,
coalesced), read with one call of the engine's batched reader into one buffer (remote targets: one
wave per backend, into the same buffer), each chunk a view of it.
zarr then decodes them with its codecs, chunk by chunk; :func:`~gdsstore.archives.open_virtual`
decodes a whole selection as one batch instead (faster; GPU decode), this store is for what speaks zarr.

Example:
    >>> import h5py, numpy as np, os, tempfile, zarr, kerchunk.hdf
    >>> p = os.path.join(tempfile.mkdtemp(), "a.h5")
    >>> with h5py.File(p, "w") as f:
    ...     _ = f.create_dataset("x", data=np.arange(10.0), chunks=(4,), compression="gzip", shuffle=True)
    >>> refs = kerchunk.hdf.SingleHdf5ToZarr(p, inline_threshold=0).translate()
    >>> zarr.open_group(VirtualStore(refs), mode="r", zarr_format=2)["x"][3:6].tolist()
    [3.0, 4.0, 5.0]
"""

from __future__ import annotations

import builtins
import json
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import numpy as np
from zarr.abc.store import ByteRequest, Store
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype

from gdsstore.archives.fetch import land_chunks
from gdsstore.archives.reader import VirtualArray, VirtualGroup, open_virtual
from gdsstore.archives.refs import INLINED, load_kerchunk_json
from gdsstore.engine.backend import BatchResult
from gdsstore.engine.ranges import ByteRange
from gdsstore.engine.tick import TickGatherer
from gdsstore.zarr_requests import to_byte_range

__all__ = ["VirtualStore"]


def _metadata_v3(store: Any) -> tuple[dict[str, bytes], dict[str, Any]]:
    """VirtualiZarr's metadata documents by key, and each array's chunk key encoding."""
    docs: dict[str, bytes] = {}
    encodings: dict[str, Any] = {}
    proto = default_buffer_prototype()

    def walk(group: Any, prefix: str) -> None:
        docs[f"{prefix}zarr.json"] = group.metadata.to_buffer_dict(proto)["zarr.json"].to_bytes()
        for name, arr in group.arrays.items():
            docs[f"{prefix}{name}/zarr.json"] = arr.metadata.to_buffer_dict(proto)["zarr.json"].to_bytes()
            encodings[prefix + name] = arr.metadata.chunk_key_encoding
        for name, sub in group.groups.items():
            walk(sub, f"{prefix}{name}/")

    walk(store._group, "")
    return docs, encodings


def _metadata_v2(refs: Mapping[str, Any] | str | os.PathLike[str]) -> tuple[dict[str, bytes], dict[str, Any]]:
    """kerchunk's metadata documents by key (``.zarray``, ``.zgroup``, ``.zattrs``, ``.zmetadata``)."""
    from zarr.core.chunk_key_encodings import V2ChunkKeyEncoding

    from gdsstore.archives.refs import _kerchunk_refs

    if isinstance(refs, str | os.PathLike) and os.path.isdir(refs):
        from gdsstore.archives.parquet import parquet_metadata

        body: dict[str, Any] = dict(parquet_metadata(refs)[0])
    else:
        body = _kerchunk_refs(refs)
    docs: dict[str, bytes] = {}
    encodings: dict[str, Any] = {}
    for key, v in body.items():
        if key.rpartition("/")[2].startswith("."):
            docs[key] = v.encode() if isinstance(v, str) else v if isinstance(v, bytes) else json.dumps(v).encode()
        if key.endswith(".zarray"):
            meta = json.loads(docs[key])
            encodings[key[: -len(".zarray")].rstrip("/")] = V2ChunkKeyEncoding(
                separator=meta.get("dimension_separator", ".")
            )
    return docs, encodings


class VirtualStore(Store):
    """A read-only zarr store over a ``ManifestStore`` or kerchunk references (see the module docstring).

    Args:
        source: a VirtualiZarr ``ManifestStore``, a kerchunk reference dict, a kerchunk JSON path or
            URL (``http(s)://``, ``s3://``: read with ``storage_options``), or a kerchunk parquet
            reference directory.
        storage_options: for ``http(s)://`` and ``s3://`` targets, as for
            :func:`~gdsstore.archives.open_virtual`.

    Attributes:
        group: the :class:`~gdsstore.archives.VirtualGroup` of the same references (batched reads of
            whole selections, on the GPU too).
    """

    def __init__(self, source: Any, *, storage_options: Mapping[str, Any] | None = None) -> None:
        super().__init__(read_only=True)
        self._source = source
        if isinstance(source, str | os.PathLike) and not os.path.isdir(source):
            source = load_kerchunk_json(source, storage_options)  # read once, for the metadata and the refs
        self.group: VirtualGroup = open_virtual(source, storage_options=storage_options)
        manifest = type(source).__name__ == "ManifestStore"
        self._docs, self._encodings = _metadata_v3(source) if manifest else _metadata_v2(source)
        self._names = sorted(self.group, key=len, reverse=True)  # longest first: nested arrays win
        # One table of every file, so chunks of two arrays in one file coalesce into one read.
        self._files = sorted({f for a in self.group.values() for f in a.refs.files})
        index = {f: k for k, f in enumerate(self._files)}
        self._global = {
            name: np.array([index[f] for f in a.refs.files], dtype=np.int64) for name, a in self.group.items()
        }
        self._gets = TickGatherer(self, _get_batch)  # type: ignore[arg-type]  # any object the run takes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VirtualStore) and other._source is self._source

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"VirtualStore({list(self.group)})"

    def _chunk(self, key: str) -> tuple[VirtualArray, tuple[int, ...]] | None:
        """The array and chunk grid index a key names; None for anything else."""
        for name in self._names:
            if key.startswith(name + "/") or (name == "" and key):
                rest = key[len(name) + 1 :] if name else key
                try:
                    idx = tuple(int(i) for i in self._encodings[name].decode_chunk_key(rest))
                except ValueError:
                    return None
                arr = self.group[name]
                if len(idx) != arr.ndim or any(not 0 <= i < n for i, n in zip(idx, arr.refs.grid)):
                    return None
                return arr, idx
        return None

    # -- reads ---------------------------------------------------------------------------------------

    async def get(
        self, key: str, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        # docstring inherited
        prototype = prototype or default_buffer_prototype()
        br = to_byte_range(byte_range, "VirtualStore.get()")
        doc = self._docs.get(key)
        if doc is not None:
            return prototype.buffer.from_bytes(_cut(doc, br))
        if self._chunk(key) is None:
            return None
        buf: Buffer | None = await self._gets.submit((key, br, prototype))
        return buf

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> builtins.list[Buffer | None]:
        # docstring inherited
        import asyncio

        return builtins.list(await asyncio.gather(*(self.get(k, prototype, r) for k, r in key_ranges)))

    async def exists(self, key: str) -> bool:
        # docstring inherited
        if key in self._docs:
            return True
        found = self._chunk(key)
        return found is not None and int(found[0].refs.file_ids[found[1]]) != -1

    # -- read-only -----------------------------------------------------------------------------------

    @property
    def supports_writes(self) -> bool:
        return False

    @property
    def supports_deletes(self) -> bool:
        return False

    @property
    def supports_listing(self) -> bool:
        return True

    async def set(self, key: str, value: Buffer) -> None:
        raise NotImplementedError("VirtualStore.set(): virtual references are read-only")

    async def delete(self, key: str) -> None:
        raise NotImplementedError("VirtualStore.delete(): virtual references are read-only")

    # -- listing (metadata documents and nodes; chunks of an array on request) -----------------------

    async def list(self) -> AsyncIterator[str]:
        # docstring inherited
        for key in self._keys():
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        # docstring inherited
        for key in self._keys():
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        # docstring inherited
        base = prefix.rstrip("/") + "/" if prefix.rstrip("/") else ""
        seen: set[str] = set()
        for key in self._keys():
            if key.startswith(base):
                head = key[len(base) :].split("/", 1)[0]
                if head not in seen:
                    seen.add(head)
                    yield head

    def _keys(self) -> builtins.list[str]:  # `list` here is the method
        keys = list(self._docs)
        for name, arr in self.group.items():
            enc = self._encodings[name]
            for idx in np.argwhere(arr.refs.file_ids != -1).tolist():
                chunk = enc.encode_chunk_key(tuple(idx))
                keys.append(f"{name}/{chunk}" if name else chunk)
        return keys


def _cut(data: bytes, br: ByteRange | None) -> bytes:
    if br is None:
        return data
    off, n = br.resolve(len(data))
    return data[off : off + n]


def _get_batch(store: VirtualStore, items: list[tuple[str, ByteRange | None, BufferPrototype]]) -> BatchResult:
    """The chunk gets of one tick: their triples planned together, one batched read, a view each."""
    out = BatchResult(len(items))
    n = len(items)
    fids = np.full(n, -1, dtype=np.int64)
    offs = np.zeros(n, dtype=np.int64)
    lens = np.zeros(n, dtype=np.int64)
    found: list[tuple[VirtualArray, tuple[int, ...]]] = []
    for i, (key, _, _) in enumerate(items):
        arr, idx = store._chunk(key) or (None, ())
        assert arr is not None  # get() submits chunk keys only
        found.append((arr, idx))
        r = arr.refs
        local = int(r.file_ids[idx])
        fids[i] = store._global[r.name][local] if local >= 0 else local
        offs[i], lens[i] = r.offsets[idx], r.lengths[idx]
    landed = land_chunks(store.group.targets, store._files, fids, offs, lens, pinned=False, where="archive:zarr")
    for i, (_, br, prototype) in enumerate(items):
        arr, idx = found[i]
        if fids[i] == INLINED:
            data: Any = np.frombuffer(arr.refs.inlined[idx], np.uint8)
        elif fids[i] < 0:
            continue  # missing: zarr reads the fill value
        else:
            data = landed.view(i)
        if br is not None:
            a, k = br.resolve(len(data))
            data = data[a : a + k]
        out.bufs[i] = prototype.buffer.from_array_like(data)
    return out

