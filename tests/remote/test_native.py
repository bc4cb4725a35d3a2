"""The wave's native route (gdsstore/engine/remote/native.py): kvikio's libcurl pool for requests of known
size, on GPU machines. Every request it does not land right goes through gdsstore's own client, so each
fault of the fault server ends as it does without it: the right bytes, or an error naming the URL and the
reason, never wrong bytes. Off the GPU machine the route is off (kvikio needs the CUDA driver)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from servers.faults import FaultServer

import gdsstore
from gdsstore.engine import cuda
from gdsstore.engine.backend import Backend, ByteRange, backend_for
from gdsstore.engine.remote import native

from .conftest import payload


def host(n: int) -> tuple[np.ndarray, None]:
    return np.empty(n, dtype=np.uint8), None


@pytest.fixture
def objs(faults: FaultServer) -> dict[str, bytes]:
    rng = np.random.default_rng(11)
    data = {f"n/{i}": payload(int(rng.integers(1, 300_000)), seed=700 + i) for i in range(16)}
    faults.objects.update(data)
    return data


def wave_of(faults: FaultServer, mode: str = "ok", count: int | str = 0) -> Backend:
    return backend_for(f"http://127.0.0.1:{faults.port}/{mode}/{count}")


def sizes(objs: dict[str, bytes]) -> np.ndarray:
    return np.array([len(v) for v in objs.values()], dtype=np.int64)


def test_the_route_is_off_without_a_cuda_driver_or_when_turned_off() -> None:
    with gdsstore.config.set({"remote.native": False}):
        assert native.native_reader() is None
    if not cuda.gpu_available():
        assert native.native_reader() is None  # kvikio's remote I/O loads libcuda even for host buffers


needs_native = pytest.mark.skipif(native.native_reader() is None,
                                  reason="the native route needs kvikio and a CUDA driver (GPU machine)")


@pytest.mark.gpu
@needs_native
def test_known_sizes_land_through_kvikio(faults: FaultServer, objs: dict[str, bytes]) -> None:
    keys = [*objs, "n/missing"]
    expect = np.append(sizes(objs), 10)
    with gdsstore.trace() as t:
        w = wave_of(faults).get_many(keys, None, host, expect=expect)
    assert [None if w.view(i) is None else w.view(i).tobytes() for i in range(len(keys))] == [*objs.values(), None]
    assert any("kvikio" in reason for (_op, _route, reason) in t.by_reason()), str(t)
    # exact ranges (shard index entries) too
    brs = [ByteRange("range", 0, 1000), ByteRange("range", 5000, 9000)]
    w = wave_of(faults).get_many(["n/3", "n/3"], brs, host, exact=True)
    assert w.view(0).tobytes() == objs["n/3"][:1000] and w.view(1).tobytes() == objs["n/3"][5000:9000]


@pytest.mark.gpu
@needs_native
@pytest.mark.parametrize("mode", ["503", "reset", "truncate"])
def test_faults_recover_through_the_usual_client(faults: FaultServer, objs: dict[str, bytes], mode: str) -> None:
    with gdsstore.config.set({"remote.timeout": 2.0}):
        w = wave_of(faults, mode, 2).get_many(list(objs), None, host, expect=sizes(objs))
    assert [w.view(i).tobytes() for i in range(len(objs))] == list(objs.values())


@pytest.mark.gpu
@needs_native
@pytest.mark.parametrize("mode", ["ignore-range", "wrong-range", "short-range", "queue-extra"])
def test_lying_servers_never_give_wrong_bytes(faults: FaultServer, objs: dict[str, bytes], mode: str) -> None:
    big = max(objs, key=lambda k: len(objs[k]))
    brs = [ByteRange("range", 10, 2000), ByteRange("range", 50_000, 60_000)]
    for keys, ranges, kw in (([big, big], brs, {"exact": True}), (list(objs), None, {"expect": sizes(objs)})):
        try:
            w = wave_of(faults, mode, "always").get_many(keys, ranges, host, errors="return", **kw)
        except OSError:
            continue  # refused, with its reason: never wrong bytes
        for i, k in enumerate(keys):
            want = objs[k] if ranges is None else objs[k][ranges[i].start : ranges[i].end]
            assert (w.errors is not None and w.errors[i] is not None) or w.view(i).tobytes() == want, (mode, k)


@pytest.mark.gpu
@needs_native
def test_an_object_of_another_size_than_expected_is_refused(faults: FaultServer, objs: dict[str, bytes]) -> None:
    n = len(objs["n/2"])
    for wrong in (n - 1, n + 1):  # a prefix of a larger object, or a short one: never taken
        with pytest.raises(OSError, match="not the"):
            wave_of(faults).get_many(["n/2"], None, host, expect=np.array([wrong]))


@pytest.mark.gpu
@needs_native
def test_zarr_array_of_uncompressed_chunks_over_http_is_read_natively(faults: FaultServer, tmp_path: Any) -> None:
    import zarr

    data = np.arange(64 * 64, dtype="f4").reshape(64, 64)
    z = zarr.create_array(str(tmp_path / "a.zarr"), shape=data.shape, chunks=(16, 16), dtype="f4", compressors=None)
    z[...] = data
    for p in (tmp_path / "a.zarr").rglob("*"):
        if p.is_file():
            faults.objects[f"a.zarr/{p.relative_to(tmp_path / 'a.zarr')}"] = p.read_bytes()
    with gdsstore.enable_gpu(), gdsstore.trace() as t:
        got = zarr.open_array(gdsstore.GDSStore(f"http://127.0.0.1:{faults.port}/ok/0/a.zarr"), mode="r")[...]
    np.testing.assert_array_equal(cuda_get(got), data)
    assert any("kvikio" in reason for (_op, _route, reason) in t.by_reason()), str(t)


def cuda_get(a: Any) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)
