"""``GDSCodecPipeline``: a zarr codec pipeline that reads a selection's chunks in batches.

Per-chunk Python work is what limits zarr on the GPU. This pipeline takes the whole list of chunks a
selection needs and, one window of chunks at a time:

1. reads their bytes (whole chunk objects, or the coalesced byte ranges of the inner chunks of each
   shard, after one batched read of the shard indexes) into one staging buffer, pinned when the
   output is on the GPU: through the engine (``GDSStore.backend``) with ``num_threads`` threads, or
   through the store's ``get`` concurrently for any other zarr store;
2. moves the staging buffer to the device in one copy;
3. decodes the window's bytes-to-bytes stage (crc32c, zstd/gzip/lz4) in one GPU call per codec
   (:mod:`gdsstore.gpu.nvcomp`, :mod:`gdsstore.gpu.kernels`), then views each chunk with its
   ``bytes``/``transpose`` codecs (no copies);
4. scatters the chunks into the output;

while the next window is being read. Host outputs take the same batched reads and decode on the CPU
(numcodecs) in parallel threads, so the pipeline works, and is tested, without a GPU.

Codec chains it cannot batch (nested sharding, codecs without synchronous support, byte getters that
are not store paths) and all writes go to zarr's own ``FusedCodecPipeline`` (the delegate); writes
still encode on the GPU through gdsstore's codecs and reach storage through the store (the engine,
for ``GDSStore``).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import CodecPipeline, GetResult
from zarr.codecs.sharding import ShardingCodec
from zarr.core.chunk_utils import ChunkTransform, fill_value_or_default, scatter_chunk
from zarr.core.codec_pipeline import FusedCodecPipeline

import gdsstore.trace as _trace
from gdsstore.engine.backend import Backend, ByteRange, coalesce_ranges
from gdsstore.gpu import codecs as _codecs
from gdsstore.gpu import nvcomp, staging

if TYPE_CHECKING:
    from typing import Self

    from zarr.abc.codec import Codec
    from zarr.abc.store import ByteGetter, ByteSetter
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, NDBuffer
    from zarr.core.dtype.wrapper import TBaseDType, TBaseScalar, ZDType
    from zarr.core.indexing import SelectorTuple
    from zarr.core.metadata.v3 import ChunkGridMetadata

__all__ = ["GDSCodecPipeline"]

#: Decoded bytes per window of host staging: bounds pinned staging, and sets the read/copy overlap.
WINDOW_BYTES = 128 << 20
#: Decoded bytes per window when nvCOMP decodes it: one nvCOMP call decodes each chunk on its own
#: thread block, so its time is nearly flat in the number of chunks (measured on an H200: 64 zstd
#: chunks of 4 MiB 62 ms, 256 of them 69 ms): fewer, larger windows decode several times faster.
DECODE_WINDOW_BYTES = 1 << 30


def _window_bytes(chain: _Chain, device: bool) -> int:
    """Large windows where the GPU decodes or the bytes are staged on the GPU (each window's read
    starts with no copy to overlap); host staging keeps windows small enough to stay in cache."""
    if not device:
        return WINDOW_BYTES
    fmt = chain.gpu_plan()[0]
    staged_on_gpu = DEVICE_STAGING and chain.device_staged()
    if fmt not in (None, "-") or staged_on_gpu:
        free = 0
        cp = _codecs._cupy()
        if cp is not None:
            try:
                free = int(cp.cuda.runtime.memGetInfo()[0])
            except Exception:  # no usable device: the smallest large window
                free = 0
        return _large_window(free)
    return WINDOW_BYTES


def _large_window(free: int) -> int:
    """A window on the GPU: :data:`DECODE_WINDOW_BYTES`, but at most a quarter of the device's free
    memory (a window's staging and decoded bytes, and the next window's staging being read, are alive
    at once), and at least :data:`WINDOW_BYTES`.

    Example:
        >>> _large_window(100 << 30) == DECODE_WINDOW_BYTES, _large_window(2 << 30) >> 20, _large_window(0) >> 20
        (True, 512, 128)
    """
    return max(WINDOW_BYTES, min(DECODE_WINDOW_BYTES, free // 4))


#: Device reads of uncompressed or zstd chunks from local files stage the stored bytes on the GPU
#: through the bounce ring (``False``: pinned host staging, then one copy per window; kept to measure).
DEVICE_STAGING = True

#: Device outputs of view-only chunks (``bytes``/``transpose``) with slice selections are assembled by
#: one scatter kernel per window instead of one cupy copy per chunk.
FAST_SCATTER = True

BatchItem = tuple[Any, "ArraySpec", "SelectorTuple", "SelectorTuple", bool]
Fetcher = Callable[[list[tuple[Any, ByteRange | None]], bool], staging.Staged]


# -- fetchers: how a list of (byte getter, range) becomes one staging buffer ---------------------------


def _backend_of(byte_getter: Any) -> Backend | None:
    backend = getattr(getattr(byte_getter, "store", None), "backend", None)
    return backend if isinstance(backend, Backend) else None


class _EngineFetcher:
    """Fetches through a gdsstore backend; :meth:`exact` reads byte ranges known to lie inside
    their objects (shard index entries) without looking sizes up first (local files)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def __call__(self, items: list[tuple[Any, ByteRange | None]], pinned: bool) -> staging.Staged:
        return staging.stage_from_backend(
            self.backend, [staging.Fetch(bg.path, br) for bg, br in items], pinned=pinned
        )

    def whole(
        self, keys: list[str], expect: np.ndarray | None, pinned: bool, device: int | None = None
    ) -> staging.Staged | None:
        """Whole objects from local files: of known size (``expect``, uncompressed chunks) without
        size lookups, else sized by one batched ``stat``; ``device``: staged on that GPU. ``None``
        when the backend is not local (the caller fetches as usual)."""
        from gdsstore.engine.localfs import LocalBackend

        if not isinstance(self.backend, LocalBackend):
            return None
        return staging.stage_local(self.backend, keys, pinned=pinned, expect=expect, device=device)

    def exact(
        self, keys: list[str], starts: np.ndarray, stops: np.ndarray, pinned: bool, device: int | None = None
    ) -> staging.Staged:
        from gdsstore.engine.localfs import LocalBackend

        if isinstance(self.backend, LocalBackend):
            return staging.stage_local(self.backend, keys, starts, stops, pinned=pinned, device=device)
        fetches = [
            staging.Fetch(k, ByteRange("range", a, b))
            for k, a, b in zip(keys, starts.tolist(), stops.tolist())
        ]
        return staging.stage_from_backend(self.backend, fetches, pinned=pinned)


def _engine_fetcher(backend: Backend) -> Fetcher:
    return _EngineFetcher(backend)


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


