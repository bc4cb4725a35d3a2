"""Virtual references as arrays: per zarr array, every chunk's (file, offset, length) as numpy arrays.

:class:`ArrayRefs` is what the reader plans from: the array's geometry, its codecs (numcodecs objects,
in write order) and three arrays over the chunk grid: ``file_ids`` (an index into ``files``; ``-1`` a
missing chunk, read as the fill value; ``-2`` a chunk inlined in the references), ``offsets`` and
``lengths``. Two sources make them:

- :func:`from_manifest_store`: VirtualiZarr's ``ManifestStore`` (zarr v3 metadata); its
  ``ChunkManifest`` already holds ``_paths``/``_offsets``/``_lengths`` arrays, so this is a few
  vectorised numpy calls per array, never a loop over chunks;
- :func:`from_kerchunk`: a kerchunk reference set (a dict, or a JSON file), zarr v2 metadata inside.

Targets are local files (paths or ``file://`` URLs) and ``http(s)://`` or ``s3://`` URLs (read as
waves, :mod:`.fetch`); other schemes raise NotImplementedError.
"""

from __future__ import annotations

import base64
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

import numcodecs
import numpy as np

__all__ = [
    "INLINED", "MISSING", "ArrayRefs", "codecs_v3", "file_sizes", "file_table", "from_kerchunk", "from_manifest_store", "load_kerchunk_json", "target",
    "v2_array",
]

#: ``file_ids`` value of a chunk that has no reference (read as the fill value).
MISSING = -1
#: ``file_ids`` value of a chunk stored inside the references (``ArrayRefs.inlined``).
INLINED = -2


@dataclass
class ArrayRefs:
    """One array of a reference set: geometry, codecs and the chunk grid's references.

    Attributes:
        name: the array's path in its group (``"t"``, ``"grp/t"``).
        shape, chunks: the array's and its chunks' shapes.
        dtype: the stored dtype (its byte order included).
        fill_value: what missing chunks read as (``None``: zeros).
        codecs: numcodecs codecs in the order they were applied when writing (filters, then the
            compressor, then checksums); reads undo them in reverse.
        files: the targets, indexed by ``file_ids``: local paths, or ``http(s)://`` / ``s3://`` URLs.
        file_ids, offsets, lengths: ``int64`` arrays shaped like the chunk grid.
        inlined: chunk grid index -> the chunk's stored bytes.
        attrs: the array's attributes (``_ARRAY_DIMENSIONS`` and friends included).
    """

    name: str
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype[Any]
    fill_value: Any
    codecs: list[Any]
    files: list[str]
    file_ids: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    inlined: dict[tuple[int, ...], bytes] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def grid(self) -> tuple[int, ...]:
        """Chunks along each dimension."""
        return tuple(math.ceil(s / c) if c else 0 for s, c in zip(self.shape, self.chunks))

    @property
    def chunk_nbytes(self) -> int:
        """Bytes of one decoded chunk (edge chunks are stored at full size, as HDF5 and zarr do)."""
        return int(np.prod(self.chunks, dtype=np.int64)) * self.dtype.itemsize


def target(url: str, where: str) -> str:
    """A reference's target as the reader names it: a local path (plain, or from a ``file://`` URL), or
    an ``http(s)://`` or ``s3://`` URL as it is (read through the engine's remote backends).

    Raises:
        NotImplementedError: another scheme (``gs://``, ``az://``...).
    """
    if "://" not in url:
        return os.path.abspath(url)
    parsed = urlparse(url)
    scheme = parsed.scheme.lower()
    if scheme in ("http", "https", "s3"):
        return url
    if scheme != "file":
        raise NotImplementedError(
            f"{where}: {url!r}: only local files, http(s):// and s3:// URLs are read so far"
        )
    return unquote(parsed.path)


def file_table(paths: np.ndarray, where: str) -> tuple[list[str], np.ndarray]:
    """Distinct target files and each chunk's index into them (vectorised ``np.unique``)."""
    flat = np.asarray(paths).reshape(-1)  # StringDType (VirtualiZarr) or object/str (kerchunk)
    names, inverse = np.unique(flat, return_inverse=True)
    ids = np.full(flat.shape, MISSING, dtype=np.int64)
    files: list[str] = []
    remap = np.full(len(names), MISSING, dtype=np.int64)
    for k, name in enumerate(names.tolist()):
        if name == "":
            continue
        if name == "__inlined__":
            remap[k] = INLINED
            continue
        remap[k] = len(files)
        files.append(target(name, where))
    if flat.size:
        ids = remap[inverse]
    return files, ids.reshape(paths.shape)


# -- VirtualiZarr ----------------------------------------------------------------------------------


