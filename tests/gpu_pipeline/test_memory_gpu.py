"""Device and pinned memory of GPU pipeline calls (issue 23), on a GPU.

- After a read, free device memory is back to what it was, less the output (CuPy's default pool did not
  grow behind the user's back): the call's temporaries came from a pool of its own, emptied on return.
- With an allocator the user chose (here a CuPy pool of the test's own, as RMM's or PyTorch's would be),
  the call's temporaries, nvCOMP's scratch among them, come from it.
- ``gpu.memory_budget`` bounds the peak of a read, and the pinned account stays within
  ``pinned_memory_limit``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec

import gdsstore
from gdsstore.engine import bounce

pytestmark = pytest.mark.gpu

MiB = 1 << 20


@pytest.fixture(scope="module")
def array(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, np.ndarray]:
    """256 MiB of float32 in 64 zstd chunks of 4 MiB, written with zarr on the host."""
    root = str(tmp_path_factory.mktemp("mem") / "a.zarr")
    rng = np.random.default_rng(0)
    data = np.round(rng.standard_normal((8192, 8192), dtype="f4"), 2)
    z = zarr.create_array(root, shape=data.shape, chunks=(1024, 1024), dtype="f4", compressors=[ZstdCodec(level=1)])
    z[:] = data
    return root, data


def _read(root: str) -> Any:
    with gdsstore.enable_gpu():
        return zarr.open_array(gdsstore.GDSStore(root), mode="r")[:]


class LeastFree:
    """The least free device memory while the block runs (``cudaMemGetInfo`` every 0.5 ms)."""

    def __init__(self, cp: Any) -> None:
        self.cp = cp

    def __enter__(self) -> LeastFree:
        self.cp.cuda.runtime.deviceSynchronize()
        self.before = self.least = int(self.cp.cuda.runtime.memGetInfo()[0])
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self) -> None:
        while not self._stop:
            self.least = min(self.least, int(self.cp.cuda.runtime.memGetInfo()[0]))
            time.sleep(0.0005)

    def __exit__(self, *exc: object) -> None:
        self.cp.cuda.runtime.deviceSynchronize()
        self._stop = True
        self._t.join()
        self.after = int(self.cp.cuda.runtime.memGetInfo()[0])
        self.least = min(self.least, self.after)


def test_a_read_gives_its_device_memory_back(cp: Any, array: tuple[str, np.ndarray]) -> None:
    root, data = array
    np.testing.assert_array_equal(_read(root).get(), data)  # warm: kernels, nvCOMP, the CUDA context
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    default_before = pool.total_bytes()
    with LeastFree(cp) as m:
        x = _read(root)
    assert int(x.nbytes) == data.nbytes
    held = m.before - m.after - x.nbytes
    assert held <= 32 * MiB, f"the read kept {held / MiB:.0f} MiB of device memory beyond its output"
    # The default pool holds the output and nothing of the call's temporaries.
    assert pool.total_bytes() - default_before <= x.nbytes + MiB
    np.testing.assert_array_equal(x.get(), data)


def test_the_peak_stays_within_the_budget(cp: Any, array: tuple[str, np.ndarray]) -> None:
    root, data = array
    budget = 128 * MiB
    _read(root)
    with gdsstore.config.set({"gpu.memory_budget": budget}), LeastFree(cp) as m:
        x = _read(root)
    peak = m.before - m.least - x.nbytes
    assert peak <= budget, f"peak {peak / MiB:.0f} MiB beyond the output under a {budget / MiB:.0f} MiB budget"
    np.testing.assert_array_equal(x.get(), data)


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, np.ndarray]:
    """512 MiB of float32 in shards of 2048 x 4096 holding zstd chunks of 256 KiB."""
    root = str(tmp_path_factory.mktemp("mem") / "s.zarr")
    data = np.round(np.random.default_rng(2).standard_normal((8192, 16384), dtype="f4"), 2)
    z = zarr.create_array(root, shape=data.shape, chunks=(256, 256), shards=(2048, 4096), dtype="f4",
                          compressors=[ZstdCodec(level=1)])
    z[:] = data
    return root, data


def test_many_windows_stay_within_the_budget(cp: Any, shards: tuple[str, np.ndarray]) -> None:
    """Sixteen windows of slightly different sizes: without the call's free blocks given back between
    windows, CuPy's pool grew beside its idle blocks to 285 MiB under this 256 MiB budget."""
    root, data = shards
    budget = 256 * MiB
    _read(root)
    with gdsstore.config.set({"gpu.memory_budget": budget}), LeastFree(cp) as m, gdsstore.trace() as t:
        x = _read(root)
    peak = m.before - m.least - x.nbytes
    assert sum(e.route == "gpu-decode" for e in t.events) >= 8  # many windows, as the budget asks
    assert peak <= budget, f"peak {peak / MiB:.0f} MiB beyond the output under a {budget / MiB:.0f} MiB budget"
    np.testing.assert_array_equal(x.get(), data)


