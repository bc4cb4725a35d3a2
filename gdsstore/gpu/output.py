"""Placing decoded chunks in a read's output.

Device outputs whose chunks decode to views (``bytes``/``transpose``) and whose selections are slices
are assembled by one scatter kernel launch per window, or by a few 2-D copies where the blocks are few
(:func:`scatter`); host outputs by numpy slicing, uncompressed chunks as views of their staged bytes
(:func:`place_views`, :func:`place_decoded`); every other output by zarr's ``scatter_chunk``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import GetResult
from zarr.core.chunk_utils import fill_value_or_default

import gdsstore.trace as _trace
from gdsstore.engine.landing import Landed
from gdsstore.gpu import codecs as _codecs
from gdsstore.gpu import decode as _decode
from gdsstore.gpu.decode import CodecChain, device_pointer, raw_nbytes
from gdsstore.gpu.plan import chunk_blocks, copies_2d, is_slice_selection, plan_chunk_geometry

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import NDBuffer

    from gdsstore.gpu.pipeline import BatchItem
    from gdsstore.gpu.plan import Blocks, ChunkGeometry, Layout

__all__ = [
    "decode_scatter", "fill_bytes", "host_geometry", "kernel_scatter_ok", "numpy_output", "output_device",
    "output_layout", "place_decoded", "place_host", "place_views", "place_window", "scatter", "sync",
]


def output_layout(out: NDBuffer) -> tuple[int, Layout]:
    """The output's first byte and its strided layout."""
    a: Any = out.as_ndarray_like()
    return device_pointer(a), (tuple(a.shape), tuple(a.strides))


def output_device(out: NDBuffer) -> int | None:
    """The GPU ordinal of a device output (``None`` for host memory)."""
    a: Any = out.as_ndarray_like()
    dev = getattr(a, "device", None)
    return int(dev.id) if hasattr(a, "__cuda_array_interface__") and dev is not None else None


def sync() -> None:
    _codecs._cupy().cuda.get_current_stream().synchronize()


def scatter(blocks: Blocks, itemsize: int, fill: bytes) -> str:
    """Copy the blocks on the current stream; returns the route: ``"gpu-copy"`` (few blocks, each a
    ``cudaMemcpy2DAsync``: no kernel to compile or load, :func:`~gdsstore.gpu.plan.copies_2d`) or
    ``"gpu-kernel"`` (one scatter launch)."""
    from gdsstore.gpu.kernels import scatter_arrays

    copies = copies_2d(blocks, itemsize)
    if copies is not None and _copy_2d(copies):
        return "gpu-copy"
    scatter_arrays(*blocks, itemsize=itemsize, fill=fill)
    return "gpu-kernel"


def _copy_2d(copies: np.ndarray) -> bool:
    """Issue the 2-D copies; ``False`` when the runtime refused one (the kernel then copies every block
    again: the same bytes to the same places)."""
    cp = _codecs._cupy()
    rt = cp.cuda.runtime
    stream = cp.cuda.get_current_stream().ptr
    try:
        for dst, dpitch, src, spitch, width, height in copies.tolist():
            rt.memcpy2DAsync(dst, dpitch, src, spitch, width, height, rt.memcpyDeviceToDevice, stream)
    except Exception:
        return False
    return True


def fill_bytes(spec: ArraySpec) -> bytes:
    """The fill value of ``spec`` as the bytes of one element."""
    return np.asarray(fill_value_or_default(spec), dtype=spec.dtype.to_native_dtype()).tobytes()


def kernel_scatter_ok(batch: Sequence[BatchItem], drop_axes: tuple[int, ...]) -> bool:
    """Whether a batch's selections fit the scatter kernel: slices only, no dropped axis, <= 8 axes."""
    if drop_axes or not batch:
        return False
    return _all_slices(list(itertools.chain.from_iterable(map(itemgetter(2, 3), batch)))) and len(batch[0][1].shape) <= 8


def _all_slices(sels: list[Any]) -> bool:
    """Whether every selection of ``sels`` is a tuple of slices (:func:`~gdsstore.gpu.plan.is_slice_selection`):
    the types of all of them at once, where they are plain tuples (``map`` and ``set`` iterate in C)."""
    if set(map(type, sels)) <= {tuple}:
        return set(map(type, itertools.chain.from_iterable(sels))) <= {slice}
    return all(is_slice_selection(sel) for sel in sels)


