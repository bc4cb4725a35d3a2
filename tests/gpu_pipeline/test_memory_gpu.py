"""Device memory as a budget, on the GPU: reads and writes stay within ``gpu.memory_budget``, give their
memory back when they return, never grow CuPy's default pool, route every allocation (nvCOMP's too)
through the allocator the user chose, and keep pinned memory within ``pinned_memory_limit``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.codecs import GzipCodec, ZstdCodec
from zarr.storage import LocalStore

import gdsstore
from gdsstore.engine import bounce
from gdsstore.gpu import memory, nvcomp, staging

pytestmark = pytest.mark.gpu

MiB = 1 << 20
SHAPE = (2048, 2048)  # 16 MiB of float32


def _data() -> np.ndarray:
    rng = np.random.default_rng(5)
    return np.round(rng.standard_normal(SHAPE), 2).astype("f4")


def _array(root: Path, compressor: Any = None, chunks: tuple[int, int] = (256, 256), shards: Any = None) -> np.ndarray:
    data = _data()
    kw: dict[str, Any] = {"shards": shards} if shards else {}
    z = zarr.create_array(
        LocalStore(root), shape=SHAPE, chunks=chunks, dtype="f4",
        compressors=[compressor or ZstdCodec()], **kw,
    )  # fmt: skip
    z[:] = data
    return data


def _read(root: Path) -> Any:
    with gdsstore.enable_gpu():
        return zarr.open_array(gdsstore.GDSStore(str(root)), mode="r")[:]


@pytest.mark.parametrize("layout", ["chunks", "shards"])
def test_a_read_stays_within_the_budget_and_gives_its_memory_back(cp: Any, tmp_path: Path, layout: str) -> None:
    data = _array(tmp_path, shards=(1024, 1024) if layout == "shards" else None)
    pool = cp.get_default_memory_pool()
    _read(tmp_path)  # loads nvCOMP and the kernels: what follows measures the read alone
    pool.free_all_blocks()
    memory.forget_learned()  # the first window of a kind by the model, the later ones as measured
    for budget in (16 * MiB, 64 * MiB):
        with gdsstore.config.set({"gpu.memory_budget": budget}):
            free_before = cp.cuda.runtime.memGetInfo()[0]
            default_free_before = pool.free_bytes()
            x = _read(tmp_path)
            cp.cuda.runtime.deviceSynchronize()
            used = free_before - cp.cuda.runtime.memGetInfo()[0]
            stats = memory.budget_stats()
        np.testing.assert_array_equal(x.get(), data)
        assert stats["top"] <= budget, stats  # every window, nvCOMP's scratch included
        assert stats["live"] == 0, stats  # nothing of the read is left allocated
        assert stats["held"] <= memory.idle_bytes(budget), stats
        # what the process holds more: the output, and at most the private pool's idle share
        assert used - x.nbytes <= memory.idle_bytes(budget) + 2 * MiB, (used, stats)
        assert pool.free_bytes() <= default_free_before + MiB  # CuPy's default pool did not grow
        assert not nvcomp._codecs  # cached codecs (their scratch) dropped once idle
        del x
        pool.free_all_blocks()


def test_a_lower_budget_reads_the_same_in_more_windows(cp: Any, tmp_path: Path) -> None:
    data = _array(tmp_path)
    ops = {}
    for budget in (16 * MiB, 1 << 30):
        with gdsstore.config.set({"gpu.memory_budget": budget}), gdsstore.trace() as t:
            np.testing.assert_array_equal(_read(tmp_path).get(), data)
        ops[budget] = t.totals["gpu-decode"]["ops"]
    assert ops[16 * MiB] > ops[1 << 30] >= 1


def test_a_chosen_allocator_gets_every_allocation(cp: Any, tmp_path: Path) -> None:
    """RMM's rmm_cupy_allocator or a PyTorch-shared pool stand in as a pool of the user's own."""
    data = _array(tmp_path)
    _read(tmp_path)
    mine = cp.cuda.MemoryPool()
    calls: list[int] = []

    def chosen(nbytes: int) -> Any:
        calls.append(nbytes)
        return mine.malloc(nbytes)

    held_before = memory.budget.held()
    cp.cuda.set_allocator(chosen)
    try:
        x = _read(tmp_path)
        np.testing.assert_array_equal(x.get(), data)
    finally:
        cp.cuda.set_allocator(cp.get_default_memory_pool().malloc)
    # the output, gdsstore's staging and decode buffers and nvCOMP's scratch all came from it
    assert sum(calls) > 2 * x.nbytes, calls
    assert memory.budget.held() <= held_before  # the private pool was not used
    assert mine.total_bytes() >= x.nbytes  # the user's pool keeps what it caches: gdsstore frees none of it


def test_a_write_stays_within_the_budget(cp: Any, tmp_path: Path) -> None:
    data = _data()
    _array(tmp_path / "warm")
    memory.forget_learned()
    with gdsstore.config.set({"gpu.memory_budget": 16 * MiB}), gdsstore.enable_gpu():
        z = zarr.create_array(
            gdsstore.GDSStore(str(tmp_path / "w")), shape=SHAPE, chunks=(256, 256), dtype="f4",
            compressors=[ZstdCodec()],
        )  # fmt: skip
        z[:] = cp.asarray(data)
        stats = memory.budget_stats()
    np.testing.assert_array_equal(zarr.open_array(LocalStore(tmp_path / "w"), mode="r")[:], data)
    assert stats["top"] <= 16 * MiB and stats["live"] == 0, stats


def _unpin_idle() -> None:
    """Free what earlier tests left pinned and idle (ring slots, staging buffers)."""
    staging._pinned_pool.drop_idle()
    with bounce.ring._cond:
        bounce.ring._drop_idle(0)


def test_pinned_staging_and_the_ring_stay_within_the_limit(cp: Any, tmp_path: Path) -> None:
    data = _array(tmp_path, GzipCodec())  # host-staged: pinned staging buffers, then one copy
    _unpin_idle()
    with gdsstore.config.set({"pinned_memory_limit": 32 * MiB, "gpu.memory_budget": 256 * MiB}):
        bounce.ring.reset_peak()
        np.testing.assert_array_equal(_read(tmp_path).get(), data)
        st = bounce.ring.stats()
    assert st["peak"] <= 32 * MiB, st


def test_a_small_read_pins_what_it_reads(cp: Any, tmp_path: Path) -> None:
    _array(tmp_path, chunks=(512, 512))  # 16 chunks of 1 MiB, zstd: staged on the GPU through the ring
    _unpin_idle()
    bounce.ring.reset_peak()
    _read(tmp_path)
    assert bounce.ring.stats()["peak"] <= 24 * MiB  # slots as large as the pieces, not 16 x 8 MiB