def _store_fetcher(loop: asyncio.AbstractEventLoop) -> Fetcher:
    """Fetch through the byte getters' async ``get`` on the caller's event loop (any zarr store)."""
    from zarr.core.buffer.cpu import numpy_buffer_prototype
    from zarr.core.common import concurrent_map
    from zarr.core.config import config as zarr_config

    async def get_all(items: list[tuple[Any, ByteRange | None]]) -> list[Any]:
        proto = numpy_buffer_prototype()
        return await concurrent_map(
            [(bg, _to_zarr_request(br)) for bg, br in items],
            lambda bg, req: bg.get(prototype=proto, byte_range=req),
            zarr_config.get("async.concurrency"),
        )

    def fetch(items: list[tuple[Any, ByteRange | None]], pinned: bool) -> staging.Staged:
        bufs = asyncio.run_coroutine_threadsafe(get_all(items), loop).result()
        return staging.stage_from_host_buffers(
            [None if b is None else b.as_numpy_array() for b in bufs], pinned=pinned
        )

    return fetch


# -- the window decoder --------------------------------------------------------------------------------


def _is_device_spec(spec: ArraySpec) -> bool:
    try:
        from zarr.core.buffer import gpu
    except Exception:
        return False
    return issubclass(spec.prototype.buffer, gpu.Buffer)


_NBYTES: dict[int, tuple[Any, int]] = {}


def _raw_nbytes(spec: ArraySpec) -> int:
    # Specs are shared by the chunks of a regular grid: remember the last few by identity.
    hit = _NBYTES.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    n = 1
    for d in spec.shape:
        n *= int(d)
    n *= int(spec.dtype.to_native_dtype().itemsize)
    if len(_NBYTES) > 64:
        _NBYTES.clear()
    _NBYTES[id(spec)] = (spec, n)
    return n