def decode_scatter(
    chain: CodecChain,
    specs: list[ArraySpec],
    staged: Landed,
    layout: Layout,
    geometry: ChunkGeometry,
    out_ptr: int,
    names: Sequence[str] | None = None,
) -> np.ndarray:
    """One window of a kernel-scattered read: decode its chunks on the device, then copy every
    chunk's block into the output in one launch (waited for: the window's buffers are freed next;
    traced, from the decode's end: the copy to the device and the decode have rows of their own).
    Returns the decoded chunks' device pointers, 0 for a missing chunk (presence only)."""
    raw = _decode.decode_on_device(chain, specs, staged, names)
    t0 = time.perf_counter()
    ptrs = raw.ptrs()
    itemsize = specs[0].dtype.to_native_dtype().itemsize
    route = scatter(chunk_blocks(ptrs, layout, geometry, out_ptr), itemsize, fill_bytes(specs[0]))
    sync()
    nbytes = sum(raw_nbytes(sp) for sp in specs)
    why = "one launch per window and kind of block" if route == "gpu-kernel" else "few blocks: 2-D copies, no kernel"
    _trace.record("scatter", route, why, nbytes, time.perf_counter() - t0)
    return ptrs


def numpy_output(out: NDBuffer) -> np.ndarray | None:
    """The output as a numpy array, or ``None`` where it is another kind of array."""
    a = out.as_ndarray_like()
    return a if isinstance(a, np.ndarray) else None


def place_views(
    batch: list[BatchItem], w: range, staged: Landed, layout: Layout, out: np.ndarray,
    results: list[GetResult],
) -> None:
    """Uncompressed chunks of a host window into ``out``: each a strided view of its staged bytes
    (``layout``: the bytes codec in native order, then transposes), missing ones the fill value.

    Raises:
        ValueError: a stored chunk of another size than its codecs produce, naming its key.
    """
    shape, strides = layout
    dt = batch[w.start][1].dtype.to_native_dtype()
    want = int(np.prod(shape)) * dt.itemsize
    for k, i in enumerate(w):
        getter, spec, chunk_sel, out_sel, _ = batch[i]
        raw = staged.view(k)
        if raw is None:
            out[out_sel] = fill_value_or_default(spec)
            continue
        if raw.nbytes != want:
            raise ValueError(
                f"GDSCodecPipeline.read(): chunk {getattr(getter, 'path', i)!r} is {raw.nbytes} bytes, not the "
                f"{want} bytes its codecs produce"
            )
        # np.ndarray over the bytes: ~1 us, where np.lib.stride_tricks.as_strided took ~18 (its checks)
        chunk = np.ndarray(shape, dtype=dt, buffer=raw, strides=strides)
        out[out_sel] = chunk[chunk_sel]
        results[i] = GetResult(status="present")


def host_geometry(batch: Sequence[BatchItem], out: np.ndarray) -> ChunkGeometry | None:
    """Where each chunk's selection lands in a host output (:func:`~gdsstore.gpu.plan.plan_chunk_geometry`),
    or ``None`` where :func:`place_window` cannot write into ``out`` (not one contiguous block of memory)."""
    if not (out.flags.c_contiguous or out.flags.f_contiguous) or not out.flags.writeable:
        return None
    shape = batch[0][1].shape  # a regular grid's chunks have one shape; edge chunks differ in selection
    return plan_chunk_geometry([item[2] for item in batch], [shape] * len(batch), [item[3] for item in batch],
                               (out.shape, out.strides))


def place_host(
    chain: CodecChain, batch: list[BatchItem], w: range, staged: Landed, layout: Layout,
    geometry: ChunkGeometry | None, out: np.ndarray, results: list[GetResult],
) -> None:
    """A host window of chunks whose decoded bytes view as ``layout`` into ``out``: the bytes-to-bytes codecs
    (if any) decoded on the engine's threads straight into one buffer (no zarr buffer per chunk), then placed
    by :func:`place_window` (``geometry``: the window's rows of :func:`host_geometry`), or chunk by chunk
    (:func:`place_views`) where there is no geometry.

    Raises:
        ValueError: a stored chunk of another size than its codecs produce, naming its key.
    """
    raw = staged
    if chain.bb_codecs:
        t0 = time.perf_counter()
        specs = [batch[i][1] for i in w]
        names = [batch[i][0].path for i in w]  # errors name the chunk
        raw = _decode.decode_bb_on_host(chain, specs, staged, staged.present.tolist(), names, pinned=False)
        if any(f is not None for f in chain.bb_formats):
            _trace.record("decode", "cpu-codec", "host buffer", raw.nbytes, time.perf_counter() - t0)
    try:
        if geometry is not None and raw.buffer_of is None:
            place_window(batch, w, raw, layout, geometry, out, results)
        else:
            place_views(batch, w, raw, layout, out, results)
    finally:
        if raw is not staged:
            raw.release()


