"""Reading archive arrays through their references: plan, one batched read, batched decode, scatter.

Why arrays of our own beside a zarr ``Store`` over the references (:mod:`.store`): a store answers one
key at a time, and zarr then decodes and scatters chunk by chunk; that per-chunk cost is what limits
``zarr.open_group(ManifestStore)`` on small chunks. A :class:`VirtualArray` sees the whole selection:
it plans the chunks' (file, offset, length) triples with numpy (:mod:`.plan`), lands them through the
engine's landing layer (:func:`gdsstore.engine.landing.land`: coalesced reads on the engine's threads,
into one buffer, a :class:`~gdsstore.engine.landing.Landed`), decodes them on threads (zlib releases the
GIL) or on the GPU in batches (one nvCOMP call), and copies each chunk's box into the output. It is indexable like a numpy
array (``arr[0, :128]``), and ``np.asarray`` reads it whole.

Targets are local files or ``http(s)://`` and ``s3://`` URLs: remote chunks of one read go to the
engine's remote backends as one wave per backend (:mod:`.fetch`), landing in the same buffer, then
decoded and scattered the same way. A file changed since the references were opened (local: size or
mtime; remote: size, and S3's modification time) fails the read, checked before and after the bytes
are read, so a read never mixes two versions of a file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.archives import codecs as _codecs
from gdsstore.archives import plan as _plan
from gdsstore.archives.fetch import Targets, land_chunks
from gdsstore.archives.refs import INLINED, MISSING, ArrayRefs, from_kerchunk, from_manifest_store
from gdsstore.engine.batch import groups
from gdsstore.engine.landing import Landed
from gdsstore.engine.pool import map_all
from gdsstore.errors import ChunkDecodeError
from gdsstore.gpu.windows import run_windows

__all__ = ["VirtualArray", "VirtualGroup", "decode_rows", "gpu_unsupported", "open_icechunk", "open_virtual"]

#: Stored bytes read, decoded and scattered at a time, at most: a large selection's bytes are never all
#: in memory beside its output (on the GPU, the pinned pool's buffer is reused window after window).
#: Two windows are in flight (one decoding, the next landing): :func:`_window_bytes` keeps them within
#: ``pinned_memory_limit``.
WINDOW_BYTES = 512 << 20


def _window_bytes() -> int:
    """Stored bytes per window: :data:`WINDOW_BYTES`, or 3/8 of ``pinned_memory_limit`` where that is less
    (two windows in flight leave a quarter of the limit to the engine's bounce buffers)."""
    return min(WINDOW_BYTES, max(1 << 20, policy.settings().pinned_memory_limit * 3 // 8))


class VirtualArray:
    """One array of a reference set, read through gdsstore's engine (see the module docstring).

    Attributes:
        refs: the array's references (:class:`~gdsstore.archives.refs.ArrayRefs`).
        shape, dtype, chunks, attrs, ndim: as numpy and zarr name them.
    """

    def __init__(self, refs: ArrayRefs, targets: Targets) -> None:
        self.refs = refs
        self._targets = targets
        self.shape = refs.shape
        self.chunks = refs.chunks
        self.dtype = refs.dtype
        self.attrs = refs.attrs
        self.ndim = len(refs.shape)

    def __repr__(self) -> str:
        return f"VirtualArray({self.refs.name!r}, shape={self.shape}, dtype={self.dtype}, chunks={self.chunks})"

    def __getitem__(self, selection: Any) -> np.ndarray:
        out: np.ndarray = self.read(selection)
        return out

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out: np.ndarray = self.read(...)
        return out if dtype is None else out.astype(dtype)

    def read(self, selection: Any = ..., *, device: bool = False, batch: bool = False) -> Any:
        """Read a basic selection (ints, slices with positive steps, ``...``).

        Args:
            selection: what to read, as for a numpy array.
            device: land the result in a CuPy array, decoded on the GPU (needs CuPy and nvCOMP).
            batch: on the host, decode with the GPU path's batch code (numpy arrays in place of CuPy's,
                zlib in place of nvCOMP): slower than the default threads, it checks that code
                anywhere.

        Returns:
            numpy array of the selection in the stored dtype; with ``device=True`` a CuPy array, in
            native byte order.

        Raises:
            ChunkDecodeError: a corrupt or truncated chunk (the message names its file and offset).
            ArchiveChangedError: a file changed since the references were opened.
        """
        if device:
            _require_gpu()
        r = self.refs
        sel = _plan.select_chunks(r.shape, r.chunks, selection)
        flat = _plan.chunk_index(r.grid, sel.coords)
        fids = r.file_ids.reshape(-1)[flat]
        why_not = gpu_unsupported(r) if device else None
        t0 = time.perf_counter()
        on_gpu = device and why_not is None
        out = _output(r, sel.out_shape, bool((fids == MISSING).any()), _cupy() if on_gpu else np)
        windows = _windows(fids, r.lengths.reshape(-1)[flat], _window_bytes(), _most_chunks(r, on_gpu))
        run_windows(  # the next window lands on the engine's pool while this one decodes
            windows,
            lambda w: self._land_window(_plan.subset(sel, w), flat[w], on_gpu),
            lambda w, landed: self._decode_window(_plan.subset(sel, w), flat[w], landed, out, on_gpu, batch and not device),
            Landed.release,  # pinned staging back to the pool once decoded
        )
        if device and not on_gpu:
            # What cannot decode on the GPU decoded on the host; the result goes up in one copy (in
            # native byte order: CuPy has no other).
            out = _cupy().asarray(out if out.dtype.isnative else out.astype(out.dtype.newbyteorder("=")))
            if _trace.active():
                reason = f"archive chunks on the host: {why_not}"
                _trace.record("decode", "cpu-codec", reason, out.nbytes, time.perf_counter() - t0)
        if any(s > 1 for s in sel.step):
            out = out[tuple(slice(None, None, s) for s in sel.step)]
        return out.reshape(tuple(n for d, n in enumerate(out.shape) if d not in sel.squeeze)) if sel.squeeze else out

    def _land_window(self, sel: _plan.ChunkSelection, flat: np.ndarray, on_gpu: bool) -> Landed:
        """Land one window of a selection's chunks in one host buffer (pinned for the GPU), inlined chunks
        after the read ones (:func:`~.fetch.land_chunks`); ``-1``: a missing chunk."""
        r = self.refs
        fids, offs, lens = (a.reshape(-1)[flat] for a in (r.file_ids, r.offsets, r.lengths))
        inl = np.flatnonzero(fids == INLINED)
        blobs = [r.inlined[tuple(int(c) for c in sel.coords[i])] for i in inl.tolist()]
        landed = land_chunks(self._targets, r.files, fids, offs, lens, pinned=on_gpu,
                             extra=sum(len(b) for b in blobs), where=f"archive:{r.name}")
        at = int(landed.host.size) - sum(len(b) for b in blobs)
        for i, b in zip(inl.tolist(), blobs):
            landed.host[at : at + len(b)] = np.frombuffer(b, np.uint8)
            landed.offsets[i], landed.sizes[i] = at, len(b)
            at += len(b)
        return landed

    def _decode_window(
        self, sel: _plan.ChunkSelection, flat: np.ndarray, landed: Landed, out: Any, on_gpu: bool, batch: bool
    ) -> None:
        """Decode and scatter one landed window into ``out`` (its caller gives its staging back); ``batch``:
        on the host with the GPU path's batch code."""
        r = self.refs
        where = _Where(r, r.file_ids.reshape(-1)[flat], r.offsets.reshape(-1)[flat])
        if on_gpu or batch:
            _decode_batched(r, sel, out, landed, where, on_gpu)
        else:
            _decode_host(r, sel, out, landed, where)


class _Where:
    """Each chunk's file and offset, for error messages (formatted only when one is raised)."""

    def __init__(self, refs: ArrayRefs, fids: np.ndarray, offs: np.ndarray) -> None:
        self._refs, self._fids, self._offs = refs, fids, offs

    def __getitem__(self, i: int) -> str:
        f = int(self._fids[i])
        if f < 0:
            return f"array {self._refs.name!r}: inlined chunk"
        return f"{self._refs.files[f]}: chunk at offset {int(self._offs[i])} (array {self._refs.name!r})"



def _require_gpu() -> None:
    from gdsstore.engine import cuda

    if not cuda.gpu_available():
        from gdsstore.errors import GPUUnavailableError

        raise GPUUnavailableError("VirtualArray.read(device=True): no CUDA GPU with CuPy here; read on the host")


def _cupy() -> Any:
    import cupy

    return cupy


def _windows(fids: np.ndarray, lens: np.ndarray, budget: int, most: int | None = None) -> list[np.ndarray]:
    """The chunks to read (missing ones are the fill value already), in order, in the fewest windows of at
    most ``budget`` stored bytes (a chunk larger than that is a window of its own) and at most ``most``
    chunks, balanced: on the GPU a window of large chunks takes about as long as one chunk's inflate in
    one thread block however many run beside it, so a short last window costs nearly a full one."""
    idx = np.flatnonzero(fids != MISSING)
    if not len(idx):
        return []
    cum = np.cumsum(np.maximum(lens[idx], 1))
    k = max(-(-int(cum[-1]) // max(budget, 1)), 1 if most is None else -(-len(idx) // max(most, 1)))
    share = max(1, -(-int(cum[-1]) // k))  # at most ``budget``: windows of about equal bytes
    cuts = np.flatnonzero(np.diff((cum - 1) // share)) + 1
    parts = np.split(idx, cuts)
    if most is None:
        return parts
    return [q for p in parts for q in np.array_split(p, -(-len(p) // max(most, 1)))]


def _most_chunks(r: ArrayRefs, on_gpu: bool) -> int | None:
    """On the GPU, the chunks whose decoded bytes fit a window of ``gpu.memory_budget``
    (:func:`gdsstore.gpu.memory.window_budget`: nvCOMP's scratch and the staging beside them)."""
    if not on_gpu:
        return None
    from gdsstore.gpu.memory import window_budget

    return max(1, window_budget(policy.settings().gpu_memory_budget) // max(r.chunk_nbytes, 1))


def _output(r: ArrayRefs, shape: tuple[int, ...], missing: bool, xp: Any) -> Any:
    """The output array, filled with the fill value only where a chunk is missing."""
    if missing:
        fill = 0 if r.fill_value is None else r.fill_value
        return xp.full(shape, fill, dtype=r.dtype)
    return xp.empty(shape, dtype=r.dtype)


def _host_chain(r: ArrayRefs) -> tuple[list[Any], int]:
    """Codecs to undo byte-wise, and the element size of a final shuffle fused into the scatter (0: none)."""
    cs = list(r.codecs)
    if cs and cs[0].codec_id == "shuffle" and int(cs[0].elementsize) == r.dtype.itemsize > 1:
        return cs[1:][::-1], r.dtype.itemsize
    return cs[::-1], 0


def _undo(codec: Any, data: Any, where: _Where, i: int, last: int) -> Any:
    """Undo one codec of chunk ``i`` (``last``: its decoded size when this is the chain's last step)."""
    cid = codec.codec_id
    try:
        if cid == "zlib":
            return _codecs.zlib_decode(data, last, "zlib")
        return codec.decode(data)
    except ChunkDecodeError as exc:
        raise ChunkDecodeError(f"{where[i]}: {exc}") from exc
    except Exception as exc:  # numcodecs' errors name no file: add it
        raise ChunkDecodeError(f"{where[i]}: {cid} decode failed ({exc})") from exc


def _decode_host(r: ArrayRefs, sel: _plan.ChunkSelection, out: np.ndarray, landed: Landed, where: _Where) -> None:
    """Decode the chunks on the engine's threads, each thread copying its chunks' boxes into ``out``."""
    t0 = time.perf_counter()
    chain, fused = _host_chain(r)
    raw = r.chunk_nbytes
    present = landed.present.tolist()
    # Python lists once, not numpy rows per chunk.
    srcs, dsts, counts = sel.src_start.tolist(), sel.dst_start.tolist(), sel.count.tolist()
    buf, plist, nlist = landed.host, landed.offsets.tolist(), landed.sizes.tolist()
    sizes = [-1] * (len(chain) - 1) + [raw]

    def run(g: range) -> None:
        # Unshuffled into a contiguous chunk, then one copy of its box: the byte-plane passes cost
        # several times more in place into a strided output box.
        scratch = np.empty(r.chunks, dtype=r.dtype)
        for j in g:
            i = present[j]
            p = plist[i]
            data: Any = buf[p : p + nlist[i]]
            for c, size in zip(chain, sizes):
                data = _undo(c, data, where, i, size)
            arr = np.frombuffer(data, dtype=np.uint8)
            if arr.size != raw:
                raise ChunkDecodeError(f"{where[i]}: decoded to {arr.size} bytes, expected {raw}")
            src = tuple(slice(a, a + k) for a, k in zip(srcs[i], counts[i]))
            dst = tuple(slice(a, a + k) for a, k in zip(dsts[i], counts[i]))
            if fused:
                _codecs.unshuffle_into(arr, scratch)
                out[dst] = scratch[src]
            else:
                out[dst] = arr.view(r.dtype).reshape(r.chunks)[src]

    parts = groups(len(present), policy.settings().num_threads)
    map_all(run, parts)
    if _trace.active():
        reason = f"archive chunks on the engine's threads ({_codecs.inflater()[0]})"
        _trace.record("decode", "cpu-codec", reason, out.nbytes, time.perf_counter() - t0)


_BATCH_CODECS = frozenset({"zlib", "shuffle", "fletcher32", "blosc"})


def gpu_unsupported(r: ArrayRefs) -> str | None:
    """Why an array's chunks cannot decode on the GPU (for the trace), or None when they can."""
    odd = [c.codec_id for c in r.codecs if c.codec_id not in _BATCH_CODECS]
    if odd:
        return f"codec {odd[0]!r} has no GPU decoder yet"
    if r.dtype.itemsize not in (1, 2, 4, 8):
        return f"{r.dtype}: no GPU scatter for {r.dtype.itemsize}-byte elements"
    if not r.dtype.isnative:
        return f"{r.dtype}: CuPy arrays hold native byte order only (swapped on the host)"
    if any(c.codec_id in ("zlib", "blosc") for c in r.codecs):
        from gdsstore.gpu import nvcomp

        if nvcomp.nvcomp_or_none() is None:
            return nvcomp.nvcomp_reason()
    return None


def _decode_batched(r: ArrayRefs, sel: _plan.ChunkSelection, out: Any, landed: Landed, where: _Where, device: bool) -> None:
    """Decode every chunk as one batch and scatter them into ``out``: on the GPU, the landed bytes
    uploaded once and the boxes copied by one kernel; on the host the same batch code over numpy arrays."""
    t0 = time.perf_counter()
    present, buf = landed.present, landed.host
    pos, lens = landed.offsets[present], landed.sizes[present]
    if not device:
        rows = decode_rows(r, buf, buf, pos, lens, lambda k: where[int(present[k])])
        sp = _plan.scatter_plan(sel, present, r.chunks, r.dtype.itemsize, out.strides)
        _plan.scatter_host(sp, rows, out)
        return
    from gdsstore.gpu.staging import to_device

    rows = decode_rows(r, to_device(landed), buf, pos, lens, lambda k: where[int(present[k])])
    if len(present):
        from gdsstore.gpu.kernels import scatter_arrays

        sp = _plan.scatter_plan(sel, present, r.chunks, r.dtype.itemsize, out.strides)
        fill = np.asarray(0 if r.fill_value is None else r.fill_value, dtype=r.dtype).tobytes()
        scatter_arrays(
            sp.src + rows.data.ptr, sp.dst + out.data.ptr, sp.shape, sp.src_strides, sp.dst_strides,
            itemsize=r.dtype.itemsize, fill=fill,
        )
    if _trace.active():
        nbytes = int(rows.nbytes)
        chain = "+".join(c.codec_id for c in r.codecs) or "no codecs"
        _trace.record("decode", "gpu-decode", f"archive chunks ({chain}): nvCOMP + CuPy", nbytes, time.perf_counter() - t0)


def decode_rows(
    r: ArrayRefs, src: Any, host: np.ndarray, pos: np.ndarray, lens: np.ndarray, where: Callable[[int], str]
) -> Any:
    """Chunks of one buffer decoded as a batch, one row each (``(n, chunk_nbytes)`` ``uint8``).

    ``src`` is the buffer on the GPU (CuPy) or the host (numpy: the same code, tested on any machine);
    ``host`` is its host copy, where the zlib headers are read.

    Raises:
        NotImplementedError: a codec without a batch decoder (the host path reads it).
    """
    raw = r.chunk_nbytes
    rows = None
    for c in r.codecs[::-1]:
        cid = c.codec_id
        if rows is None and cid == "fletcher32":
            _codecs.check_fletcher32_batch(src, pos, lens, where)
            lens = lens - 4
        elif rows is None and cid == "zlib":
            idx = np.concatenate([pos[:, None] + np.arange(2), (pos + lens - 4)[:, None] + np.arange(4)], axis=1)
            rows = _codecs.decode_zlib_batch(src, pos, lens, raw, host[idx], where, host)
        elif rows is None and cid == "blosc":
            rows = _blosc_rows(src, host, pos, lens, raw, where)
        elif cid == "shuffle":
            rows = _codecs.unshuffle_rows(_equal_rows(src, pos, lens, raw, where) if rows is None else rows, c.elementsize)
        else:
            raise NotImplementedError(
                f"VirtualArray.read(device=True): codec {cid!r} has no batch decoder yet; read on the host"
            )
    return _equal_rows(src, pos, lens, raw, where) if rows is None else rows


def _blosc_rows(
    src: Any, host: np.ndarray, pos: np.ndarray, lens: np.ndarray, raw: int, where: Callable[[int], str]
) -> Any:
    """blosc frames (zarr v2 archives) as rows: the frames parsed on the host and their lz4/zstd streams
    decoded as batches (:func:`gdsstore.gpu.blosc.decode_frames`: nvCOMP on CuPy buffers, the same code on
    numpy); frames of compressors nvCOMP lacks (blosclz, snappy, zlib) through numcodecs, one by one."""
    from gdsstore.gpu import blosc

    xp = _codecs._array_module(src)
    n = len(pos)
    dec = blosc.decode_frames(src, pos, lens, np.full(n, raw, dtype=np.int64), host=host, where=where)
    rows = xp.empty((n, raw), dtype=xp.uint8)
    for b, buf in enumerate(dec.buffers):
        k = np.flatnonzero(dec.buffer_of == b)
        if k.size:
            rows[k] = _codecs.gather_rows(buf, dec.offsets[k], raw)
    on_cpu = dec.absent
    if on_cpu.size:
        from numcodecs import Blosc

        for i in on_cpu.tolist():
            a, m = int(pos[i]), int(lens[i])
            try:
                got = np.frombuffer(Blosc().decode(host[a : a + m].tobytes()), dtype=np.uint8)
            except Exception as exc:  # numcodecs raises RuntimeError or ValueError on a bad frame
                raise ChunkDecodeError(f"{where(i)}: corrupt blosc frame ({exc})") from exc
            if got.size != raw:
                raise ChunkDecodeError(f"{where(i)}: blosc frame decoded to {got.size} bytes, expected {raw}")
            rows[i] = xp.asarray(got)
    return rows


def _equal_rows(src: Any, pos: np.ndarray, lens: np.ndarray, raw: int, where: Callable[[int], str]) -> Any:
    """Uncompressed chunks as rows: each must hold exactly a chunk's bytes."""
    bad = np.flatnonzero(lens != raw)
    if bad.size:
        i = int(bad[0])
        raise ChunkDecodeError(f"{where(i)}: stored chunk of {int(lens[i])} bytes, expected {raw}")
    return _codecs.gather_rows(src, pos, raw)


class VirtualGroup(Mapping[str, VirtualArray]):
    """The arrays of a reference set by path (``group["t"]``, ``group["grp/t"]``).

    Args:
        arrays: the arrays' references by path.
        storage_options: for the remote backends of ``http(s)://`` and ``s3://`` targets (S3
            ``endpoint_url``/``key``/``secret``, HTTP ``headers``...), as :class:`gdsstore.GDSStore` takes them.

    Attributes:
        targets: the referenced files and what they were when first seen (:class:`~.fetch.Targets`).
    """

    def __init__(self, arrays: dict[str, ArrayRefs], storage_options: Mapping[str, Any] | None = None) -> None:
        files = sorted({f for a in arrays.values() for f in a.files})
        self.targets = Targets(files, storage_options)
        self._arrays = {k: VirtualArray(a, self.targets) for k, a in arrays.items()}

    def __getitem__(self, name: str) -> VirtualArray:
        return self._arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def __repr__(self) -> str:
        return f"VirtualGroup({list(self._arrays)})"


def open_virtual(source: Any, *, storage_options: Mapping[str, Any] | None = None) -> VirtualGroup:
    """Open virtual references for reading through gdsstore.

    Args:
        source: a VirtualiZarr ``ManifestStore``, a kerchunk reference dict, the path of a kerchunk
            JSON file, the directory of kerchunk parquet references, or an icechunk ``Repository``
            (its ``main`` branch), ``Session`` or ``IcechunkStore`` (:func:`.icechunk.open_icechunk`
            names other versions and checks the files' stamps).
        storage_options: for references whose targets are ``http(s)://`` or ``s3://`` URLs: passed to
            the engine's remote backends, as ``gdsstore.GDSStore(root, storage_options=...)`` takes them
            (S3: ``endpoint_url``, ``key``, ``secret``, ``region``...; HTTP: ``headers``...).

    Returns:
        :class:`VirtualGroup`: the arrays by path; index them like numpy arrays
        (``open_virtual(ms)["t"][0, :10]``), ``.read(sel, device=True)`` for CuPy results. Remote
        chunks of one read go out as one wave per backend (every range in flight at once).

    Examples:
        >>> import h5py, numpy as np, os, tempfile, kerchunk.hdf
        >>> p = os.path.join(tempfile.mkdtemp(), "a.h5")
        >>> with h5py.File(p, "w") as f:
        ...     _ = f.create_dataset("x", data=np.arange(10.0), chunks=(4,), compression="gzip", shuffle=True)
        >>> refs = kerchunk.hdf.SingleHdf5ToZarr(p, inline_threshold=0).translate()
        >>> open_virtual(refs)["x"][2:6].tolist()
        [2.0, 3.0, 4.0, 5.0]
    """
    if type(source).__name__ == "ManifestStore" and hasattr(source, "_group"):
        return VirtualGroup(from_manifest_store(source), storage_options)
    from gdsstore.archives.icechunk import is_icechunk

    if is_icechunk(source):
        return open_icechunk(source, storage_options=storage_options)
    if isinstance(source, str | os.PathLike) and os.path.isdir(source):
        from gdsstore.archives.parquet import from_parquet

        return VirtualGroup(from_parquet(source, storage_options), storage_options)
    if isinstance(source, Mapping | str | os.PathLike):
        return VirtualGroup(from_kerchunk(source, storage_options), storage_options)
    raise TypeError(
        "open_virtual(): `source` must be a ManifestStore, a kerchunk dict or a JSON path, or an icechunk "
        f"Repository/Session/IcechunkStore, got {type(source).__name__}"
    )


def open_icechunk(
    source: Any, *, branch: str | None = None, tag: str | None = None, snapshot_id: str | None = None,
    storage_options: Mapping[str, Any] | None = None, check_stamps: bool = True, batch_size: int | None = None,
) -> VirtualGroup:
    """An Icechunk repository's arrays as a :class:`~gdsstore.archives.VirtualGroup` (see the module docstring).

    Args:
        source, branch, tag, snapshot_id, batch_size: as for :func:`gdsstore.archives.icechunk.from_icechunk`
            (``batch_size`` None: its default).
        storage_options: for ``http(s)://`` and ``s3://`` targets, as for
            :func:`~gdsstore.archives.open_virtual` (icechunk's container credentials are its own).
        check_stamps: have icechunk check every referenced file's ETag / last-modified stamp now.

    Returns:
        :class:`~gdsstore.archives.VirtualGroup`.

    Raises:
        ArchiveChangedError: a file changed since its references were written (``check_stamps``).
    """
    from gdsstore.archives.icechunk import BATCH_SIZE, from_icechunk, icechunk_store, verify_stamps

    store = icechunk_store(source, branch=branch, tag=tag, snapshot_id=snapshot_id)
    arrays = from_icechunk(store, batch_size=BATCH_SIZE if batch_size is None else batch_size)
    group = VirtualGroup(arrays, storage_options)  # local files stamped here: later changes fail the reads
    if check_stamps:
        verify_stamps(store, arrays)
    return group
