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
from gdsstore.engine.backend import Backend, ByteRange
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

#: Decoded bytes per window: bounds pinned and device staging, and sets the read/decode overlap.
WINDOW_BYTES = 256 << 20
#: Device outputs of view-only chunks (``bytes``/``transpose``) with slice selections are assembled by
#: one scatter kernel per window instead of one cupy copy per chunk.
FAST_SCATTER = True

BatchItem = tuple[Any, "ArraySpec", "SelectorTuple", "SelectorTuple", bool]
Fetcher = Callable[[list[tuple[Any, ByteRange | None]], bool], staging.Staged]


# -- fetchers: how a list of (byte getter, range) becomes one staging buffer ---------------------------


def _backend_of(byte_getter: Any) -> Backend | None:
    backend = getattr(getattr(byte_getter, "store", None), "backend", None)
    return backend if isinstance(backend, Backend) else None


def _engine_fetcher(backend: Backend) -> Fetcher:
    def fetch(items: list[tuple[Any, ByteRange | None]], pinned: bool) -> staging.Staged:
        return staging.stage_from_backend(
            backend, [staging.Fetch(bg.path, br) for bg, br in items], pinned=pinned
        )

    return fetch


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


def _raw_nbytes(spec: ArraySpec) -> int:
    n = int(np.prod(spec.shape, dtype=np.int64))
    return n * int(spec.dtype.to_native_dtype().itemsize)


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


def _decode_window(
    chain: _Chain, specs: list[ArraySpec], staged: staging.Staged, device: bool
) -> list[NDBuffer | None]:
    """Decode every chunk of a staged window (``None`` for missing ones)."""
    t0 = time.perf_counter()
    n = len(specs)
    out: list[NDBuffer | None] = [None] * n
    present = [i for i in range(n) if staged.slots[i] is not None]
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
    raws, _keep = _decode_raw_device(chain, specs, staged)
    for i, raw in enumerate(raws):
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


def _ptr(a: Any) -> int:
    """Address of a device (or, in tests, host) array's first byte."""
    return int(a.data.ptr) if hasattr(a, "__cuda_array_interface__") else int(a.ctypes.data)


def _sync() -> None:
    _codecs._cupy().cuda.get_current_stream().synchronize()


def _scatter(blocks: list[Any], itemsize: int, fill: bytes) -> None:
    from gdsstore.gpu.kernels import scatter_blocks

    scatter_blocks(blocks, itemsize, fill)


def _scatter_window(blocks: list[Any], itemsize: int, fill: bytes, nbytes: int, t0: float) -> None:
    """One scatter launch for a window, waited for (the window's buffers are freed next), traced."""
    _scatter(blocks, itemsize, fill)
    _sync()
    _trace.record("scatter", "gpu-kernel", "one launch per window", nbytes, time.perf_counter() - t0)


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


