"""GPU paths: nvCOMP bit-compatibility with numcodecs, the CRC-32C kernel, the pipeline into cupy."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import google_crc32c
import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec
from zarr.codecs.numcodecs import LZ4
from zarr.storage import LocalStore

import gdsstore
from gdsstore.engine.landing import AddressTable, land
from gdsstore.gpu import codecs as gcodecs
from gdsstore.gpu import kernels, nvcomp

pytestmark = pytest.mark.gpu

needs_nvcomp = pytest.mark.skipif(
    nvcomp.nvcomp_or_none() is None, reason="needs nvCOMP: pip install gdsstore[nvcomp]"
)


def _payloads() -> list[bytes]:
    rng = np.random.default_rng(3)
    smooth = np.round(np.sin(np.linspace(0, 50, 70_000)), 3).astype("f4").tobytes()
    return [smooth, rng.integers(0, 4, 300_000, dtype="u1").tobytes(), bytes(65536), os.urandom(1000)]


@needs_nvcomp
@pytest.mark.parametrize("fmt", ["zstd", "lz4"])
def test_nvcomp_reads_numcodecs_and_numcodecs_reads_nvcomp(cp: Any, fmt: str) -> None:
    nc = numcodecs.Zstd(level=3) if fmt == "zstd" else numcodecs.LZ4()
    payloads = _payloads()
    enc = [cp.asarray(np.frombuffer(bytes(nc.encode(p)), "u1")) for p in payloads]
    dec = gcodecs.gpu_decode_bytes(fmt, enc)
    assert [d.get().tobytes() for d in dec] == payloads
    ours = gcodecs.gpu_encode_bytes(fmt, [cp.asarray(np.frombuffer(p, "u1")) for p in payloads])
    assert [bytes(nc.decode(o.get().tobytes())) for o in ours] == payloads


@needs_nvcomp
def test_nvcomp_deflate_reads_numcodecs_gzip(cp: Any) -> None:
    payloads = _payloads()
    enc = [cp.asarray(np.frombuffer(bytes(numcodecs.GZip(level=5).encode(p)), "u1")) for p in payloads]
    dec = gcodecs.gpu_decode_bytes("gzip", enc)
    assert [d.get().tobytes() for d in dec] == payloads


@pytest.mark.parametrize("n", [0, 1, 5, 1023, 1024, 1025, 256 * 1024 + 3])
def test_crc32c_kernel(cp: Any, n: int) -> None:
    data = [os.urandom(n), os.urandom(n // 2 + 1)]
    got = kernels.crc32c_device([cp.asarray(np.frombuffer(d, "u1")) for d in data])
    assert [int(x) for x in got] == [google_crc32c.value(d) for d in data]


CHAINS: dict[str, Any] = {
    "none": None,
    "zstd": [ZstdCodec()],
    "zstd+crc32c": [ZstdCodec(), Crc32cCodec()],
    "gzip": [GzipCodec()],
    "lz4": [LZ4()],
    "blosc": [BloscCodec()],
}


@pytest.mark.parametrize("sharded", [False, True])
@pytest.mark.parametrize("name", sorted(CHAINS))
def test_pipeline_into_cupy_equals_zarr(cp: Any, tmp_path: Path, name: str, sharded: bool) -> None:
    data = np.round(np.random.default_rng(0).standard_normal((300, 260)), 2).astype("f4")
    kw: dict[str, Any] = {"shards": (128, 128)} if sharded else {}
    z = zarr.create_array(
        LocalStore(tmp_path / "a"),
        shape=data.shape,
        chunks=(64, 64),
        dtype="f4",
        compressors=CHAINS[name],
        fill_value=0.0,
        **kw,
    )
    z[:200] = data[:200]
    ref = np.zeros_like(data)
    ref[:200] = data[:200]
    with gdsstore.enable_gpu():
        ours = zarr.open_array(gdsstore.GDSStore(str(tmp_path / "a")), mode="r")
        with gdsstore.trace() as t:
            x = ours[:]
            y = ours[7:250:3, 5]
            w = ours[3:290:2, 1:250:3]
            o = ours.oindex[[0, 5, 130, 299], 3:200:7]  # device decode, zarr's scatter (no kernel)
        assert isinstance(x, cp.ndarray)
        np.testing.assert_array_equal(o.get(), ref[np.ix_([0, 5, 130, 299], range(3, 200, 7))])
        np.testing.assert_array_equal(x.get(), ref)
        np.testing.assert_array_equal(y.get(), ref[7:250:3, 5])
        np.testing.assert_array_equal(w.get(), ref[3:290:2, 1:250:3])
    if name in ("zstd", "zstd+crc32c", "gzip", "lz4", "blosc") and nvcomp.nvcomp_or_none() is not None:
        assert "gpu-decode" in t.routes, str(t)
    assert {"gpu-kernel", "gpu-copy"} & set(t.routes), str(t)  # the fast scatter ran
    if name in ("none", "zstd") and nvcomp.nvcomp_or_none() is not None:
        # stored bytes went straight to the GPU through the bounce ring: no host staging, no h2d step
        assert any("pinned bounce slots" in r for (op, _, r) in t.by_reason() if op == "read"), str(t)
    if name == "blosc" and nvcomp.nvcomp_or_none() is not None:  # zarr's default blosc: zstd frames
        assert any("blosc" in r for (_, route, r) in t.by_reason() if route == "gpu-decode"), str(t)


@pytest.mark.parametrize("name", ["zstd", "zstd+crc32c", "lz4", "gzip"])
def test_gpu_writes_read_by_plain_zarr(cp: Any, tmp_path: Path, name: str) -> None:
    data = np.round(np.random.default_rng(1).standard_normal((130, 70)), 2).astype("f4")
    with gdsstore.enable_gpu():
        z = zarr.create_array(
            gdsstore.GDSStore(str(tmp_path / "a")),
            shape=data.shape,
            chunks=(32, 32),
            dtype="f4",
            compressors=CHAINS[name],
            fill_value=0.0,
        )
        with gdsstore.trace() as t:
            z[:] = cp.asarray(data)
    np.testing.assert_array_equal(zarr.open_array(LocalStore(tmp_path / "a"), mode="r")[:], data)
    if name != "gzip" and nvcomp.nvcomp_or_none() is not None:
        assert "gpu-encode" in t.routes, str(t)


@pytest.mark.parametrize("piece", [4096, 1 << 20])
def test_land_local_on_device_equals_host(cp: Any, tmp_path: Path, piece: int) -> None:
    rng = np.random.default_rng(5)
    sizes = [0, 1, 100, 5000, (3 << 20) + 7, 64, 70_000]
    keys = []
    for i, n in enumerate(sizes):
        (tmp_path / f"k{i}").write_bytes(rng.integers(0, 255, n, dtype=np.uint8).tobytes())
        keys.append(f"k{i}")
    keys.insert(3, "missing")
    backend = gdsstore.GDSStore(str(tmp_path)).backend
    host = land(backend, AddressTable(keys), into="pinned")
    with gdsstore.config.set({"bounce_buffer_size": max(piece, 4096), "task_size": max(piece, 4096)}):
        dev = land(backend, AddressTable(keys), into=0)
    assert dev.dev is not None and dev.sizes.tolist() == host.sizes.tolist()
    for i in range(len(keys)):
        h = host.view(i)
        if h is None:
            continue
        a, n = int(dev.offsets[i]), int(dev.sizes[i])
        assert bytes(dev.dev[a : a + n].get()) == bytes(h), keys[i]
        assert bytes(dev.view(i)) == bytes(h)  # the lazy host copy too
