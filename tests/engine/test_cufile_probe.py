"""The cuFile driver probe on a machine without a GPU: guarded, quick, and it says why."""

from __future__ import annotations

import time

import pytest

from gdsstore import policy
from gdsstore.engine import cuda, cufile


def test_cufile_probe_is_guarded_and_quick() -> None:
    """Without a GPU the driver is never opened (it would hang): the probe answers at once with why."""
    if cuda.device_count():
        pytest.skip("GPU machine: covered by tests/engine/test_gpu_local.py")
    t0 = time.perf_counter()
    res = cufile.driver_probe()
    assert time.perf_counter() - t0 < 5
    assert not res.ok
    assert res.reason in (
        "no CUDA device",
        "libcufile not found",
    ) or res.reason.startswith("cuda.bindings.cufile not importable")
    # and a device read decision would fall back with that reason
    assert policy.decide_local(device=True, nbytes=1 << 30, cufile=res).reason == res.reason


def test_cufile_stats_none_without_driver() -> None:
    assert cufile.read_stats() is None or cufile.driver_probe().ok
