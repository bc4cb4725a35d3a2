"""``gdsstore.dask.GDSStorePlugin`` on a LocalCluster of 2 worker processes: settings and the zarr
configuration reach every worker, after a restart and on a worker that joins later; arrays opened with
``gdsstore.dask.open_array`` on the client read through gdsstore's pipeline on the workers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
import zarr  # noqa: E402

from gdsstore.dask import GDSStorePlugin, open_array  # noqa: E402
from gdsstore.gpu.enable import PIPELINE_PATH  # noqa: E402

SETTINGS = {"num_threads": 3, "task_size": 1 << 20, "remote.max_attempts": 7}


def worker_state() -> dict[str, Any]:
    """What a worker process has: its gdsstore settings and zarr's pipeline and buffer."""
    import os

    import zarr

    import gdsstore

    return {
        "pid": os.getpid(),
        "num_threads": gdsstore.config.get("num_threads"),
        "task_size": gdsstore.config.get("task_size"),
        "remote.max_attempts": gdsstore.config.get("remote.max_attempts"),
        "pipeline": zarr.config.get("codec_pipeline.path"),
        "zstd": zarr.config.get("codecs.zstd"),
        "buffer": zarr.config.get("buffer"),
    }


def assert_configured(states: dict[str, dict[str, Any]], n: int) -> None:
    assert len(states) == n
    for address, state in states.items():
        assert {k: state[k] for k in SETTINGS} == SETTINGS, address
        assert state["pipeline"] == PIPELINE_PATH, address
        assert state["zstd"] == "zarr.codecs.zstd.ZstdCodec", address  # arrays keep zarr's codec objects
        assert state["buffer"] == "zarr.buffer.cpu.Buffer", address  # buffers=False: host buffers


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                                  worker_dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.mark.slow
def test_plugin_reaches_every_worker_restarted_and_new_ones(client: Any) -> None:
    client.register_plugin(GDSStorePlugin(SETTINGS, gpu=True, buffers=False))
    before = client.run(worker_state)
    assert_configured(before, 2)

    client.restart()  # new worker processes: setup runs again in each
    after = client.run(worker_state)
    assert_configured(after, 2)
    assert {s["pid"] for s in after.values()}.isdisjoint({s["pid"] for s in before.values()})

    client.cluster.scale(3)  # a worker joining after registration
    client.wait_for_workers(3, timeout=120)
    assert_configured(client.run(worker_state), 3)
    client.cluster.scale(2)
    wait_for_exactly(client, 2)  # the next test's registration must not meet a worker being retired


def wait_for_exactly(client: Any, n: int) -> None:
    """Until the scheduler has ``n`` workers (a scale-down retires one in the background)."""
    import time

    for _ in range(600):
        if len(client.scheduler_info(n_workers=-1)["workers"]) == n:
            return
        time.sleep(0.1)
    raise AssertionError(f"the cluster did not settle at {n} workers")


@pytest.mark.slow
def test_open_on_client_rule(client: Any, tmp_path: Path) -> None:
    client.register_plugin(GDSStorePlugin(SETTINGS, gpu=True, buffers=False))
    data = np.arange(64 * 48, dtype="f4").reshape(64, 48)
    zarr.create_array(str(tmp_path / "a.zarr"), data=data, chunks=(16, 16),
                      compressors=[zarr.codecs.ZstdCodec()])

    def pipeline_on_worker(arr: Any) -> str:
        return type(arr._async_array.codec_pipeline).__name__

    ours = open_array(str(tmp_path / "a.zarr"))
    plain = zarr.open_array(str(tmp_path / "a.zarr"), mode="r")  # zarr's defaults on the client
    # the array keeps the pipeline it was opened with, whatever the workers are configured with
    assert client.submit(pipeline_on_worker, ours).result() == "GDSCodecPipeline"
    assert client.submit(pipeline_on_worker, plain).result() != "GDSCodecPipeline"
    x = da.from_zarr(ours)
    np.testing.assert_array_equal(x.sum(axis=0).compute(), data.sum(axis=0))
    np.testing.assert_array_equal(x[5:60:3, 7].compute(), data[5:60:3, 7])


def test_plugin_checks_settings_on_the_client() -> None:
    with pytest.raises(ValueError, match=r"unknown gdsstore settings \['num_thread'\]"):
        GDSStorePlugin({"num_thread": 4})
    with pytest.raises(ValueError, match="compat_mode"):
        GDSStorePlugin({"compat_mode": "sometimes"})
    plugin = GDSStorePlugin({"remote.concurrency": 8}, gpu=True)
    assert repr(plugin) == "GDSStorePlugin({'remote.concurrency': 8}, gpu=True, buffers=True)"


@pytest.mark.gpu
@pytest.mark.slow
def test_plugin_gpu_buffers_on_a_worker_process(tmp_path: Path, cp: Any) -> None:
    data = np.arange(256 * 256, dtype="f4").reshape(256, 256)
    zarr.create_array(str(tmp_path / "g.zarr"), data=data, chunks=(64, 64), compressors=[zarr.codecs.ZstdCodec()])
    with distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=2, dashboard_address=None,
                                  worker_dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        c.register_plugin(GDSStorePlugin({"num_threads": 4}, gpu=True))
        assert all(s["buffer"] == "zarr.buffer.gpu.Buffer" for s in c.run(worker_state).values())
        z = open_array(str(tmp_path / "g.zarr"))
        x = da.from_array(z, chunks=z.chunks, meta=cp.empty((0, 0), dtype=z.dtype))
        column_sums = x.sum(axis=0).compute()
        assert isinstance(column_sums, cp.ndarray)
        np.testing.assert_array_equal(column_sums.get(), data.sum(axis=0))