def codecs_v3(metadata: Any, where: str) -> tuple[np.dtype[Any], list[Any]]:
    """The stored dtype and numcodecs codecs of zarr v3 metadata (a ``bytes`` codec, then numcodecs
    wrappers, as VirtualiZarr writes them)."""
    from zarr.codecs import BytesCodec

    dtype = np.dtype(metadata.data_type.to_native_dtype())
    codecs: list[Any] = []
    for c in metadata.codecs:
        if isinstance(c, BytesCodec):
            if c.endian is not None and dtype.itemsize > 1:
                dtype = dtype.newbyteorder("<" if getattr(c.endian, "value", c.endian) == "little" else ">")
            continue
        name = getattr(c, "codec_name", None)
        if name is None:
            raise NotImplementedError(
                f"{where}: codec {type(c).__name__} is not read by gdsstore.archives yet; "
                "read this array with zarr.open_group(manifest_store)"
            )
        codecs.append(numcodecs.get_codec({"id": name.removeprefix("numcodecs."), **c.codec_config}))
    return dtype, codecs


def _walk(group: Any, prefix: str) -> list[tuple[str, Any]]:
    out = [(prefix + name, arr) for name, arr in group.arrays.items()]
    for name, sub in group.groups.items():
        out.extend(_walk(sub, f"{prefix}{name}/"))
    return out


def from_manifest_store(store: Any) -> dict[str, ArrayRefs]:
    """Every array of a VirtualiZarr ``ManifestStore`` (groups flattened to ``"grp/name"`` paths)."""
    out: dict[str, ArrayRefs] = {}
    for name, arr in _walk(store._group, ""):
        where = f"from_manifest_store(): array {name!r}"
        md = arr.metadata
        manifest = arr.manifest
        dtype, codecs = codecs_v3(md, where)
        files, ids = file_table(manifest._paths, where)
        out[name] = ArrayRefs(
            name=name,
            shape=tuple(int(s) for s in md.shape),
            chunks=tuple(int(c) for c in md.chunks),
            dtype=dtype,
            fill_value=md.fill_value,
            codecs=codecs,
            files=files,
            file_ids=ids,
            offsets=manifest._offsets.astype(np.int64),
            lengths=manifest._lengths.astype(np.int64),
            inlined=dict(getattr(manifest, "_inlined", {}) or {}),
            attrs=dict(md.attributes),
        )
    return out


# -- kerchunk --------------------------------------------------------------------------------------


