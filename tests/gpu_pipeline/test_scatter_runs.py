"""The scatter's two kernels on the CPU (tests/scatter_twin.py runs their tables on host memory): random
blocks of every kind the pipeline builds (chunks into wider outputs, transposed and stepped sources, fill
blocks, axes of extent 1 or 0, runs longer than a warp's segment) land as numpy's assignment does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scatter_twin import scatter_on_host

from gdsstore.gpu.kernels import MIN_RUN, SEG, contiguous_runs, scatter_arrays

_DT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@st.composite
def _block(draw: Any, ndim: int) -> dict[str, Any]:
    last = st.sampled_from([0, 1, 3, 40, 300, 1100])  # 1100 x 8 bytes: runs of two segments and more
    return {
        "shape": tuple(draw(last if a == ndim - 1 else st.sampled_from([0, 1, 2, 5])) for a in range(ndim)),
        "step": tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(ndim)),  # the source's selection
        "order": draw(st.permutations(range(ndim))),  # the source's memory order (a transposed chunk)
        "pad": tuple(draw(st.sampled_from([0, 3])) for _ in range(ndim)),  # the output wider than the block
        "dstep": draw(st.sampled_from([1, 1, 2])),  # a stepped output along the last axis
        "fill": draw(st.booleans()),  # no source: the fill value
    }


def _case(spec: dict[str, Any], dt: Any, rng: np.random.Generator, xp: Any) -> tuple[Any, Any, Any]:
    """The block's source view, the output it lands in (``xp``: numpy or CuPy), and the output's index of
    the block."""
    shape, order = spec["shape"], spec["order"]
    full = [max(1, n) * s for n, s in zip(shape, spec["step"], strict=True)]
    stored = xp.asarray(rng.integers(0, np.iinfo(dt).max, [full[a] for a in order], dtype=dt, endpoint=True))
    src = xp.transpose(stored, np.argsort(order).tolist())[
        tuple(slice(0, n * s, s) for n, s in zip(shape, spec["step"], strict=True))]
    dstep = [1] * (len(shape) - 1) + [spec["dstep"]]
    out = xp.full([n * d + p for n, d, p in zip(shape, dstep, spec["pad"], strict=True)], 7, dtype=dt)
    return src, out, tuple(slice(p, p + n * d, d) for n, d, p in zip(shape, dstep, spec["pad"], strict=True))


def _scatter_cases(data: Any, ndim: int, itemsize: int, xp: Any, scatter: Any) -> None:
    """Random blocks into outputs of ``xp``, scattered by ``scatter(blocks, itemsize, fill)``, against numpy's
    assignment of the same blocks."""
    dt, rng = _DT[itemsize], np.random.default_rng(0)
    specs = data.draw(st.lists(_block(ndim), min_size=1, max_size=4))
    fill = bytes(range(1, itemsize + 1))
    cases = [_case(spec, dt, rng, xp) for spec in specs]
    ptr = (lambda a: a.ctypes.data) if xp is np else (lambda a: a.data.ptr)
    rows = []
    want = []
    for spec, (src, out, idx) in zip(specs, cases, strict=True):
        region = out[idx]
        # a fill block's source strides are its destination's, as chunk_blocks builds them
        rows.append((0 if spec["fill"] else ptr(src), ptr(region), region.shape,
                     region.strides if spec["fill"] else src.strides, region.strides))
        ref = np.array(out.get() if xp is not np else out)
        ref[idx] = np.frombuffer(fill, dt)[0] if spec["fill"] else (src if xp is np else src.get())
        want.append(ref)
    n = len(rows)
    blocks = (np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=np.int64),
              *(np.array([r[k] for r in rows], dtype=np.int64).reshape(n, ndim) for k in (2, 3, 4)))
    scatter(blocks, itemsize, fill)
    for (_, out, _), ref in zip(cases, want, strict=True):
        assert (out if xp is np else out.get()).tobytes() == ref.tobytes()


@settings(max_examples=400, deadline=None)
@given(data=st.data(), ndim=st.integers(1, 4), itemsize=st.sampled_from([1, 2, 4, 8]))
def test_blocks_land_as_numpy_assigns(data: Any, ndim: int, itemsize: int) -> None:
    _scatter_cases(data, ndim, itemsize, np, scatter_on_host)


@pytest.mark.gpu
@settings(max_examples=150, deadline=None)
@given(data=st.data(), ndim=st.integers(1, 4), itemsize=st.sampled_from([1, 2, 4, 8]))
def test_the_kernels_land_blocks_as_numpy_assigns(data: Any, ndim: int, itemsize: int) -> None:
    """The same blocks on the GPU: ``scatter_runs`` and ``scatter_blocks`` themselves (GPU machine)."""
    import cupy as cp

    def scatter(blocks: tuple[np.ndarray, ...], itemsize: int, fill: bytes) -> None:
        scatter_arrays(*blocks, itemsize=itemsize, fill=fill)
        cp.cuda.get_current_stream().synchronize()

    _scatter_cases(data, ndim, itemsize, cp, scatter)


def _chunk_into(out: np.ndarray, chunk: np.ndarray, at: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    region = out[tuple(slice(a, a + n) for a, n in zip(at, chunk.shape, strict=True))]
    return (np.array([chunk.ctypes.data]), np.array([region.ctypes.data]), np.array([chunk.shape]),
            np.array([chunk.strides]), np.array([region.strides]))


def test_a_chunk_goes_to_the_runs_kernel_a_row_a_run() -> None:
    out = np.zeros((1024, 1024), np.float32)
    chunk = np.arange(256 * 256, dtype=np.float32).reshape(256, 256)
    blocks = _chunk_into(out, chunk, (256, 512))
    run, outer = contiguous_runs(blocks[0], blocks[2], blocks[3], blocks[4], 4)
    assert (run.tolist(), outer.tolist()) == ([1024], [[256, 1]])  # 256 rows of 1 KiB
    assert scatter_on_host(blocks, 4, bytes(4)) == (1, 0)
    assert np.array_equal(out[256:512, 512:768], chunk) and not out[:256].any() and not out[:, :512].any()


def test_rows_that_continue_each_other_are_one_run_split_in_segments() -> None:
    out = np.zeros((64, 300), np.float64)  # whole rows: the chunk is one run of 64 x 300 x 8 bytes
    chunk = np.random.default_rng(1).random((64, 300))
    blocks = _chunk_into(out, chunk, (0, 0))
    run, _ = contiguous_runs(blocks[0], blocks[2], blocks[3], blocks[4], 8)
    assert run.tolist() == [64 * 300 * 8] and run[0] > 30 * SEG
    assert scatter_on_host(blocks, 8, bytes(8)) == (1, 0)
    assert np.array_equal(out, chunk)


def test_narrow_and_strided_blocks_go_to_the_elements_kernel() -> None:
    out = np.zeros((64, 64), np.float32)
    narrow = np.ones((64, MIN_RUN // 4 - 1), np.float32)  # runs one element short of MIN_RUN
    stepped = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)[:, ::2]  # runs of one element
    for chunk, want in ((narrow, (0, 1)), (stepped, (0, 1))):
        out[:] = 0
        assert scatter_on_host(_chunk_into(out, chunk, (0, 0)), 4, bytes(4)) == want
        assert np.array_equal(out[:, : chunk.shape[1]], chunk)