def _decode_raw_device(
    chain: _Chain, specs: list[ArraySpec], staged: staging.Staged
) -> tuple[list[Any], list[Any]]:
    """Decode a window's bytes-to-bytes stage on the device: per chunk, its raw (bytes-codec) bytes
    as a device ``uint8`` array, or ``None`` when missing; plus the buffers that back them."""
    cp = _codecs._cupy()
    t0 = time.perf_counter()
    n = len(specs)
    present = [i for i in range(n) if staged.slots[i] is not None]
    ptrs: list[Any] = [None] * n
    keep: list[Any] = []
    fmt, crc, reason = chain.gpu_plan()
    cpu_rest: list[int] = list(present) if fmt == "-" else []
    if fmt != "-" and present:
        dev = staging.to_device(staged)
        keep.append(dev)
        _trace.record(
            "h2d",
            "pinned-copy" if staged.pinned is not None else "pageable-copy",
            "one copy per window",
            staged.nbytes,
            time.perf_counter() - t0,
        )
        t0 = time.perf_counter()
        slots: dict[int, tuple[int, int]] = {i: staged.slots[i] for i in present}  # type: ignore[misc]
        if crc:
            from gdsstore.gpu.kernels import crc32c_device

            for i in present:
                if slots[i][1] < 4:
                    raise ValueError(
                        f"GDSCodecPipeline.read(): chunk {i} of {slots[i][1]} bytes holds no crc32c"
                    )
            computed = crc32c_device([dev[slots[i][0] : slots[i][0] + slots[i][1] - 4] for i in present])
            for k, i in enumerate(present):
                a, m = slots[i]
                stored = int(np.frombuffer(staged.host[a + m - 4 : a + m].tobytes(), "<u4")[0])
                if stored != int(computed[k]):
                    raise ValueError(
                        f"GDSCodecPipeline.read(): crc32c mismatch in chunk {i}: stored {stored:#010x}, "
                        f"computed {int(computed[k]):#010x}"
                    )
                slots[i] = (a, m - 4)
        if fmt is None:
            for i in present:
                a, m = slots[i]
                ptrs[i] = dev[a : a + m]
        else:
            ids: list[int] = []
            src_off: list[int] = []
            src_len: list[int] = []
            out_off: list[int] = []
            out_len: list[int] = []
            pos = 0
            for i in present:
                a, m = slots[i]
                want = _raw_nbytes(specs[i])
                try:
                    fr = nvcomp.frame_of(fmt, staged.host[a : a + min(m, 512)], m)
                    if fmt == "gzip" and nvcomp.gzip_isize(staged.host[a + m - 4 : a + m]) != want % (
                        1 << 32
                    ):
                        raise ValueError("gzip size mismatch (multi-member?)")
                    if fmt == "lz4" and fr.size != want:
                        raise ValueError("lz4 size mismatch")
                except ValueError:
                    cpu_rest.append(i)
                    continue
                ids.append(i)
                src_off.append(a + fr.start)
                src_len.append(fr.stop - fr.start)
                out_off.append(pos)
                out_len.append(want)
                pos += (want + 255) // 256 * 256
            if ids:
                outbuf = cp.empty(max(pos, 1), dtype=cp.uint8)
                keep.append(outbuf)
                try:
                    nvcomp.decode_batch_into(fmt, dev, src_off, src_len, outbuf, out_off, out_len)
                    for i, off, m in zip(ids, out_off, out_len):
                        ptrs[i] = outbuf[off : off + m]
                except Exception as exc:
                    # A payload nvCOMP refuses or decodes to another size: the CPU codec decides
                    # (it raises on corrupt data); the trace names the cause.
                    cpu_rest.extend(ids)
                    reason = f"nvCOMP failed ({type(exc).__name__}: {str(exc)[:120]})"
        done = [i for i in present if ptrs[i] is not None]
        if fmt is not None or crc:
            _trace.record(
                "decode",
                "gpu-decode",
                reason if fmt else "crc32c GPU kernel",
                sum(_raw_nbytes(specs[i]) for i in done),
                time.perf_counter() - t0,
            )
    if cpu_rest:
        t0 = time.perf_counter()
        nbytes = 0
        for i, raw in _bb_decode_on_host(chain, specs, staged, cpu_rest):
            arr = cp.asarray(raw)
            keep.append(arr)
            ptrs[i] = arr
            nbytes += int(arr.nbytes)
        _trace.record(
            "decode",
            "cpu-codec",
            reason if fmt == "-" or reason.startswith("nvCOMP failed") else "framing nvCOMP cannot take",
            nbytes,
            time.perf_counter() - t0,
        )
    return ptrs, keep


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