def load_kerchunk_json(path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> Any:
    """A kerchunk JSON file, local (a path or ``file://`` URL) or remote (``http(s)://``, ``s3://``: one
    GET through the engine's remote backend, with ``storage_options``).

    Raises:
        NotImplementedError: another URL scheme.
    """
    where = "from_kerchunk()"
    name = target(os.fspath(path), where)
    if "://" not in name:
        with open(name, "rb") as f:
            return json.load(f)
    from gdsstore.archives.fetch import Targets, split_url  # the engine loads only for remote JSON

    root, key = split_url(name)
    body = Targets((), storage_options).backend(root).get(key, lambda n: np.empty(n, dtype=np.uint8))
    return json.loads(bytes(body))


def _kerchunk_refs(
    refs: Mapping[str, Any] | str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The references by key (templates expanded)."""
    if isinstance(refs, str | os.PathLike):
        refs = load_kerchunk_json(refs, storage_options)
    if not isinstance(refs, Mapping):
        raise TypeError(f"from_kerchunk(): kerchunk references are a JSON object, got {type(refs).__name__}")
    if "refs" in refs and isinstance(refs["refs"], Mapping):
        if refs.get("gen"):
            raise NotImplementedError("from_kerchunk(): generated references ('gen') are not read yet")
        templates = dict(refs.get("templates") or {})
        body = dict(refs["refs"])
        if templates:
            body = {k: _expand(v, templates) for k, v in body.items()}
        return body
    return dict(refs)


def _expand(v: Any, templates: dict[str, str]) -> Any:
    if isinstance(v, list) and v and isinstance(v[0], str) and "{{" in v[0]:
        url = v[0]
        for name, value in templates.items():
            url = url.replace("{{" + name + "}}", value)
        return [url, *v[1:]]
    return v


def _json_value(v: Any) -> Any:
    if isinstance(v, bytes | bytearray):
        return json.loads(v)
    if isinstance(v, str):
        return json.loads(v)
    return v


def _v2_fill(fill: Any, dtype: np.dtype[Any]) -> Any:
    """zarr v2's JSON fill value as a numpy scalar (``"NaN"``/``"Infinity"``, base64 for bytes)."""
    if fill is None:
        return None
    if dtype.kind == "f" and isinstance(fill, str):
        return dtype.type({"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}[fill])
    if dtype.kind in "SV" and isinstance(fill, str):
        return np.frombuffer(base64.standard_b64decode(fill), dtype=dtype)[0]
    return dtype.type(fill)


def _inline_bytes(v: str | bytes) -> bytes:
    if isinstance(v, bytes):
        return v
    if v.startswith("base64:"):
        return base64.standard_b64decode(v[7:])
    return v.encode()


def v2_array(name: str, refs: Mapping[str, Any], where: str) -> ArrayRefs:
    """An array's zarr v2 metadata (``.zarray``, ``.zattrs`` among ``refs``) as :class:`ArrayRefs`
    with no chunk referenced yet (every chunk missing)."""
    meta = _json_value(refs[f"{name}/.zarray" if name else ".zarray"])
    attrs = _json_value(refs.get(f"{name}/.zattrs" if name else ".zattrs", "{}"))
    if meta.get("order", "C") != "C":
        raise NotImplementedError(f"{where}: Fortran-ordered chunks are not read yet")
    dtype = np.dtype(meta["dtype"])
    codecs = [numcodecs.get_codec(c) for c in meta.get("filters") or []]
    if meta.get("compressor"):
        codecs.append(numcodecs.get_codec(meta["compressor"]))
    shape, chunks = tuple(meta["shape"]), tuple(meta["chunks"])
    grid = tuple(math.ceil(s / c) if c else 0 for s, c in zip(shape, chunks))
    return ArrayRefs(
        name, shape, chunks, dtype, _v2_fill(meta.get("fill_value"), dtype), codecs, [],
        np.full(grid, MISSING, dtype=np.int64), np.zeros(grid, dtype=np.int64), np.zeros(grid, dtype=np.int64),
        {}, dict(attrs),
    )


def file_sizes(storage_options: Mapping[str, Any] | None) -> Callable[[str], int]:
    """A target's size, for ``[url]`` whole-file references: ``os.path.getsize`` for a local file, one
    ``HEAD`` for a remote object (through backends made once, from ``storage_options``)."""
    targets: list[Any] = []

    def size(path: str) -> int:
        if "://" not in path:
            return os.path.getsize(path)
        if not targets:
            from gdsstore.archives.fetch import Targets  # the engine loads only for remote whole files

            targets.append(Targets((), storage_options))
        return int(targets[0].size(path))

    return size


def _kerchunk_array(name: str, refs: dict[str, Any], chunk_keys: list[str], size_of: Callable[[str], int]) -> ArrayRefs:
    where = f"from_kerchunk(): array {name!r}"
    out = v2_array(name, refs, where)
    meta = _json_value(refs[f"{name}/.zarray" if name else ".zarray"])
    sep = meta.get("dimension_separator", ".")
    shape = out.shape
    ids, offsets, lengths, inlined = out.file_ids, out.offsets, out.lengths, out.inlined
    files: dict[str, int] = {}
    cut = len(name) + 1 if name else 0
    for key in chunk_keys:
        idx = tuple(int(i) for i in key[cut:].split(sep)) if shape else ()
        v = refs[key]
        if isinstance(v, list) and len(v) in (1, 3):
            path = target(v[0], where)
            fid = files.setdefault(path, len(files))
            size = size_of(path) if len(v) == 1 else int(v[2])
            ids[idx], offsets[idx], lengths[idx] = fid, (0 if len(v) == 1 else int(v[1])), size
        else:
            ids[idx] = INLINED
            inlined[idx] = _inline_bytes(v)
    out.files = list(files)
    return out


def from_kerchunk(
    refs: Mapping[str, Any] | str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> dict[str, ArrayRefs]:
    """Every array of a kerchunk reference set: version 0 or 1, a dict, or a JSON file's path or URL
    (``file://``, ``http(s)://``, ``s3://``; parquet reference directories:
    :func:`gdsstore.archives.parquet.from_parquet`).

    Chunk references are ``[url, offset, length]`` (or ``[url]``: the whole file, its size looked up
    now: a ``HEAD`` with ``storage_options`` for a remote one); inline chunks are strings
    (``"base64:..."``) or bytes.
    """
    body = _kerchunk_refs(refs, storage_options)
    arrays = [k[: -len("/.zarray")] if k != ".zarray" else "" for k in body if k.endswith(".zarray")]
    by_array: dict[str, list[str]] = {a: [] for a in arrays}
    for key in body:
        head, _, tail = key.rpartition("/")
        if tail.startswith("."):
            continue
        owner = head if head in by_array else ("" if "" in by_array and "/" not in key else None)
        if owner is None:
            # A "/"-separated chunk key: its array is the longest known prefix.
            owner = max((a for a in arrays if a and key.startswith(a + "/")), key=len, default=None)
        if owner is not None:
            by_array[owner].append(key)
    size_of = file_sizes(storage_options)
    return {a: _kerchunk_array(a, body, keys, size_of) for a, keys in by_array.items()}
