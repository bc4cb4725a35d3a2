"""Placing decoded chunks in a read's output.

Device outputs whose chunks decode to views (``bytes``/``transpose``) and whose selections are slices
are assembled by one scatter kernel launch per window, or by a few 2-D copies where the blocks are few
(:func:`scatter`); host outputs by numpy slicing, uncompressed chunks as views of their staged bytes
(:func:`place_views`, :func:`place_decoded`); every other output by zarr's ``scatter_chunk``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import GetResult
from zarr.core.chunk_utils import fill_value_or_default

import gdsstore.trace as _trace
from gdsstore.engine.landing import Landed
from gdsstore.gpu import codecs as _codecs
from gdsstore.gpu import decode as _decode
from gdsstore.gpu import plan as _plan
from gdsstore.gpu.decode import CodecChain, device_pointer, raw_nbytes
from gdsstore.gpu.plan import Blocks, ChunkGeometry, Layout, chunk_blocks, is_slice_selection

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import NDBuffer

    from gdsstore.gpu.pipeline import BatchItem

__all__ = [
    "decode_scatter", "fill_bytes", "kernel_scatter_ok", "numpy_output", "output_device", "output_layout",
    "place_decoded", "place_views", "scatter", "sync",
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

    copies = _plan.copies_2d(blocks, itemsize)
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
    for _, _, chunk_sel, out_sel, _ in batch:
        if not is_slice_selection(chunk_sel) or not is_slice_selection(out_sel):
            return False
    return len(batch[0][1].shape) <= 8


def decode_scatter(
    chain: CodecChain,
    specs: list[ArraySpec],
    staged: Landed,
    layout: Layout,
    geometry: ChunkGeometry,
    out_ptr: int,
    t0: float,
    names: Sequence[str] | None = None,
) -> np.ndarray:
    """One window of a kernel-scattered read: decode its chunks on the device, then copy every
    chunk's block into the output in one launch (waited for: the window's buffers are freed next;
    traced). Returns the decoded chunks' device pointers, 0 for a missing chunk (presence only)."""
    raw = _decode.decode_on_device(chain, specs, staged, names)
    ptrs = raw.ptrs()
    itemsize = specs[0].dtype.to_native_dtype().itemsize
    route = scatter(chunk_blocks(ptrs, layout, geometry, out_ptr), itemsize, fill_bytes(specs[0]))
    sync()
    nbytes = sum(raw_nbytes(sp) for sp in specs)
    why = "one launch per window" if route == "gpu-kernel" else "few blocks: 2-D copies, no kernel"
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
