"""Missing optional dependencies name the ``pip install '.[...]'`` (in a clone) that brings them; ``enable_gpu()``
fails at once without CuPy or a device; RMM-aware device memory (its non-GPU branch)."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

import gdsstore
from gdsstore._optional import EXTRAS, MissingOptionalDependencyError, install_hint, require
from gdsstore.engine import cuda
from gdsstore.gpu import memory

NO_CUPY = pytest.mark.skipif(cuda.cupy_or_none() is not None, reason="CuPy is installed here")


def test_require_names_the_extra_of_each_optional_module(monkeypatch: pytest.MonkeyPatch) -> None:
    for module, extra in [("botocore", "s3"), ("xarray", "xarray"), ("distributed", "dask"),
                          ("cupy", "cuda13"), ("nvidia.nvcomp", "cuda13"), ("cuda.bindings.cufile", "cuda13")]:
        monkeypatch.setitem(sys.modules, module, None)  # import of it now fails as if not installed
        with pytest.raises(MissingOptionalDependencyError) as info:
            require(module, purpose="the test")
        assert install_hint(extra) in str(info.value) and module in str(info.value)
        assert isinstance(info.value, ModuleNotFoundError)
    assert install_hint("cuda12") == install_hint("cuda13")  # both CUDA majors are offered
    assert set(EXTRAS.values()) <= {"cuda13", "s3", "xarray", "dask"}


def test_require_unknown_module_without_extra_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="no gdsstore extra brings 'not_a_real_module_x'"):
        require("not_a_real_module_x")


def test_s3_without_botocore_names_the_s3_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from gdsstore.engine.remote.s3 import S3Client

    monkeypatch.setitem(sys.modules, "botocore", None)
    with pytest.raises(MissingOptionalDependencyError, match=r"S3 \(s3:// URLs\): botocore is not installed; "
                                                             r"pip install '\.\[s3\]' in a clone"):
        S3Client({"anon": True})


@NO_CUPY
def test_enable_gpu_without_cupy_fails_at_once() -> None:
    import zarr

    before = dict(zarr.config.config)
    with pytest.raises(MissingOptionalDependencyError, match=r"gdsstore.enable_gpu\(\).*cupy is not installed; "
                                                             r"pip install '\.\[cuda13\]'"):
        gdsstore.enable_gpu()
    assert dict(zarr.config.config) == before  # nothing half-applied
    with gdsstore.enable_gpu(buffers=False):  # host buffers need no CuPy
        assert zarr.config.get("buffer") == "zarr.buffer.cpu.Buffer"


def test_pool_free_bytes() -> None:
    assert memory.pool_free_bytes(8 << 30, 6 << 30, 1 << 30) == memory.DeviceMemory(3 << 30, "rmm pool")
    assert memory.pool_free_bytes(8 << 30, 9 << 30, 0).free == 0
    guess = memory.pool_free_bytes(8 << 30, None, 1 << 30)
    assert guess.free == (4 << 30) + (1 << 30) and "no statistics" in guess.source


def _fake_rmm() -> Any:
    """Stand-ins for rmm.mr's classes (RMM needs a GPU): a statistics adaptor over a pool."""

    class PoolMemoryResource:
        def pool_size(self) -> int:
            return 10 << 30

    class StatisticsResourceAdaptor:
        def __init__(self, upstream: Any) -> None:
            self.upstream = upstream
            self.allocation_counts = {"current_bytes": 7 << 30}

        def get_upstream(self) -> Any:
            return self.upstream

    return SimpleNamespace(PoolMemoryResource=PoolMemoryResource, StatisticsResourceAdaptor=StatisticsResourceAdaptor)


def test_rmm_resource_chain_walk() -> None:
    rmm_mr = _fake_rmm()
    pool = rmm_mr.PoolMemoryResource()
    assert memory._rmm_pool(rmm_mr.StatisticsResourceAdaptor(pool), rmm_mr) == (pool, 7 << 30)
    assert memory._rmm_pool(pool, rmm_mr) == (pool, None)
    assert memory._rmm_pool(object(), rmm_mr) is None  # not a pool: cudaMemGetInfo decides


@NO_CUPY
def test_device_free_bytes_without_cupy_names_the_extra() -> None:
    with pytest.raises(MissingOptionalDependencyError, match=r"pip install '\.\[cuda13\]'"):
        memory.device_free_bytes()


@pytest.mark.gpu
def test_device_free_bytes_on_the_gpu(cp: Any) -> None:
    got = memory.device_memory()
    free, total = cp.cuda.runtime.memGetInfo()
    assert 0 < got.free <= total
    if "rmm" not in sys.modules:
        assert got.source == "cudaMemGetInfo" and abs(got.free - free) < (256 << 20)


@pytest.mark.parametrize(("module", "dependency", "extra"),
                         [("gdsstore.xarray_backend", "xarray", "xarray"), ("gdsstore.dask", "distributed", "dask")])
def test_integration_modules_name_their_extra(module: str, dependency: str, extra: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, dependency, None)
    with pytest.raises(MissingOptionalDependencyError, match=rf"{module}: {dependency} is not installed; "
                                                             rf"pip install '\.\[{extra}\]' in a clone"):
        importlib.import_module(module)