def place_window(
    batch: list[BatchItem], w: range, staged: Landed, layout: Layout, geometry: ChunkGeometry, out: np.ndarray,
    results: list[GetResult],
) -> None:
    """The chunks of a host window into ``out`` as :func:`place_views` places them, in a few copies: each run of
    consecutive chunks whose blocks are alike and evenly spaced, in the staging and in the output (a row of a
    regular grid's chunks), is one numpy copy of one more axis. ``geometry``: the window's rows of
    :func:`host_geometry`.

    Raises:
        ValueError: a stored chunk of another size than its codecs produce, naming its key.
    """
    shape, strides = layout
    dt = batch[w.start][1].dtype.to_native_dtype()
    want = int(np.prod(shape)) * dt.itemsize
    sizes = staged.sizes
    here = sizes >= 0
    bad = np.flatnonzero(here & (sizes != want))
    if len(bad):
        k = int(bad[0])
        getter = batch[w[k]][0]
        raise ValueError(
            f"GDSCodecPipeline.read(): chunk {getattr(getter, 'path', w[k])!r} is {int(sizes[k])} bytes, not the "
            f"{want} bytes its codecs produce"
        )
    for k in np.flatnonzero(~here).tolist():
        out[batch[w[k]][3]] = fill_value_or_default(batch[w[k]][1])
    s_str = np.array(strides, dtype=np.int64)
    src = staged.offsets + (geometry.start * s_str).sum(axis=1)
    src_st = s_str * geometry.step
    dst_mem = out.reshape(-1, order="A").view(np.uint8)  # contiguous (host_geometry): a view, in memory order
    if not np.may_share_memory(dst_mem, out):  # a copy would take the bytes and drop them
        raise RuntimeError("GDSCodecPipeline.read(): the output is not one block of memory (a bug: please report it)")
    src_mem = staged.host
    for a, b in _runs(here, src, geometry.dst, geometry.count, src_st, geometry.dst_strides):
        count = tuple(geometry.count[a].tolist())
        n = b - a
        ds, ss = (int(geometry.dst[a + 1] - geometry.dst[a]), int(src[a + 1] - src[a])) if n > 1 else (0, 0)
        to = np.ndarray((n, *count), dt, dst_mem, int(geometry.dst[a]), (ds, *geometry.dst_strides[a].tolist()))
        to[...] = np.ndarray((n, *count), dt, src_mem, int(src[a]), (ss, *src_st[a].tolist()))
    present = GetResult(status="present")
    for k in np.flatnonzero(here).tolist():
        results[w[k]] = present


def _runs(
    here: np.ndarray, src: np.ndarray, dst: np.ndarray, count: np.ndarray, src_st: np.ndarray, dst_st: np.ndarray
) -> list[tuple[int, int]]:
    """``[start, stop)`` of each run of present rows (``here``) alike in ``count`` and both strides, whose ``src``
    and ``dst`` offsets each step by one amount. A row starts a run unless it and the row before it are alike
    and both steps repeat the steps into the row before: past a run's second row, each step equals the one
    before (a run's first step is checked against the step into its first row too: a few more runs, never a
    wrong one).

    Examples:
        >>> one = np.ones((5, 1), np.int64)
        >>> _runs(np.array([1, 1, 1, 0, 1], bool), np.array([0, 8, 16, 0, 40]), np.arange(5) * 4, one, one, one)
        [(0, 3), (4, 5)]
    """
    n = len(here)
    if n == 0:
        return []
    alike = np.zeros(n, dtype=bool)  # row i joins row i - 1's block shape
    alike[1:] = (here[1:] & here[:-1] & (count[1:] == count[:-1]).all(axis=1)
                 & (src_st[1:] == src_st[:-1]).all(axis=1) & (dst_st[1:] == dst_st[:-1]).all(axis=1))
    same_step = np.ones(n, dtype=bool)  # the step into row i repeats the step into row i - 1
    same_step[2:] = (np.diff(src)[1:] == np.diff(src)[:-1]) & (np.diff(dst)[1:] == np.diff(dst)[:-1])
    starts = np.flatnonzero(here & ~(alike & same_step))
    absent = np.append(np.flatnonzero(~here), n)
    # a run ends where the next starts, or at the first absent row after it
    stops = np.minimum(np.append(starts[1:], n), absent[np.searchsorted(absent, starts)])
    return list(zip(starts.tolist(), stops.tolist()))


def place_decoded(
    batch: list[BatchItem], w: range, decoded: list[NDBuffer | None], out: np.ndarray, results: list[GetResult]
) -> None:
    """Decoded chunks of a host window into ``out`` with numpy slicing, missing ones the fill value."""
    for k, i in enumerate(w):
        _, spec, chunk_sel, out_sel, _ = batch[i]
        arr = decoded[k]
        if arr is None:
            out[out_sel] = fill_value_or_default(spec)
            continue
        out[out_sel] = np.asarray(arr.as_ndarray_like())[chunk_sel]
        results[i] = GetResult(status="present")