def _slices(sels: Sequence[Any], shape: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(start, count, step)`` arrays (``n x ndim``) of tuples of slices over ``shape``.

    Raises:
        TypeError: a selector is not a tuple of slices (callers check :func:`_fast_ok` first).
    """
    nd = len(shape)
    flat: list[int] = []
    ext = flat.extend
    for sel in sels:
        for sl, n in zip(sel, shape):
            ext(sl.indices(n))
    a = np.array(flat, dtype=np.int64).reshape(len(sels), nd, 3)
    start, stop, step = a[:, :, 0], a[:, :, 1], a[:, :, 2]
    count = np.maximum(0, (stop - start + step - 1) // step)
    return start, count, step


@dataclass(frozen=True)
class _Chain:
    """A chunk codec chain split for batching: the bytes-to-bytes stage runs batched on the GPU when
    ``gpu_formats`` is set, the rest (``bytes``, ``transpose``) per chunk as views."""

    transform: ChunkTransform  # the whole chain
    array_part: ChunkTransform  # array->array + array->bytes only
    bb_codecs: tuple[Any, ...]  # bytes->bytes, encode order
    bb_formats: tuple[str | None, ...]  # encode order
    has_gdsstore_codec: bool  # a bytes-to-bytes codec records its own route

    @classmethod
    def of(cls, codecs: Sequence[Codec]) -> _Chain:
        from zarr.abc.codec import BytesBytesCodec

        bb = [c for c in codecs if isinstance(c, BytesBytesCodec)]
        rest = [c for c in codecs if not isinstance(c, BytesBytesCodec)]
        return cls(
            ChunkTransform(codecs=tuple(codecs)),
            ChunkTransform(codecs=tuple(rest)),
            tuple(bb),
            tuple(_codecs.codec_format(c) for c in bb),
            any(isinstance(c, _codecs.GPUBytesCodec | _codecs.Crc32cCodec) for c in bb),
        )

    def gpu_plan(self) -> tuple[str | None, bool, str]:
        """``(compressor format or None, crc32c outermost?, reason)``; the format is ``"-"`` when the
        bytes-to-bytes stage cannot run batched on the GPU (the reason says why)."""
        fmts = list(self.bb_formats)
        crc = bool(fmts) and fmts[-1] == "crc32c"
        if crc:
            fmts.pop()
        if not fmts:
            return None, crc, "no compressor"
        if len(fmts) > 1 or fmts[0] is None or fmts[0] == "crc32c":
            return "-", crc, f"codec chain {self.bb_formats} not batchable on the GPU"
        d = nvcomp.decide_codec(fmts[0], device=True)
        if d.route != "gpu-decode":
            return "-", crc, d.reason
        return fmts[0], crc, d.reason

    def device_staged(self) -> bool:
        """Whether a device read stages the stored bytes straight on the GPU (bounce ring): nothing
        about them is parsed on the CPU (no crc32c to check, no gzip/lz4 framing, no CPU codec)."""
        fmt, crc, _ = self.gpu_plan()
        return fmt in (None, "zstd") and not crc


def _decode_window(
    chain: _Chain, specs: list[ArraySpec], staged: staging.Staged, device: bool
) -> list[NDBuffer | None]:
    """Decode every chunk of a staged window (``None`` for missing ones)."""
    t0 = time.perf_counter()
    n = len(specs)
    out: list[NDBuffer | None] = [None] * n
    present = staged.present.tolist()
    if not device:
        fmts = [f for f in chain.bb_formats if f is not None]
        pool = staging.executor()

        def one(i: int) -> None:
            view = staged.view(i)
            assert view is not None
            with _codecs.quiet_records():
                out[i] = chain.transform.decode_chunk(
                    specs[i].prototype.buffer.from_array_like(view), specs[i]
                )

        if len(present) > 1:
            list(pool.map(one, present))
        else:
            for i in present:
                one(i)
        if fmts:
            _trace.record(
                "decode",
                "cpu-codec",
                "host buffer",
                sum(_raw_nbytes(specs[i]) for i in present),
                time.perf_counter() - t0,
            )
        return out

    # Device: the bytes-to-bytes stage batched on the GPU, then each chunk viewed/transposed by
    # its array codecs (``bytes``, ``transpose``, or any other: they run per chunk).
    raws = _decode_raw_device(chain, specs, staged)
    for i in range(n):
        raw = raws.array(i)
        if raw is not None:
            out[i] = chain.array_part.decode_chunk(specs[i].prototype.buffer.from_array_like(raw), specs[i])
    return out


# -- the device fast path: raw decoded bytes + one scatter kernel per window ---------------------------

Layout = tuple[tuple[int, ...], tuple[int, ...]]  # shape, byte strides


def _view_layout(chain: _Chain, spec: ArraySpec) -> Layout | None:
    """Shape and byte strides of a decoded chunk as a view of its raw bytes (``bytes`` codec in the
    native byte order, then ``transpose`` codecs), or ``None`` when decoding is more than a view."""
    from zarr.codecs import BytesCodec, TransposeCodec

    *codecs, ab = chain.array_part.codecs
    aa = [c for c in codecs if isinstance(c, TransposeCodec)]
    if not isinstance(ab, BytesCodec) or len(aa) != len(codecs):
        return None
    dt = spec.dtype.to_native_dtype()
    if dt.kind not in "biuf" or dt.itemsize not in (1, 2, 4, 8) or not dt.isnative:
        return None
    endian = getattr(ab.endian, "value", ab.endian)
    if dt.itemsize > 1 and endian not in (None, sys.byteorder):
        return None
    shape = tuple(spec.shape)
    for c in aa:  # the stored layout: shapes permuted by each transpose, in encode order
        shape = tuple(shape[o] for o in c.order)
    strides: list[int] = []
    acc = dt.itemsize
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    st = tuple(reversed(strides))
    for c in reversed(aa):  # decoding transposes back: a view with permuted strides
        inv = [int(i) for i in np.argsort(c.order)]
        shape = tuple(shape[i] for i in inv)
        st = tuple(st[i] for i in inv)
    return shape, st


def _select(ptr: int, layout: Layout, sel: Any) -> tuple[int, Layout] | None:
    """Apply a tuple of slices to a strided view; ``None`` for any other selector."""
    shape, strides = layout
    if not isinstance(sel, tuple) or len(sel) != len(shape):
        return None
    new_shape: list[int] = []
    new_strides: list[int] = []
    for n, st, sl in zip(shape, strides, sel):
        if not isinstance(sl, slice):
            return None
        start, stop, step = sl.start, sl.stop, sl.step
        if step == 1 and type(start) is int and type(stop) is int and 0 <= start <= stop <= n:
            count = stop - start  # what zarr's indexers produce: the cheap common case
        else:
            start, stop, step = sl.indices(n)
            count = len(range(start, stop, step))
        ptr += start * st
        new_shape.append(count)
        new_strides.append(st * step)
    return ptr, (tuple(new_shape), tuple(new_strides))


def _out_layout(out: NDBuffer) -> tuple[int, Layout]:
    a: Any = out.as_ndarray_like()
    return _ptr(a), (tuple(a.shape), tuple(a.strides))


def _out_device(out: NDBuffer) -> int | None:
    """The GPU ordinal of a device output (``None`` for host memory)."""
    a: Any = out.as_ndarray_like()
    dev = getattr(a, "device", None)
    return int(dev.id) if hasattr(a, "__cuda_array_interface__") and dev is not None else None


def _ptr(a: Any) -> int:
    """Address of a device (or, in tests, host) array's first byte."""
    return int(a.data.ptr) if hasattr(a, "__cuda_array_interface__") else int(a.ctypes.data)


def _sync() -> None:
    _codecs._cupy().cuda.get_current_stream().synchronize()


#: Blocks for the scatter kernel, as arrays: ``(src_ptr (0: fill), dst_ptr, shape, src_strides,
#: dst_strides)`` with one row per block (strides in bytes).
Blocks = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _blocks(
    src_ptrs: np.ndarray,
    src_lay: Layout,
    c_start: np.ndarray,
    c_count: np.ndarray,
    c_step: np.ndarray,
    dst: np.ndarray,
    dst_st: np.ndarray,
) -> Blocks:
    """Blocks copying each chunk's selection (``c_*``) from its raw bytes at ``src_ptrs`` (laid out
    as ``src_lay``) to ``dst``/``dst_st``; rows with a 0 pointer write the fill value."""
    s_str = np.array(src_lay[1], dtype=np.int64)
    have = src_ptrs != 0
    src = np.where(have, src_ptrs + (c_start * s_str).sum(axis=1), 0)
    src_st = np.where(have[:, None], s_str * c_step, dst_st)
    return src, dst, c_count, src_st, dst_st


def _as_blocks(rows: Sequence[tuple[int, int, Any, Any, Any]], nd: int) -> Blocks:
    """Blocks from ``(src, dst, shape, src_strides, dst_strides)`` tuples."""
    src, dst, shp, sst, dstr = zip(*rows)
    return (
        np.array(src, dtype=np.int64),
        np.array(dst, dtype=np.int64),
        np.array(shp, dtype=np.int64).reshape(len(rows), nd),
        np.array(sst, dtype=np.int64).reshape(len(rows), nd),
        np.array(dstr, dtype=np.int64).reshape(len(rows), nd),
    )


def _scatter(blocks: Blocks, itemsize: int, fill: bytes) -> None:
    from gdsstore.gpu.kernels import scatter_arrays

    scatter_arrays(*blocks, itemsize=itemsize, fill=fill)


def _scatter_window(blocks: Blocks, itemsize: int, fill: bytes, nbytes: int, t0: float) -> None:
    """One scatter launch for a window, waited for (the window's buffers are freed next), traced."""
    _scatter(blocks, itemsize, fill)
    _sync()
    _trace.record("scatter", "gpu-kernel", "one launch per window", nbytes, time.perf_counter() - t0)


def _decode_scatter(
    chain: _Chain,
    specs: list[ArraySpec],
    staged: staging.Staged,
    layout: Layout,
    rows: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    itemsize: int,
    fill: bytes,
    t0: float,
) -> np.ndarray:
    """One window of a fast path: decode its chunks on the device, then scatter every chunk's block
    into the output in one launch (waited for, traced). ``rows``: per chunk, the selection inside it
    (start, count, step) and where it lands (pointer, strides). Returns the decoded chunks' device
    pointers, 0 for a missing chunk (for presence only: the memory is freed on return)."""
    raw = _decode_raw_device(chain, specs, staged)
    ptrs = raw.ptrs()
    blocks = _blocks(ptrs, layout, *rows)
    _scatter_window(blocks, itemsize, fill, sum(_raw_nbytes(sp) for sp in specs), t0)
    return ptrs


def _fill_bytes(spec: ArraySpec) -> bytes:
    return np.asarray(fill_value_or_default(spec), dtype=spec.dtype.to_native_dtype()).tobytes()


def _bb_decode_on_host(
    chain: _Chain, specs: list[ArraySpec], staged: staging.Staged, ids: list[int]
) -> list[tuple[int, np.ndarray]]:
    """Bytes-to-bytes codecs on the CPU, from the host staging buffer: raw bytes per chunk."""
    import dataclasses

    from zarr.core.buffer.cpu import Buffer as HostBuffer
    from zarr.core.buffer.cpu import numpy_buffer_prototype

    host_proto = numpy_buffer_prototype()
    out = []
    for i in ids:
        hspec = dataclasses.replace(specs[i], prototype=host_proto)
        view = staged.view(i)
        assert view is not None
        buf: Any = HostBuffer.from_array_like(view)
        with _codecs.quiet_records():
            for c in reversed(chain.bb_codecs):
                buf = c._decode_sync(buf, hspec)
        out.append((i, buf.as_numpy_array().view(np.uint8).reshape(-1)))
    return out


class _Raw:
    """A window's chunks decoded to raw bytes on the device: chunk ``i`` is ``lens[i]`` bytes at
    ``bufs[where[i]]`` + ``offs[i]`` (``where[i] == -1``: missing). ``bufs`` keeps the memory alive."""

    __slots__ = ("bufs", "lens", "offs", "where")

    def __init__(self, n: int) -> None:
        self.bufs: list[Any] = []
        self.where = np.full(n, -1, dtype=np.int64)
        self.offs = np.zeros(n, dtype=np.int64)
        self.lens = np.zeros(n, dtype=np.int64)

    def add(self, buf: Any, ids: Any, offs: Any, lens: Any) -> None:
        self.where[ids] = len(self.bufs)
        self.offs[ids] = offs
        self.lens[ids] = lens
        self.bufs.append(buf)

    def ptrs(self) -> np.ndarray:
        """Device address of each chunk's raw bytes (``int64``; 0: missing)."""
        base = np.array([_ptr(b) for b in self.bufs] + [0], dtype=np.int64)
        out: np.ndarray = np.where(self.where >= 0, base[self.where] + self.offs, 0)
        return out

    def array(self, i: int) -> Any:
        """Chunk ``i``'s raw bytes as a device ``uint8`` array, or ``None`` when missing."""
        w = int(self.where[i])
        if w < 0:
            return None
        a = int(self.offs[i])
        return self.bufs[w][a : a + int(self.lens[i])]


def _decode_raw_device(chain: _Chain, specs: list[ArraySpec], staged: staging.Staged) -> _Raw:
    """Decode a window's bytes-to-bytes stage on the device: every present chunk's raw
    (bytes-codec) bytes, located by a :class:`_Raw`."""
    cp = _codecs._cupy()
    t0 = time.perf_counter()
    n = len(specs)
    raw = _Raw(n)
    pres = staged.present
    present = pres.tolist()
    fmt, crc, reason = chain.gpu_plan()
    cpu_rest: list[int] = list(present) if fmt == "-" else []
    if fmt != "-" and present:
        staged_on_gpu = staged.dev is not None
        dev = staging.to_device(staged)
        if not staged_on_gpu:  # (bytes read through the bounce ring were copied, and traced, by the read)
            _trace.record(
                "h2d",
                "pinned-copy" if staged.pinned is not None else "pageable-copy",
                "one copy per window",
                staged.nbytes,
                time.perf_counter() - t0,
                device=getattr(getattr(dev, "device", None), "id", None),
            )
        t0 = time.perf_counter()
        s_off = staged.offsets.copy()
        s_len = staged.sizes.copy()
        if crc:
            from gdsstore.gpu.kernels import crc32c_device

            for i in present:
                if s_len[i] < 4:
                    raise ValueError(
                        f"GDSCodecPipeline.read(): chunk {i} of {int(s_len[i])} bytes holds no crc32c"
                    )
            computed = crc32c_device([dev[int(s_off[i]) : int(s_off[i] + s_len[i]) - 4] for i in present])
            for k, i in enumerate(present):
                a, m = int(s_off[i]), int(s_len[i])
                stored = int(np.frombuffer(staged.host[a + m - 4 : a + m].tobytes(), "<u4")[0])
                if stored != int(computed[k]):
                    raise ValueError(
                        f"GDSCodecPipeline.read(): crc32c mismatch in chunk {i}: stored {stored:#010x}, "
                        f"computed {int(computed[k]):#010x}"
                    )
            s_len[pres] -= 4
        if fmt is None:
            raw.add(dev, pres, s_off[pres], s_len[pres])
        else:
            want = np.array([_raw_nbytes(specs[i]) for i in present], dtype=np.int64)
            if fmt == "zstd":
                # A zstd chunk is one frame: the payload is the whole slot (no per-chunk parsing).
                ok = np.ones(len(present), dtype=bool)
                p_off, p_len = s_off[pres], s_len[pres]
            else:
                ok = np.zeros(len(present), dtype=bool)
                p_off = np.zeros(len(present), dtype=np.int64)
                p_len = np.zeros(len(present), dtype=np.int64)
                for k, i in enumerate(present):
                    a, m = int(s_off[i]), int(s_len[i])
                    try:
                        fr = nvcomp.frame_of(fmt, staged.host[a : a + min(m, 512)], m)
                        if fmt == "gzip" and nvcomp.gzip_isize(staged.host[a + m - 4 : a + m]) != int(
                            want[k]
                        ) % (1 << 32):
                            raise ValueError("gzip size mismatch (multi-member?)")
                        if fmt == "lz4" and fr.size != int(want[k]):
                            raise ValueError("lz4 size mismatch")
                    except ValueError:
                        cpu_rest.append(i)
                        continue
                    ok[k] = True
                    p_off[k], p_len[k] = a + fr.start, fr.stop - fr.start
            ids = pres[ok]
            if len(ids):
                w = want[ok]
                padded = (w + 255) // 256 * 256
                o_off = np.cumsum(padded) - padded
                outbuf = _scratch(int(padded.sum()))
                try:
                    nvcomp.decode_batch_into(
                        fmt, dev, p_off[ok].tolist(), p_len[ok].tolist(), outbuf, o_off.tolist(), w.tolist()
                    )
                    raw.add(outbuf, ids, o_off, w)
                except Exception as exc:
                    # A payload nvCOMP refuses or decodes to another size: the CPU codec decides
                    # (it raises on corrupt data); the trace names the cause.
                    cpu_rest.extend(ids.tolist())
                    reason = f"nvCOMP failed ({type(exc).__name__}: {str(exc)[:120]})"
            raw.bufs.append(dev)  # the device staging stays alive until the window is scattered
        if fmt is not None or crc:
            done = raw.where >= 0
            _trace.record(
                "decode",
                "gpu-decode",
                reason if fmt else "crc32c GPU kernel",
                int(raw.lens[done].sum()),
                time.perf_counter() - t0,
            )
    if cpu_rest:
        t0 = time.perf_counter()
        nbytes = 0
        for i, host_raw in _bb_decode_on_host(chain, specs, staged, sorted(cpu_rest)):
            arr = cp.asarray(host_raw)
            raw.add(arr, [i], [0], [int(arr.nbytes)])
            nbytes += int(arr.nbytes)
        _trace.record(
            "decode",
            "cpu-codec",
            reason if fmt == "-" or reason.startswith("nvCOMP failed") else "framing nvCOMP cannot take",
            nbytes,
            time.perf_counter() - t0,
        )
    return raw


def _scratch(nbytes: int) -> Any:
    """A device buffer for decoded bytes (cupy's pool reuses the memory across windows)."""
    cp = _codecs._cupy()
    return cp.empty(max(nbytes, 1), dtype=cp.uint8)


def _fast_ok(chain: _Chain, batch: Sequence[BatchItem], drop_axes: tuple[int, ...]) -> bool:
    """Whether a batch can take the device fast path: view-only array codecs, slice selections."""
    if drop_axes or not batch or _view_layout(chain, batch[0][1]) is None:
        return False
    for _, _, csel, osel, _ in batch:
        if not isinstance(csel, tuple) or not isinstance(osel, tuple):
            return False
        if not all(isinstance(x, slice) for x in (*csel, *osel)):
            return False
    return len(batch[0][1].shape) <= 8


def _windows(sizes: Sequence[int], limit: int) -> list[range]:
    out: list[range] = []
    start = 0
    acc = 0
    for i, s in enumerate(sizes):
        if i > start and acc + s > limit:
            out.append(range(start, i))
            start, acc = i, 0
        acc += s
    if start < len(sizes):
        out.append(range(start, len(sizes)))
    return out


_prefetcher = ThreadPoolExecutor(max_workers=2, thread_name_prefix="gdsstore-prefetch")


def _pipelined(
    windows: list[range], read: Callable[[range], Any], process: Callable[[range, Any], None]
) -> None:
    """Run ``process`` on each window while the next window's ``read`` runs in the background."""
    if not windows:
        return
    nxt: Future[Any] = _prefetcher.submit(read, windows[0])
    for k, w in enumerate(windows):
        cur = nxt.result()
        if k + 1 < len(windows):
            nxt = _prefetcher.submit(read, windows[k + 1])
        process(w, cur)


# -- the pipeline --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GDSCodecPipeline(CodecPipeline):
    """Batched reads + GPU decode; zarr's ``FusedCodecPipeline`` for everything it does not batch.

    Selected by :func:`gdsstore.enable_gpu` (``codec_pipeline.path``), or directly::

        zarr.config.set({"codec_pipeline.path": "gdsstore.gpu.pipeline.GDSCodecPipeline"})
    """

    delegate: FusedCodecPipeline

    # -- construction (zarr's CodecPipeline contract) --

    @classmethod
    def from_codecs(cls, codecs: Iterable[Codec], *, batch_size: int | None = None) -> Self:
        upgraded = [_codecs.upgrade(c) for c in codecs]
        return cls(FusedCodecPipeline.from_codecs(upgraded, batch_size=batch_size))

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Self:
        return type(self)(self.delegate.evolve_from_array_spec(array_spec))

    def __iter__(self) -> Iterator[Codec]:
        return iter(self.delegate.codecs)

    @property
    def codecs(self) -> tuple[Codec, ...]:
        return self.delegate.codecs

    @property
    def supports_partial_decode(self) -> bool:
        return self.delegate.supports_partial_decode

    @property
    def supports_partial_encode(self) -> bool:
        return self.delegate.supports_partial_encode

    def validate(
        self, *, shape: tuple[int, ...], dtype: ZDType[TBaseDType, TBaseScalar], chunk_grid: ChunkGridMetadata
    ) -> None:
        self.delegate.validate(shape=shape, dtype=dtype, chunk_grid=chunk_grid)

    def compute_encoded_size(self, byte_length: int, array_spec: ArraySpec) -> int:
        return self.delegate.compute_encoded_size(byte_length, array_spec)

    async def decode(
        self, chunk_bytes_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]
    ) -> Iterable[NDBuffer | None]:
        return await self.delegate.decode(chunk_bytes_and_specs)

    async def encode(
        self, chunk_arrays_and_specs: Iterable[tuple[NDBuffer | None, ArraySpec]]
    ) -> Iterable[Buffer | None]:
        return await self.delegate.encode(chunk_arrays_and_specs)

    async def write(
        self,
        batch_info: Iterable[tuple[ByteSetter, ArraySpec, SelectorTuple, SelectorTuple, bool]],
        value: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> None:
        from gdsstore.gpu import write as _write

        await _write.write(self, batch_info, value, drop_axes)

    # -- reads --

    def read_plan(self, byte_getter: Any = None) -> tuple[str, str]:
        """``(plan, reason)``: ``"chunks"``, ``"shards"`` or ``"delegate"`` for this pipeline's codecs."""
        from zarr.storage._common import StorePath

        if byte_getter is not None and not isinstance(byte_getter, StorePath):
            return "delegate", f"byte getter {type(byte_getter).__name__} is not a store path"
        if self.delegate.sync_transform is None:
            return "delegate", "a codec has no synchronous decode"
        ab = self.delegate.array_bytes_codec
        if isinstance(ab, ShardingCodec):
            if self.delegate.array_array_codecs or self.delegate.bytes_bytes_codecs:
                return "delegate", "codecs outside the sharding codec"
            if any(isinstance(c, ShardingCodec) for c in ab.codecs):
                return "delegate", "nested sharding"
            return "shards", "sharded: batched index reads + coalesced inner-chunk ranges"
        return "chunks", "whole chunk objects, batched"

    async def read(
        self,
        batch_info: Iterable[tuple[ByteGetter, ArraySpec, SelectorTuple, SelectorTuple, bool]],
        out: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> tuple[GetResult, ...]:
        batch = list(batch_info)
        if not batch:
            return ()
        plan, reason = self.read_plan(batch[0][0])
        if plan == "delegate":
            _trace.record("read-plan", "zarr-pipeline", reason, 0, 0.0)
            return await self.delegate.read(batch, out, drop_axes)
        backend = _backend_of(batch[0][0])
        if backend is not None and all(_backend_of(bg) is backend for bg, *_ in batch):
            fetch = _engine_fetcher(backend)
        else:
            fetch = _store_fetcher(asyncio.get_running_loop())
        run = self._read_chunks if plan == "chunks" else self._read_shards
        return await asyncio.to_thread(run, batch, out, drop_axes, fetch)

    def _read_chunks(
        self, batch: list[BatchItem], out: NDBuffer, drop_axes: tuple[int, ...], fetch: Fetcher
    ) -> tuple[GetResult, ...]:
        chain = _Chain.of(self.delegate.codecs)
        device = _is_device_spec(batch[0][1])
        fast = device and FAST_SCATTER and _fast_ok(chain, batch, drop_axes)
        results: list[GetResult] = [GetResult(status="missing")] * len(batch)
        windows = _windows([_raw_nbytes(item[1]) for item in batch], _window_bytes(chain, device))
        if fast:
            # Every chunk's block, vectorized over the batch: where its selection lands in the
            # output (pointer, strides) and which part of the chunk it takes.
            out_ptr, out_lay = _out_layout(out)
            spec0 = batch[0][1]
            itemsize = spec0.dtype.to_native_dtype().itemsize
            fill = _fill_bytes(spec0)
            src_lay = _view_layout(chain, spec0)
            assert src_lay is not None
            csel = _slices([item[2] for item in batch], spec0.shape)
            o_start, o_count, o_step = _slices([item[3] for item in batch], out_lay[0])
            o_str = np.array(out_lay[1], dtype=np.int64)
            dst = out_ptr + (o_start * o_str).sum(axis=1)
            dst_st = o_str * o_step
            if not np.array_equal(csel[1], o_count):
                raise ValueError("GDSCodecPipeline.read(): chunk and output selections differ in shape")

        # Without bytes-to-bytes codecs a stored chunk is exactly its raw size: no size lookups.
        whole = getattr(fetch, "whole", None)
        known = whole is not None and not chain.bb_codecs
        raw_sizes = np.array([_raw_nbytes(item[1]) for item in batch], dtype=np.int64) if known else None
        on_gpu = _out_device(out) if DEVICE_STAGING and fast and chain.device_staged() else None

        def read(w: range) -> staging.Staged:
            if whole is not None and (raw_sizes is not None or on_gpu is not None):
                expect = None if raw_sizes is None else raw_sizes[w.start : w.stop]
                st = whole([batch[i][0].path for i in w], expect, device, on_gpu)
                if st is not None:
                    return st  # type: ignore[no-any-return]
            return fetch([(batch[i][0], None) for i in w], device)

        def process(w: range, staged: staging.Staged) -> None:
            try:
                specs = [batch[i][1] for i in w]
                if fast:
                    t0 = time.perf_counter()
                    sl = slice(w.start, w.stop)
                    assert src_lay is not None
                    rows = (csel[0][sl], csel[1][sl], csel[2][sl], dst[sl], dst_st[sl])
                    ptrs = _decode_scatter(chain, specs, staged, src_lay, rows, itemsize, fill, t0)
                    for k in np.flatnonzero(ptrs).tolist():
                        results[w[k]] = GetResult(status="present")
                    return
                decoded = _decode_window(chain, specs, staged, device)
                for k, i in enumerate(w):
                    _, spec, chunk_sel, out_sel, _ = batch[i]
                    arr = decoded[k]
                    results[i] = scatter_chunk(
                        None if arr is None else arr[chunk_sel],
                        out,
                        chunk_spec=spec,
                        out_selection=out_sel,
                        drop_axes=drop_axes,
                    )
            finally:
                staged.release()

        _pipelined(windows, read, process)
        return tuple(results)

    def _read_shards(
        self, batch: list[BatchItem], out: NDBuffer, drop_axes: tuple[int, ...], fetch: Fetcher
    ) -> tuple[GetResult, ...]:
        from zarr.abc.store import RangeByteRequest
        from zarr.core.chunk_grids import ChunkGrid
        from zarr.core.indexing import get_indexer

        codec = self.delegate.array_bytes_codec
        assert isinstance(codec, ShardingCodec)
        shard_spec0 = batch[0][1]
        device = _is_device_spec(shard_spec0)

        # 1. every shard index in one batched read
        index_reqs: list[tuple[Any, ByteRange | None]] = []
        cps_list = []
        for bg, spec, *_ in batch:
            cps = codec._get_chunks_per_shard(spec)
            cps_list.append(cps)
            req = codec._shard_index_byte_range(cps)
            br = (
                ByteRange("range", req.start, req.end)
                if isinstance(req, RangeByteRequest)
                else ByteRange("suffix", req.suffix)
            )
            index_reqs.append((bg, br))
        idx_staged = fetch(index_reqs, False)
        from zarr.core.buffer.cpu import Buffer as CPUBuffer

        indexes = []
        for i in range(len(batch)):
            v = idx_staged.view(i)
            indexes.append(
                None
                if v is None
                else codec._decode_shard_index_sync(CPUBuffer.from_array_like(v.copy()), cps_list[i])
            )
        idx_staged.release()

        inner_chain0 = _Chain.of(codec._get_inner_chunk_transform(shard_spec0).codecs)
        if device and FAST_SCATTER and not drop_axes:
            done = self._read_shards_fast(batch, out, fetch, codec, indexes, inner_chain0)
            if done is not None:
                return done

        # 2. per shard: which inner chunks, their byte ranges, coalesced into reads
        @dataclass
        class _Shard:
            item: int
            indexer: Any
            inner: list[tuple[tuple[int, ...], Any, Any]]  # (coords, chunk_sel, out_sel)
            inner_slot: list[int | None]  # position in the inner-chunk list, None: absent from shard

        shards: list[_Shard] = []
        inner_specs: list[ArraySpec] = []
        reads: list[tuple[Any, ByteRange | None]] = []
        read_members: list[list[tuple[int, int, int]]] = []  # per read: (inner id, offset in read, length)
        max_gap = shard_spec0.config.sharding_coalesce_max_gap_bytes
        max_bytes = shard_spec0.config.sharding_coalesce_max_bytes
        for i, (bg, spec, chunk_sel, _out_sel, _) in enumerate(batch):
            index = indexes[i]
            if index is None:
                continue
            indexer = get_indexer(
                chunk_sel, shape=spec.shape, chunk_grid=ChunkGrid.from_sizes(spec.shape, codec.chunk_shape)
            )
            inner_spec = codec._get_chunk_spec(spec)
            inner = [(coords, csel, osel) for coords, csel, osel, _ in indexer]
            slots: list[int | None] = []
            ranges: list[tuple[int, int]] = []
            ids: list[int] = []
            for coords, _, _ in inner:
                sl = index.get_chunk_slice(coords)
                if sl is None:
                    slots.append(None)
                    continue
                slots.append(len(inner_specs))
                ids.append(len(inner_specs))
                inner_specs.append(inner_spec)
                ranges.append(sl)
            for a, b, members in coalesce_ranges(ranges, max_gap, max_bytes):
                reads.append((bg, ByteRange("range", a, b)))
                read_members.append(
                    [(ids[k], ranges[k][0] - a, ranges[k][1] - ranges[k][0]) for k in members]
                )
            shards.append(_Shard(i, indexer, inner, slots))

        # 3. read (windowed by the coalesced reads), decode all inner chunks of a window as one batch
        inner_chain = _Chain.of(codec._get_inner_chunk_transform(shard_spec0).codecs)
        read_sizes = [sum(m[2] for m in members) for members in read_members]
        windows = _windows(read_sizes, _window_bytes(inner_chain, device))
        results: list[GetResult] = [GetResult(status="missing")] * len(batch)
        fast = (
            device
            and FAST_SCATTER
            and self._shards_fast_ok(batch, shards, inner_chain, inner_specs, drop_axes)
        )

        def read(w: range) -> staging.Staged:
            return fetch([reads[r] for r in w], device)

        def window_slots(w: range, st: staging.Staged) -> tuple[list[int], staging.Staged]:
            ids: list[int] = []
            slots2: list[tuple[int, int] | None] = []
            st_slots = st.slots
            for r_local, r in enumerate(w):
                base = st_slots[r_local]
                for inner_id, off, length in read_members[r]:
                    ids.append(inner_id)
                    slots2.append(None if base is None else (base[0] + off, length))
            return ids, st.sub_slots(slots2)

        if fast:
            out_ptr, out_lay = _out_layout(out)
            itemsize = shard_spec0.dtype.to_native_dtype().itemsize
            fill = _fill_bytes(shard_spec0)
            inner_lay = _view_layout(inner_chain, inner_specs[0]) if inner_specs else None
            # where each inner chunk lands: (destination view, selection inside the chunk)
            dest: dict[int, tuple[int, Layout, Any]] = {}
            fills: list[Any] = []
            by_item = {sh.item: sh for sh in shards}
            for i, (_, _spec, _, out_sel, _) in enumerate(batch):
                d = _select(out_ptr, out_lay, out_sel)
                assert d is not None
                sh = by_item.get(i)
                if sh is None:
                    fills.append((0, d[0], d[1][0], d[1][1], d[1][1]))
                    continue
                results[i] = GetResult(status="present")
                for (_coords, csel, osel), slot in zip(sh.inner, sh.inner_slot):
                    d2 = _select(d[0], d[1], osel)
                    assert d2 is not None
                    if slot is None:
                        fills.append((0, d2[0], d2[1][0], d2[1][1], d2[1][1]))
                    else:
                        dest[slot] = (d2[0], d2[1], csel)
            if fills:
                _scatter(_as_blocks(fills, len(out_lay[0])), itemsize, fill)
            # per inner chunk id, as arrays: destination pointer/strides and the selection inside it
            n_in = len(inner_specs)
            nd = len(out_lay[0])
            d_ptr = np.zeros(n_in, dtype=np.int64)
            d_st = np.zeros((n_in, nd), dtype=np.int64)
            ids_known = sorted(dest)
            for k in ids_known:
                d_ptr[k] = dest[k][0]
                d_st[k] = dest[k][1][1]
            c_start = np.zeros((n_in, nd), dtype=np.int64)
            c_count = np.zeros((n_in, nd), dtype=np.int64)
            c_step = np.ones((n_in, nd), dtype=np.int64)
            if ids_known and inner_lay is not None:
                cs, cc, cst = _slices([dest[k][2] for k in ids_known], inner_specs[0].shape)
                c_start[ids_known], c_count[ids_known], c_step[ids_known] = cs, cc, cst
                d_count = np.array([dest[k][1][0] for k in ids_known], dtype=np.int64).reshape(-1, nd)
                if not np.array_equal(cc, d_count):
                    raise ValueError("GDSCodecPipeline.read(): inner chunk and output selections differ")

            def process_fast(w: range, st: staging.Staged) -> None:
                try:
                    t0 = time.perf_counter()
                    ids, sub = window_slots(w, st)
                    assert inner_lay is not None
                    ia = np.array(ids, dtype=np.int64)
                    rows = (c_start[ia], c_count[ia], c_step[ia], d_ptr[ia], d_st[ia])
                    specs = [inner_specs[k] for k in ids]
                    _decode_scatter(inner_chain, specs, sub, inner_lay, rows, itemsize, fill, t0)
                finally:
                    st.release()

            _pipelined(windows, read, process_fast)
            _sync()
            return tuple(results)

        decoded: list[NDBuffer | None] = [None] * len(inner_specs)

        def process(w: range, st: staging.Staged) -> None:
            try:
                ids, sub = window_slots(w, st)
                res = _decode_window(inner_chain, [inner_specs[k] for k in ids], sub, device)
                for k, arr in zip(ids, res):
                    decoded[k] = arr
            finally:
                st.release()

        _pipelined(windows, read, process)

        # 4. assemble each shard's selection, scatter into the output
        by_item = {s.item: s for s in shards}
        for i, (_, spec, _, out_sel, _) in enumerate(batch):
            sh = by_item.get(i)
            if sh is None:
                out[out_sel] = fill_value_or_default(spec)
                continue
            inner_spec = codec._get_chunk_spec(spec)
            tmp = spec.prototype.nd_buffer.empty(
                shape=sh.indexer.shape, dtype=spec.dtype.to_native_dtype(), order=spec.order
            )
            for (_coords, csel, osel), slot in zip(sh.inner, sh.inner_slot):
                arr = None if slot is None else decoded[slot]
                scatter_chunk(
                    None if arr is None else arr[csel],
                    tmp,
                    chunk_spec=inner_spec,
                    out_selection=osel,
                    drop_axes=(),
                )
            if hasattr(sh.indexer, "sel_shape"):
                tmp = tmp.reshape(sh.indexer.sel_shape)
            if drop_axes:
                tmp = tmp.squeeze(axis=drop_axes)
            out[out_sel] = tmp
            results[i] = GetResult(status="present")
        return tuple(results)

    def _read_shards_fast(
        self,
        batch: list[BatchItem],
        out: NDBuffer,
        fetch: Fetcher,
        codec: ShardingCodec,
        indexes: list[Any],
        inner_chain: _Chain,
    ) -> tuple[GetResult, ...] | None:
        """Sharded reads into a device output, planned with numpy: no per-inner-chunk Python objects.

        Returns ``None`` (the caller takes the general path) unless every shard selection is step-1
        slices, every shard has the same shape and the inner chunks decode to views.
        """
        spec0 = batch[0][1]
        shard_shape = tuple(spec0.shape)
        inner_shape = tuple(codec.chunk_shape)
        if any(tuple(item[1].shape) != shard_shape for item in batch):
            return None
        if not _fast_ok(inner_chain, batch, ()):
            return None
        inner_spec = codec._get_chunk_spec(spec0)
        inner_lay = _view_layout(inner_chain, inner_spec)
        if inner_lay is None:
            return None
        s_start, s_count, s_step = _slices([item[2] for item in batch], shard_shape)
        if (s_step != 1).any():
            return None
        out_ptr, out_lay = _out_layout(out)
        nd = len(out_lay[0])
        o_start, _o_count, o_step = _slices([item[3] for item in batch], out_lay[0])
        o_str = np.array(out_lay[1], dtype=np.int64)
        sh_dst = out_ptr + (o_start * o_str).sum(axis=1)
        sh_dst_st = o_str * o_step
        itemsize = spec0.dtype.to_native_dtype().itemsize
        fill = _fill_bytes(spec0)
        c = np.array(inner_shape, dtype=np.int64)
        max_gap = spec0.config.sharding_coalesce_max_gap_bytes
        max_bytes = spec0.config.sharding_coalesce_max_bytes
        results: list[GetResult] = [GetResult(status="missing")] * len(batch)

        fills: list[Blocks] = []
        # present inner chunks, flat over all shards
        p_cstart: list[np.ndarray] = []
        p_ccount: list[np.ndarray] = []
        p_dst: list[np.ndarray] = []
        p_dst_st: list[np.ndarray] = []
        # coalesced reads and, per member inner chunk (in read order), its read and place in it
        read_keys: list[str] = []
        read_bgs: list[Any] = []
        read_a: list[int] = []
        read_b: list[int] = []
        m_read: list[np.ndarray] = []
        m_off: list[np.ndarray] = []
        m_len: list[np.ndarray] = []
        m_id: list[np.ndarray] = []
        n_present = 0
        for i, (bg, _spec, _csel, _osel, _) in enumerate(batch):
            cnt = s_count[i]
            if (cnt == 0).any():
                continue
            st = np.broadcast_to(sh_dst_st[i], (1, nd))
            index = indexes[i]
            if index is None:  # a missing shard: its whole selection is the fill value
                fills.append((np.zeros(1, np.int64), sh_dst[i : i + 1], cnt[None, :], st, st))
                continue
            results[i] = GetResult(status="present")
            # the inner chunks this selection touches, per dimension, then their product (C order)
            axes = []
            for d in range(nd):
                a, b = int(s_start[i, d]), int(s_start[i, d] + cnt[d])
                idx = np.arange(a // c[d], (b - 1) // c[d] + 1, dtype=np.int64)
                lo = np.maximum(a, idx * c[d])
                hi = np.minimum(b, (idx + 1) * c[d])
                axes.append((idx, lo - idx * c[d], hi - lo, lo - a))
            grids = [np.meshgrid(*[ax[k] for ax in axes], indexing="ij") for k in range(4)]
            coords, cstart, ccount, ostart = (np.stack([g.reshape(-1) for g in gk], axis=1) for gk in grids)
            ol = index.offsets_and_lengths[tuple(coords.T)]
            have = ~((ol[:, 0] == np.uint64(2**64 - 1)) & (ol[:, 1] == np.uint64(2**64 - 1)))
            dst = sh_dst[i] + (ostart * sh_dst_st[i]).sum(axis=1)
            dst_st = np.broadcast_to(sh_dst_st[i], ccount.shape)
            if not have.all():
                gone = ~have
                fills.append(
                    (np.zeros(int(gone.sum()), np.int64), dst[gone], ccount[gone], dst_st[gone], dst_st[gone])
                )
            if not have.any():
                continue
            starts = ol[have, 0].astype(np.int64)
            lens = ol[have, 1].astype(np.int64)
            ids = np.arange(n_present, n_present + len(starts), dtype=np.int64)
            n_present += len(starts)
            p_cstart.append(cstart[have])
            p_ccount.append(ccount[have])
            p_dst.append(dst[have])
            p_dst_st.append(dst_st[have])
            # coalesce in file order (a short loop over ints, no objects per inner chunk)
            order = np.argsort(starts, kind="stable")
            so, sl = starts[order].tolist(), lens[order].tolist()
            r_of = np.empty(len(so), dtype=np.int64)
            r_off = np.empty(len(so), dtype=np.int64)
            ga, gb = so[0], so[0] + sl[0]
            r = len(read_a)
            for k, (a, n) in enumerate(zip(so, sl)):
                if k and (a - gb > max_gap or max(a + n, gb) - ga > max_bytes):
                    read_keys.append(bg.path)
                    read_bgs.append(bg)
                    read_a.append(ga)
                    read_b.append(gb)
                    r += 1
                    ga, gb = a, a + n
                else:
                    gb = max(gb, a + n)
                r_of[k] = r
                r_off[k] = a - ga
            read_keys.append(bg.path)
            read_bgs.append(bg)
            read_a.append(ga)
            read_b.append(gb)
            m_read.append(r_of)
            m_off.append(r_off)
            m_len.append(lens[order])
            m_id.append(ids[order])
        if fills:
            _scatter(tuple(np.concatenate(parts) for parts in zip(*fills)), itemsize, fill)  # type: ignore[arg-type]
        if not n_present:
            _sync()
            return tuple(results)
        cstart_all = np.concatenate(p_cstart)
        ccount_all = np.concatenate(p_ccount)
        step_all = np.ones_like(cstart_all)
        dst_all = np.concatenate(p_dst)
        dst_st_all = np.concatenate(p_dst_st)
        mr, mo, ml, mi = (np.concatenate(x) for x in (m_read, m_off, m_len, m_id))
        ra, rb = np.array(read_a, dtype=np.int64), np.array(read_b, dtype=np.int64)
        # members are grouped by read already (reads were numbered in the order members were made)
        bounds = np.searchsorted(mr, np.arange(len(ra) + 1))
        windows = _windows((rb - ra).tolist(), _window_bytes(inner_chain, True))
        exact = getattr(fetch, "exact", None)
        on_gpu = _out_device(out) if DEVICE_STAGING and inner_chain.device_staged() else None

        def read(w: range) -> staging.Staged:
            if exact is not None:
                return exact(  # type: ignore[no-any-return]
                    read_keys[w.start : w.stop], ra[w.start : w.stop], rb[w.start : w.stop], True, on_gpu
                )
            return fetch([(read_bgs[r], ByteRange("range", read_a[r], read_b[r])) for r in w], True)

        def process(w: range, st: staging.Staged) -> None:
            try:
                t0 = time.perf_counter()
                lo, hi = int(bounds[w.start]), int(bounds[w.stop])
                local = mr[lo:hi] - w.start
                base_sizes = st.sizes[local]
                sub = st.sub(st.offsets[local] + mo[lo:hi], np.where(base_sizes < 0, -1, ml[lo:hi]))
                ids = mi[lo:hi]
                rows = (cstart_all[ids], ccount_all[ids], step_all[ids], dst_all[ids], dst_st_all[ids])
                _decode_scatter(inner_chain, [inner_spec] * len(ids), sub, inner_lay, rows, itemsize, fill, t0)
            finally:
                st.release()

        _pipelined(windows, read, process)
        _sync()
        return tuple(results)

    @staticmethod
    def _shards_fast_ok(
        batch: list[BatchItem],
        shards: list[Any],
        chain: _Chain,
        inner_specs: list[ArraySpec],
        drop_axes: tuple[int, ...],
    ) -> bool:
        if drop_axes or not _fast_ok(chain, batch, ()):
            return False
        if inner_specs and _view_layout(chain, inner_specs[0]) is None:
            return False
        for sh in shards:
            for _coords, csel, osel in sh.inner:
                if not isinstance(csel, tuple) or not isinstance(osel, tuple):
                    return False
                if not all(isinstance(x, slice) for x in (*csel, *osel)):
                    return False
        return True