def _coalesce(
    ranges: list[tuple[int, int]], max_gap: int, max_bytes: int
) -> list[tuple[int, int, list[int]]]:
    """Group ``(start, end)`` ranges (indices kept) into reads: ``(start, end, members)``."""
    order = sorted(range(len(ranges)), key=lambda k: ranges[k][0])
    groups: list[tuple[int, int, list[int]]] = []
    for k in order:
        a, b = ranges[k]
        if groups:
            ga, gb, members = groups[-1]
            if a - gb <= max_gap and max(b, gb) - ga <= max_bytes:
                groups[-1] = (ga, max(gb, b), [*members, k])
                continue
        groups.append((a, b, [k]))
    return groups


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
        await self.delegate.write(batch_info, value, drop_axes)

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
        windows = _windows([_raw_nbytes(item[1]) for item in batch], WINDOW_BYTES)
        if fast:
            out_ptr, out_lay = _out_layout(out)
            spec0 = batch[0][1]
            itemsize = spec0.dtype.to_native_dtype().itemsize
            fill = _fill_bytes(spec0)
            layouts: dict[tuple[int, ...], Layout | None] = {}

        def read(w: range) -> staging.Staged:
            return fetch([(batch[i][0], None) for i in w], device)

        def process(w: range, staged: staging.Staged) -> None:
            try:
                specs = [batch[i][1] for i in w]
                if fast:
                    t0 = time.perf_counter()
                    ptrs, keep = _decode_raw_device(chain, specs, staged)
                    blocks = []
                    for k, i in enumerate(w):
                        _, spec, csel, osel, _ = batch[i]
                        dst = _select(out_ptr, out_lay, osel)
                        assert dst is not None
                        p = None if ptrs[k] is None else _ptr(ptrs[k])
                        if p is None:
                            blocks.append((0, dst[0], dst[1][0], dst[1][1], dst[1][1]))
                            continue
                        lay = layouts.get(spec.shape)
                        if lay is None:
                            lay = layouts[spec.shape] = _view_layout(chain, spec)
                        assert lay is not None
                        src = _select(p, lay, csel)
                        assert src is not None and src[1][0] == dst[1][0], (src, dst)
                        blocks.append((src[0], dst[0], dst[1][0], src[1][1], dst[1][1]))
                        results[i] = GetResult(status="present")
                    _scatter_window(blocks, itemsize, fill, sum(_raw_nbytes(sp) for sp in specs), t0)
                    del keep
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
            for a, b, members in _coalesce(ranges, max_gap, max_bytes):
                reads.append((bg, ByteRange("range", a, b)))
                read_members.append(
                    [(ids[k], ranges[k][0] - a, ranges[k][1] - ranges[k][0]) for k in members]
                )
            shards.append(_Shard(i, indexer, inner, slots))

        # 3. read (windowed by the coalesced reads), decode all inner chunks of a window as one batch
        inner_chain = _Chain.of(codec._get_inner_chunk_transform(shard_spec0).codecs)
        read_sizes = [sum(m[2] for m in members) for members in read_members]
        windows = _windows(read_sizes, WINDOW_BYTES)
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
            for r_local, r in enumerate(w):
                base = st.slots[r_local]
                for inner_id, off, length in read_members[r]:
                    ids.append(inner_id)
                    slots2.append(None if base is None else (base[0] + off, length))
            return ids, staging.Staged(st.host, slots2, st.pinned)

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
            _scatter(fills, itemsize, fill)

            def process_fast(w: range, st: staging.Staged) -> None:
                try:
                    t0 = time.perf_counter()
                    ids, sub = window_slots(w, st)
                    ptrs, keep = _decode_raw_device(inner_chain, [inner_specs[k] for k in ids], sub)
                    blocks = []
                    for k, raw in zip(ids, ptrs):
                        p = None if raw is None else _ptr(raw)
                        dptr, dlay, csel = dest[k]
                        if p is None:
                            blocks.append((0, dptr, dlay[0], dlay[1], dlay[1]))
                            continue
                        assert inner_lay is not None
                        src = _select(p, inner_lay, csel)
                        assert src is not None and src[1][0] == dlay[0], (src, dlay)
                        blocks.append((src[0], dptr, dlay[0], src[1][1], dlay[1]))
                    _scatter_window(blocks, itemsize, fill, sum(_raw_nbytes(inner_specs[k]) for k in ids), t0)
                    del keep
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
