"""nvCOMP's batched decode through its C API (gdsstore.gpu.nvcomp_capi), against the Python API and the
CPU codecs, on a GPU: the same bytes, the GIL released while the device works, and the scratch taken from
CuPy's current allocator. (A corrupt zstd block is not tested here: nvCOMP 6.0's zstd decoder then makes an
illegal memory access, through its Python API as through the C API (measured on the H200), and the
process's CUDA context is lost.)"""

from __future__ import annotations

import threading
import time
import zlib
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def _payloads(fmt: str, raws: list[bytes]) -> list[bytes]:
    from numcodecs import LZ4, Zstd

    if fmt == "zstd":
        return [bytes(Zstd(level=1).encode(r)) for r in raws]
    if fmt == "lz4":
        return [bytes(LZ4().encode(r))[4:] for r in raws]  # numcodecs' 4-byte size, then the raw block
    out = []
    for r in raws:  # raw deflate: what nvCOMP decodes behind a gzip or zlib header
        c = zlib.compressobj(1, zlib.DEFLATED, -15)
        out.append(c.compress(r) + c.flush())
    return out


def _batch(payloads: list[bytes]) -> tuple[Any, list[int], list[int]]:
    import cupy as cp

    offs, at = [], 0
    for p in payloads:
        offs.append(at)
        at += -(-len(p) // 256) * 256
    host = np.zeros(max(at, 1), np.uint8)
    for o, p in zip(offs, payloads):
        host[o : o + len(p)] = np.frombuffer(p, np.uint8)
    return cp.asarray(host), offs, [len(p) for p in payloads]


@pytest.mark.parametrize("fmt", ["zstd", "gzip", "lz4"])
def test_same_bytes_as_the_cpu_codecs(fmt: str) -> None:
    import cupy as cp

    from gdsstore.gpu import nvcomp_capi

    assert nvcomp_capi.library() is not None, "libnvcomp.so.6 not found beside nvidia.nvcomp"
    rng = np.random.default_rng(1)
    raws = [np.round(rng.standard_normal(n, dtype="f4"), 2).tobytes() for n in (1, 1000, 65536, 300_001)]
    src, offs, lens = _batch(_payloads(fmt, raws))
    sizes = [len(r) for r in raws]
    out_offs = list(np.cumsum([0, *[-(-n // 256) * 256 for n in sizes[:-1]]]))
    out = cp.zeros(int(out_offs[-1]) + sizes[-1], cp.uint8)
    table = nvcomp_capi.DecodeTable(src, offs, lens, out, [int(o) for o in out_offs], sizes)
    got = nvcomp_capi.decode_into(fmt, table)
    assert got.tolist() == sizes
    host = out.get()
    for o, r in zip(out_offs, raws):
        assert host[int(o) : int(o) + len(r)].tobytes() == r


def test_the_gil_is_released_while_the_gpu_decodes() -> None:
    """A Python thread keeps most of its pace during a long decode (the Python API held it to ~11 %)."""
    import cupy as cp

    from gdsstore.gpu import nvcomp_capi

    raw = np.round(np.random.default_rng(0).standard_normal(1 << 20, dtype="f4"), 2).tobytes()
    k = 64
    src, offs, lens = _batch(_payloads("zstd", [raw] * k))
    out = cp.empty(k * len(raw), cp.uint8)
    table = nvcomp_capi.DecodeTable(src, offs, lens, out, [i * len(raw) for i in range(k)], [len(raw)] * k)
    nvcomp_capi.decode_into("zstd", table)
    count, stop = [0], [False]

    def spin() -> None:
        while not stop[0]:
            count[0] += 1

    th = threading.Thread(target=spin)
    th.start()
    try:
        time.sleep(0.05)
        c0, t0 = count[0], time.perf_counter()
        time.sleep(0.05)
        idle = (count[0] - c0) / (time.perf_counter() - t0)
        c0, t0 = count[0], time.perf_counter()
        for _ in range(3):
            nvcomp_capi.decode_into("zstd", table)
        busy = (count[0] - c0) / (time.perf_counter() - t0)
    finally:
        stop[0] = True
        th.join()
    assert busy > 0.5 * idle, f"the spinning thread ran at {busy / idle:.0%} of its idle pace during the decode"


def test_scratch_comes_from_the_current_allocator() -> None:
    import cupy as cp

    from gdsstore.gpu import nvcomp_capi

    raw = bytes(1 << 20)
    src, offs, lens = _batch(_payloads("zstd", [raw] * 8))
    out = cp.empty(8 << 20, cp.uint8)
    pool = cp.cuda.MemoryPool()
    with cp.cuda.using_allocator(pool.malloc):
        table = nvcomp_capi.DecodeTable(src, offs, lens, out, [i << 20 for i in range(8)], [1 << 20] * 8)
        nvcomp_capi.decode_into("zstd", table)
    assert pool.total_bytes() > 0  # nvCOMP's scratch and the pointer arrays came from the pool
    pool.free_all_blocks()
    assert pool.total_bytes() == 0


def test_large_zstd_chunks_get_the_scratch_their_frames_need() -> None:
    """Calls of 64 MiB and more of 4 MiB zstd chunks decode with nvCOMP's exact scratch (about 1.7x the
    decoded bytes on the H200, against its bound's 3.05x), to the same bytes, and the ratio is kept for
    window sizing; a smaller call keeps the bound."""
    import cupy as cp

    from gdsstore.gpu import nvcomp_capi

    rng = np.random.default_rng(2)
    raws = [np.round(rng.standard_normal(1 << 20, dtype="f4"), 2).tobytes() for _ in range(17)]
    n = len(raws[0])
    nvcomp_capi._seen.clear()
    for count in (4, len(raws)):  # 16 MiB: the bound; 68 MiB: the exact scratch
        src, offs, lens = _batch(_payloads("zstd", raws[:count]))
        out = cp.zeros(count * n, cp.uint8)
        table = nvcomp_capi.DecodeTable(src, offs, lens, out, [i * n for i in range(count)], [n] * count)
        got = nvcomp_capi.decode_into("zstd", table)
        assert got.tolist() == [n] * count
        assert out.get().tobytes() == b"".join(raws[:count])
        if count == 4:
            assert nvcomp_capi.scratch_ratio("zstd", n) == nvcomp_capi.BOUND_SCRATCH
    ratio = nvcomp_capi.scratch_ratio("zstd", n)
    assert 0 < ratio < nvcomp_capi.BOUND_SCRATCH, ratio
    assert nvcomp_capi.scratch_ratio("zstd", n // 4) == nvcomp_capi.BOUND_SCRATCH  # other chunks: the bound


def test_a_small_call_asked_for_the_exact_scratch_learns_the_ratio() -> None:
    """A 16 MiB call of 4 MiB zstd chunks keeps the bound unless asked (a split read's first batch asks): then
    it decodes with the scratch the frames need, to the same bytes, and the ratio is kept for window sizing."""
    import cupy as cp

    from gdsstore.gpu import nvcomp_capi

    rng = np.random.default_rng(3)
    raws = [np.round(rng.standard_normal(1 << 20, dtype="f4"), 2).tobytes() for _ in range(4)]
    n = len(raws[0])
    nvcomp_capi._seen.clear()
    for exact in (False, True):
        src, offs, lens = _batch(_payloads("zstd", raws))
        out = cp.zeros(4 * n, cp.uint8)
        table = nvcomp_capi.DecodeTable(src, offs, lens, out, [i * n for i in range(4)], [n] * 4)
        assert nvcomp_capi.decode_into("zstd", table, exact_scratch=exact).tolist() == [n] * 4
        assert out.get().tobytes() == b"".join(raws)
        learned = nvcomp_capi.scratch_ratio("zstd", n)
        assert (learned < nvcomp_capi.BOUND_SCRATCH) == exact, learned


def test_learn_scratch_parses_the_frames_without_decoding() -> None:
    """A split read that nvCOMP takes no part in still learns the scratch its 4 MiB zstd frames need."""
    from gdsstore.gpu import nvcomp_capi

    rng = np.random.default_rng(4)
    raws = [np.round(rng.standard_normal(1 << 20, dtype="f4"), 2).tobytes() for _ in range(4)]
    n = len(raws[0])
    nvcomp_capi._seen.clear()
    src, offs, lens = _batch(_payloads("zstd", raws))
    ratio = nvcomp_capi.learn_scratch("zstd", nvcomp_capi.DecodeTable(src, offs, lens, None, [0] * 4, [n] * 4))
    assert 0 < ratio < nvcomp_capi.BOUND_SCRATCH
    assert nvcomp_capi.scratch_ratio("zstd", n) == ratio
