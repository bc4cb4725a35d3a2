"""Copies on the engine threads' non-blocking streams are ordered after the kernels the caller queued on the
memory they touch (``gdsstore.engine.cuda.current_event``). Without it, CuPy's pool handed an archive window's
upload the block a scatter kernel was still reading, and a multi-window read came back with other chunks'
bytes (seen once on the H200)."""

from __future__ import annotations

import numpy as np
import pytest

from gdsstore.engine import cuda, landing
from gdsstore.gpu import staging

pytestmark = pytest.mark.gpu

# Waits ``spin`` clocks, then copies ``src`` to ``dst``: still reading when the next copy is issued.
_SLOW_COPY = r"""
extern "C" __global__ void slow_copy(const unsigned char* src, unsigned char* dst, long long n, long long spin) {
    long long t0 = clock64();
    while (clock64() - t0 < spin) {}
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
"""
_SPIN = 300_000_000  # about 0.15 s at 2 GHz


def _slow_copy(src: object, dst: object, n: int) -> None:
    import cupy as cp

    cp.RawKernel(_SLOW_COPY, "slow_copy")((256,), (256,), (src, dst, cp.int64(n), cp.int64(_SPIN)))


def test_an_upload_waits_for_kernels_still_reading_the_memory_it_reuses() -> None:
    import cupy as cp

    n = 64 << 20
    pool = cp.cuda.MemoryPool()  # a pool of its own: the freed block is the one handed out next
    with cp.cuda.using_allocator(pool.malloc):
        rows = cp.full(n, 7, dtype=cp.uint8)  # a window's decoded rows
        out = cp.zeros(n, dtype=cp.uint8)
        cp.cuda.Device().synchronize()
        _slow_copy(rows, out, n)  # the scatter, still queued
        ptr = rows.data.ptr
        del rows  # as _decode_batched returns with its scatter still queued
        buf, owner = landing.alloc_host(n, True)
        assert owner is not None
        buf[:] = 1  # the next window's landed bytes
        try:
            dev = staging.to_device(landing.Landed(buf, [0], [n], owner))  # how a window moves to the GPU
        finally:
            landing.release_host(owner)
        assert dev.data.ptr == ptr  # the pool reused the block the kernel still reads
        cp.cuda.Device().synchronize()
        assert int((out != 7).sum()) == 0  # the kernel read the rows, not the upload
        assert bool((dev == 1).all())


def test_a_copy_to_the_host_waits_for_the_kernel_that_writes_its_source() -> None:
    import cupy as cp

    n = 16 << 20
    src = cp.full(n, 9, dtype=cp.uint8)
    dst = cp.zeros(n, dtype=cp.uint8)
    cp.cuda.Device().synchronize()
    _slow_copy(src, dst, n)  # a kernel of the user's, producing what is then written out
    buf, owner = landing.alloc_host(n, True)
    try:
        cuda.memcpy_dtoh(dst.device.id, int(owner.ptr), int(dst.data.ptr), n)
        assert bool((np.asarray(buf) == 9).all())
    finally:
        landing.release_host(owner)


@pytest.mark.parametrize("compat", ["on", "auto"])
def test_a_file_written_from_the_device_holds_what_the_queued_kernel_wrote(tmp_path: object, compat: str) -> None:
    import os

    import cupy as cp

    import gdsstore

    n = 16 << 20
    src = cp.full(n, 9, dtype=cp.uint8)
    dst = cp.zeros(n, dtype=cp.uint8)
    cp.cuda.Device().synchronize()
    _slow_copy(src, dst, n)  # still writing ``dst`` when the write starts
    path = os.path.join(str(tmp_path), "out.bin")
    # compat_mode "on": the POSIX route's device-to-host copies; "auto": cuFile where the file's handle registers
    with gdsstore.config.set({"compat_mode": compat}), gdsstore.open(path, "wb") as f:
        assert f.write(dst) == n
    assert np.fromfile(path, dtype=np.uint8).min() == 9