def test_the_users_allocator_serves_the_calls_temporaries(cp: Any, array: tuple[str, np.ndarray]) -> None:
    root, data = array
    users = cp.cuda.MemoryPool()  # stands for RMM's rmm_cupy_allocator or a PyTorch-backed allocator
    default = cp.get_default_memory_pool()
    default.free_all_blocks()
    default_before = default.total_bytes()
    cp.cuda.set_allocator(users.malloc)  # process-wide, as RMM's and PyTorch's recipes set it
    try:
        x = _read(root)
        np.testing.assert_array_equal(x.get(), data)
    finally:
        cp.cuda.set_allocator(default.malloc)
    # The output and the temporaries (staging, decoded chunks) came from the user's pool, which keeps
    # its freed blocks as that allocator decides.
    assert users.total_bytes() > x.nbytes
    assert default.total_bytes() == default_before


def test_pinned_memory_stays_within_the_limit(cp: Any, array: tuple[str, np.ndarray]) -> None:
    root, data = array
    with gdsstore.config.set({"pinned_memory_limit": 48 * MiB}):
        x = _read(root)
        stats = bounce.ring.stats()
    np.testing.assert_array_equal(x.get(), data)
    assert stats["total"] <= 48 * MiB, stats


def test_a_write_gives_its_device_memory_back(cp: Any, tmp_path: Path) -> None:
    data = cp.asarray(np.round(np.random.default_rng(1).standard_normal((4096, 4096), dtype="f4"), 2))
    root = str(tmp_path / "w.zarr")
    with gdsstore.enable_gpu():
        z = zarr.create_array(gdsstore.GDSStore(root), shape=data.shape, chunks=(1024, 1024), dtype="f4",
                              compressors=[ZstdCodec(level=1)])
        z[:] = data  # warm
    cp.get_default_memory_pool().free_all_blocks()
    with LeastFree(cp) as m, gdsstore.enable_gpu():
        zarr.open_array(gdsstore.GDSStore(root), mode="r+")[:] = data
    assert m.before - m.after <= 32 * MiB
    np.testing.assert_array_equal(zarr.open_array(root, mode="r")[:], data.get())


def test_reads_of_few_chunks_per_nvcomp_call_decode_on_the_cpu(cp: Any, tmp_path: Path) -> None:
    """zstd chunks of which each nvCOMP call would decode fewer than ``gpu.host_decode_chunks`` (few in the
    read, or few in a window of the memory budget) decode on the CPU, one copy per window (the same bytes, the
    trace says why); with enough chunks per call they decode on the GPU."""
    root = str(tmp_path / "few.zarr")
    data = np.round(np.random.default_rng(4).standard_normal((2048, 2048), dtype="f4"), 2)
    z = zarr.create_array(root, shape=data.shape, chunks=(512, 512), dtype="f4", compressors=[ZstdCodec(level=1)])
    z[:] = data  # 16 chunks of 1 MiB
    cases = (
        ({"gpu.host_decode_chunks": 17}, "cpu"),  # 16 chunks in the read
        ({"gpu.host_decode_chunks": 4, "gpu.memory_budget": 16 * MiB}, "cpu"),  # 1-3 chunks per window
        ({"gpu.host_decode_chunks": 16}, "gpu"),
    )
    for settings, where in cases:
        with gdsstore.config.set(settings), gdsstore.enable_gpu(), LeastFree(cp) as m, gdsstore.trace() as t:
            x = zarr.open_array(gdsstore.GDSStore(root), mode="r")[:]
        np.testing.assert_array_equal(x.get(), data)
        few = [v["bytes"] for (_, route, r), v in t.by_reason().items() if "few chunks per nvCOMP call" in r]
        budget = settings.get("gpu.memory_budget")
        if budget:  # the CPU's windows are sized to it too
            assert m.before - m.least - x.nbytes <= budget, str(t)
        if where == "cpu":
            assert "gpu-decode" not in t.routes and sum(few) == data.nbytes, str(t)
        else:
            assert "gpu-decode" in t.routes and not few, str(t)


def test_small_reads_decode_on_the_cpu(cp: Any, tmp_path: Path) -> None:
    """A read of at most ``gpu.host_decode_bytes`` decodes on the CPU and copies to the device (the same
    bytes, no nvCOMP call, the trace says why); a larger one decodes on the GPU."""
    root = str(tmp_path / "small.zarr")
    data = np.round(np.random.default_rng(3).standard_normal((1024, 1024), dtype="f4"), 2)
    z = zarr.create_array(root, shape=data.shape, chunks=(256, 256), dtype="f4", compressors=[ZstdCodec(level=1)])
    z[:] = data
    for limit, where in ((16 * MiB, "cpu"), (1 * MiB, "gpu")):
        settings = {"gpu.host_decode_bytes": limit, "gpu.host_decode_chunks": 0}  # bytes alone decide here
        with gdsstore.config.set(settings), gdsstore.enable_gpu(), gdsstore.trace() as t:
            x = zarr.open_array(gdsstore.GDSStore(root), mode="r")[:]
            part = zarr.open_array(gdsstore.GDSStore(root), mode="r")[100:700:3, 5:900]
        assert isinstance(x, cp.ndarray)
        np.testing.assert_array_equal(x.get(), data)
        np.testing.assert_array_equal(part.get(), data[100:700:3, 5:900])
        small = [r for (op, route, r) in t.by_reason() if route == "cpu-codec" and "small read" in r]
        if where == "cpu":
            assert "gpu-decode" not in t.routes and small, str(t)
        else:
            assert "gpu-decode" in t.routes and not small, str(t)
