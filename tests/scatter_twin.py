"""The scatter kernels run on host memory: the tables :func:`gdsstore.gpu.kernels.scatter_meta` builds,
interpreted as ``scatter_runs`` and ``scatter_blocks`` interpret them (item by item for runs: a warp's
segment, its outer-axis arithmetic and its bytes; numpy's strided assignment for elements), over host
addresses. CI has no GPU: this checks the tables and the runs' arithmetic; the GPU tests check the kernels.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from gdsstore.gpu.kernels import MAX_DIMS, SEG, fill_pattern, scatter_meta

_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def strided_view(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], dt: Any) -> np.ndarray:
    """A numpy view of host memory at ``ptr`` (strides in bytes)."""
    size = np.dtype(dt).itemsize
    span = sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) + size
    base = np.frombuffer((ctypes.c_char * span).from_address(ptr), dtype=np.uint8).view(dt)
    return np.lib.stride_tricks.as_strided(base, shape, strides)


def scatter_on_host(blocks: tuple[np.ndarray, ...], itemsize: int, fill: bytes) -> tuple[int, int]:
    """``scatter_arrays(*blocks, itemsize=itemsize, fill=fill)`` on host addresses; returns how many blocks
    went to each kernel (runs, elements)."""
    src, dst, shape, src_strides, dst_strides = blocks
    ndim = shape.shape[1]
    runs, elements = scatter_meta(src, dst, shape, src_strides, dst_strides, itemsize)
    pattern = fill_pattern(fill, itemsize)
    for row in runs.tolist():
        s, d, rows, run = row[:4]
        ext, s_st, d_st = (row[4 + k * MAX_DIMS : 4 + k * MAX_DIMS + ndim] for k in range(3))
        nseg = -(-run // SEG)
        for w in range(rows * nseg):  # a warp's item: one segment of one run
            r, lo = w // nseg, (w % nseg) * SEG
            so = do = 0
            for a in range(ndim - 1, -1, -1):
                if r == 0:
                    break
                if ext[a] == 1:
                    continue
                i, r = r % ext[a], r // ext[a]
                so, do = so + i * s_st[a], do + i * d_st[a]
            n = min(SEG, run - lo)
            if s:
                ctypes.memmove(d + do + lo, s + so + lo, n)
            else:
                ctypes.memmove(d + do + lo, (pattern * (n // 8 + 1))[:n], n)
    dt = _DTYPES[itemsize]
    for row in elements.tolist():
        s, d = row[:2]
        ext, s_st, d_st = (tuple(row[3 + k * MAX_DIMS : 3 + k * MAX_DIMS + ndim]) for k in range(3))
        if 0 in ext:
            continue
        out = strided_view(d, ext, d_st, dt)
        out[...] = np.frombuffer(pattern[:itemsize], dt)[0] if s == 0 else strided_view(s, ext, s_st, dt)
    return len(runs), len(elements)
