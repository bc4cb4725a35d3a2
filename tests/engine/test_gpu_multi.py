"""Multi-GPU (issue 8): bytes land on the destination buffer's device, on every route; the trace says which.

Needs >= 2 GPUs: skips with that reason on one GPU (the single-GPU parts run in test_gpu_local.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gdsstore
from gdsstore.engine import cuda, cufile

pytestmark = pytest.mark.gpu


@pytest.fixture
def two_gpus() -> int:
    n = cuda.device_count()
    if n < 2:
        pytest.skip(f"needs >= 2 GPUs, this machine has {n}")
    return n


@pytest.mark.parametrize("mode", ["on", "auto"])
def test_reads_land_on_each_device(cp, two_gpus, tmp_path: Path, mode: str) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "m.bin"
    data = np.random.default_rng(7).integers(0, 256, 24 << 20, dtype=np.uint8)
    data.tofile(p)
    if mode == "auto" and not cufile.driver_probe().ok:
        pytest.skip(cufile.driver_probe().reason)
    with gdsstore.config.set({"compat_mode": mode}), gdsstore.trace() as t:
        for dev in range(two_gpus):
            with cp.cuda.Device(dev):
                buf = cp.empty(data.size, dtype=cp.uint8)
            with cp.cuda.Device(0), gdsstore.open(p) as f:  # current device deliberately not the buffer's
                assert f.read(buf) == data.size
            assert buf.device.id == dev
            assert np.array_equal(cp.asnumpy(buf), data)
    assert sorted({e.device for e in t.events}) == list(range(two_gpus))


def test_writes_from_each_device(cp, two_gpus, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for dev in range(two_gpus):
        p = tmp_path / f"w{dev}.bin"
        with cp.cuda.Device(dev):
            src = cp.arange(1 << 20, dtype=cp.uint32)
        with gdsstore.open(p, "wb") as f:
            f.write(src)
        assert np.array_equal(np.fromfile(p, dtype=np.uint32), np.arange(1 << 20, dtype=np.uint32))


def test_a_wave_copy_lands_on_its_device_whichever_is_current(cp, two_gpus) -> None:  # type: ignore[no-untyped-def]
    """``DeviceCopy`` (a remote wave's parts) for the last device, made and finished while device 0 is current."""
    from gdsstore.engine.bounce import DeviceCopy

    data = np.random.default_rng(3).integers(0, 256, 1 << 20, dtype=np.uint8)
    dev = two_gpus - 1
    with cp.cuda.Device(0):
        copy = DeviceCopy(dev, 1 << 18)
        copy.copy(data, 0, 1 << 19)
        copy.copy(data, 1 << 19, data.size)
        out = copy.result(data.size, 2)
    assert out.device.id == dev
    assert np.array_equal(cp.asnumpy(out), data)
