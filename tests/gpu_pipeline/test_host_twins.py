"""The GPU path's decisions, run on the CPU: which chunks a GPU write publishes or deletes, where a device
read decodes, the crc32c check of device reads, and ``enable_gpu()`` without a device.

The GPU tests (``pytest -m gpu``) run these paths on a device; CI has none. Here CuPy is replaced by host
memory, as in ``test_decode_raw.py``: a "device array" is a numpy array that says it is device memory
(``__cuda_array_interface__``) and copies to the host with ``.get()``; a kernel (crc32c) is replaced by
the library the CPU path uses (``google_crc32c``). Everything else (planning, packing, emptiness,
routing, publishing to a real directory) is gdsstore's own code. Each expected value is computed here,
with numpy, from the chunks themselves.
"""

from __future__ import annotations

import math
import sys
import types
from pathlib import Path
from typing import Any

import google_crc32c
import numpy as np
import pytest
from zarr.codecs import BytesCodec, Crc32cCodec, GzipCodec, TransposeCodec, ZstdCodec
from zarr.core.chunk_utils import ChunkTransform

import gdsstore
from gdsstore.engine import cuda, landing
from gdsstore.engine.landing import Landed
from gdsstore.gpu import codecs as gcodecs
from gdsstore.gpu import decode as gdecode
from gdsstore.gpu import execute as gexec
from gdsstore.gpu import kernels, nvcomp, staging
from gdsstore.gpu import pipeline as gpipe
from gdsstore.gpu import write as gwrite
from gdsstore.policy import Decision

CHUNK = (4, 6)


class DeviceArray(np.ndarray):
    """Host memory standing in for a CuPy array: it says it is device memory and copies to the host
    with ``get()``, as CuPy's arrays do."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.__array_interface__

    @property
    def device(self) -> Any:
        return types.SimpleNamespace(id=0)

    def get(self) -> np.ndarray:
        return np.array(self)


def _on_device(a: Any) -> DeviceArray:
    return np.asarray(a).view(DeviceArray)


def _host_crc32c(chunks: list[Any]) -> np.ndarray:
    """What the crc32c kernel returns: the CRC-32C of each byte array."""
    return np.array([google_crc32c.value(bytes(np.asarray(c))) for c in chunks], dtype=np.uint32)


def _device_chunk(data: np.ndarray) -> Any:
    """A zarr NDBuffer over a device chunk, as the write path gets it."""
    from zarr.core.buffer.cpu import NDBuffer

    device_data: Any = _on_device(data)
    return NDBuffer(device_data)


@pytest.fixture
def fake_device(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """CuPy as host memory, one visible "GPU", kernels on the CPU; counts the crc32c kernel's launches."""
    calls = {"crc32c": 0}

    def crc32c_device(chunks: list[Any]) -> np.ndarray:
        calls["crc32c"] += 1
        return _host_crc32c(chunks)

    stream = types.SimpleNamespace(synchronize=lambda: None)
    fake_cp = types.SimpleNamespace(
        ndarray=DeviceArray,
        uint8=np.uint8,
        empty=lambda n, dtype=np.float64: np.empty(n, dtype).view(DeviceArray),
        asarray=_on_device,
        stack=lambda xs: _on_device(np.stack(xs)),
        isnan=np.isnan,
        concatenate=np.concatenate,
        cuda=types.SimpleNamespace(get_current_stream=lambda: stream),
    )
    monkeypatch.setattr(cuda, "cupy_or_none", lambda: fake_cp)
    monkeypatch.setattr(cuda, "gpu_available", lambda: True)
    monkeypatch.setattr(kernels, "crc32c_device", crc32c_device)
    # pageable staging (pinned memory needs the real CuPy)
    monkeypatch.setattr(landing, "alloc_host", lambda total, pinned: (np.empty(total, np.uint8), None))
    return calls


def _spec(fill: float, keep_empty: bool = False, shape: tuple[int, ...] = CHUNK) -> Any:
    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.dtype import Float32

    return ArraySpec(
        shape=shape,
        dtype=Float32(),
        fill_value=fill,
        config=ArrayConfig.from_dict({"write_empty_chunks": keep_empty}),
        prototype=default_buffer_prototype(),
    )


def _chunks(fill: float) -> list[np.ndarray]:
    """All fill; data; data but one fill element; all fill; zeros (empty only where the fill is 0); data."""
    rng = np.random.default_rng(3)
    data = [np.round(rng.standard_normal(CHUNK), 2).astype("f4") + 100 for _ in range(3)]
    one_off = np.full(CHUNK, fill, "f4")
    one_off[2, 3] = 5
    return [np.full(CHUNK, fill, "f4"), data[0], one_off, np.full(CHUNK, fill, "f4"), np.zeros(CHUNK, "f4"), data[2]]


# -- GPU writes: what is published, what is deleted ----------------------------------------------------------


@pytest.mark.parametrize("fill", [0.0, 7.0, math.nan])
@pytest.mark.parametrize("crc", [False, True])
@pytest.mark.parametrize("keep_empty", [False, True])
@pytest.mark.parametrize("transpose", [False, True])
def test_gpu_write_publishes_chunks_with_data_and_deletes_empty_ones(
    fake_device: dict[str, int], tmp_path: Path, fill: float, crc: bool, keep_empty: bool, transpose: bool
) -> None:
    """zarr's rule (``write_empty_chunks``): a chunk all of the fill value (NaN included) is deleted, every
    other chunk is stored; the stored bytes are the chunk's raw bytes (and their crc32c). Chunks that the
    ``bytes`` codec alone serializes are packed into one buffer and checked there; others (a transpose
    first) chunk by chunk."""
    array_part = (TransposeCodec(order=(1, 0)), BytesCodec()) if transpose else (BytesCodec(),)
    transform = ChunkTransform(codecs=(*array_part, *([Crc32cCodec()] if crc else [])))
    chunks = _chunks(fill)
    spec = _spec(fill, keep_empty)
    backend = gdsstore.GDSStore(str(tmp_path)).backend
    keys = [f"c/{i}" for i in range(len(chunks))]
    for k in keys:  # an older version of every chunk: an empty chunk's is deleted
        (tmp_path / k).parent.mkdir(exist_ok=True)
        (tmp_path / k).write_bytes(b"stale")
    batch: list[Any] = [(types.SimpleNamespace(path=k), spec, (), (), True) for k in keys]
    publish = gwrite._write_chunks(transform, batch, [_device_chunk(c) for c in chunks], backend, True)
    assert publish is not None
    publish()
    for k, c in zip(keys, chunks):
        empty = not keep_empty and np.array_equal(c, np.full(CHUNK, fill, "f4"), equal_nan=True)
        if empty:
            assert not (tmp_path / k).exists(), k
            continue
        raw = (c.T if transpose else c).tobytes()  # C order after the transpose
        want = raw + (np.uint32(google_crc32c.value(raw)).astype("<u4").tobytes() if crc else b"")
        assert (tmp_path / k).read_bytes() == want, k
    assert fake_device["crc32c"] == (1 if crc else 0)  # one kernel launch for the batch


def test_gpu_write_of_only_empty_chunks_publishes_nothing(fake_device: dict[str, int], tmp_path: Path) -> None:
    transform = ChunkTransform(codecs=(BytesCodec(),))
    backend = gdsstore.GDSStore(str(tmp_path)).backend
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "0").write_bytes(b"stale")
    batch: list[Any] = [(types.SimpleNamespace(path=f"c/{i}"), _spec(0.0), (), (), True) for i in range(3)]
    publish = gwrite._write_chunks(transform, batch, [_device_chunk(np.zeros(CHUNK, "f4"))] * 3, backend, True)
    assert publish is not None
    publish()
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == []


# -- device reads: where the bytes-to-bytes stage decodes ---------------------------------------------------


@pytest.fixture
def gpu_codecs(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """nvCOMP "available" for every format, a device with 80 GiB free, staging copied on the host;
    counts nvCOMP calls."""
    calls = {"decode": 0}

    def decode_into(fmt: str, src: Any, s_off: list[int], s_len: list[int], out: Any, o_off: list[int],
                    o_len: list[int]) -> None:
        import numcodecs

        calls["decode"] += 1
        for a, m, b, n in zip(s_off, s_len, o_off, o_len):
            out[b : b + n] = np.frombuffer(numcodecs.Zstd().decode(bytes(src[a : a + m])), np.uint8)

    runtime = types.SimpleNamespace(memGetInfo=lambda: (80 << 30, 80 << 30))
    fake_cp = types.SimpleNamespace(empty=np.empty, asarray=np.asarray, uint8=np.uint8,
                                    cuda=types.SimpleNamespace(runtime=runtime))
    monkeypatch.setattr(gcodecs, "_cupy", lambda: fake_cp)
    monkeypatch.setattr(staging, "to_device", lambda st: st.host.copy())
    monkeypatch.setattr(nvcomp, "route_codec", lambda fmt, **kw: Decision("gpu-decode", "test"))
    monkeypatch.setattr(nvcomp, "decode_batch_into", decode_into)
    monkeypatch.setattr(kernels, "crc32c_device", _host_crc32c)
    return calls


def _chain(*bb: Any, ab: Any = None) -> gdecode.CodecChain:
    return gdecode.CodecChain.of(gpipe.GDSCodecPipeline.from_codecs([ab or BytesCodec(), *bb]).codecs)


MiB = 1 << 20


@pytest.mark.parametrize(
    ("small", "few", "sizes", "on_cpu"),
    [
        (8 * MiB, 0, [MiB] * 8, "small read (8192 KiB, gpu.host_decode_bytes): decoded on the CPU"),
        (8 * MiB, 0, [MiB] * 8 + [1], None),  # one byte more than gpu.host_decode_bytes
        (0, 65, [MiB] * 64, "few chunks per nvCOMP call (64 of 1024 KiB"),  # the whole read: one call of 64
        (0, 64, [MiB] * 64, None),
        (0, 0, [MiB] * 64, None),  # gpu.host_decode_chunks 0: off
        (0, 0, [], "small read (0 KiB"),  # nothing to read
    ],
)
def test_device_reads_decode_small_reads_and_few_chunks_per_call_on_the_cpu(
    gpu_codecs: dict[str, int], small: int, few: int, sizes: list[int], on_cpu: str | None
) -> None:
    chain = _chain(ZstdCodec(level=1))
    with gdsstore.config.set({"gpu.host_decode_bytes": small, "gpu.host_decode_chunks": few}):
        got = gexec.decode_side(chain, sizes)
    if on_cpu is None:
        assert got.host_reason is None and got.device_plan()[0] == "zstd"
    else:
        assert got.host_reason is not None and got.host_reason.startswith(on_cpu), got.host_reason
        assert got.device_plan() == ("-", False, got.host_reason)


def test_few_chunks_per_call_moves_only_zstd_to_the_cpu(gpu_codecs: dict[str, int]) -> None:
    """gzip chunks decode on the GPU however few there are (one nvCOMP call is not one chunk's decode)."""
    with gdsstore.config.set({"gpu.host_decode_bytes": 0, "gpu.host_decode_chunks": 10_000}):
        assert gexec.decode_side(_chain(GzipCodec(level=1)), [MiB] * 4).host_reason is None
        assert gexec.decode_side(_chain(ZstdCodec(level=1)), [MiB] * 4).host_reason is not None


def _stage(stored: list[bytes | None]) -> Landed:
    return landing.from_host_buffers(
        [None if b is None else np.frombuffer(b, np.uint8) for b in stored], pinned=False
    )


def test_a_chain_routed_to_the_cpu_decodes_there(gpu_codecs: dict[str, int]) -> None:
    import numcodecs

    raws = [np.arange(48, dtype="f4").reshape(CHUNK[0] * 2, CHUNK[1]) * k for k in range(1, 4)]
    stored: list[bytes | None] = [bytes(numcodecs.Zstd(level=1).encode(r.tobytes())) for r in raws]
    stored[1] = None  # missing
    spec = _spec(0.0, shape=(CHUNK[0] * 2, CHUNK[1]))
    for chain, nvcomp_calls in ((_chain(ZstdCodec(level=1)), 1), (_chain(ZstdCodec(level=1)).on_host("test"), 0)):
        gpu_codecs["decode"] = 0
        raw = gdecode.decode_on_device(chain, [spec] * 3, _stage(stored))
        assert raw.item(1) is None
        for i in (0, 2):
            assert bytes(raw.item(i)) == raws[i].tobytes()
        assert gpu_codecs["decode"] == nvcomp_calls


def test_device_reads_check_every_crc32c(gpu_codecs: dict[str, int]) -> None:
    """crc32c on the device: intact chunks decode to their bytes; one flipped byte, or a chunk too
    short to hold a checksum, is an error naming the chunk, never bytes."""
    raws = [(np.arange(24, dtype="f4").reshape(CHUNK) * k).tobytes() for k in range(1, 5)]
    stored = [r + np.uint32(google_crc32c.value(r)).astype("<u4").tobytes() for r in raws]
    chain = _chain(Crc32cCodec())
    raw = gdecode.decode_on_device(chain, [_spec(0.0)] * 4, _stage(list(stored)))
    assert [bytes(raw.item(i)) for i in range(4)] == raws
    corrupt = bytearray(stored[2])
    corrupt[5] ^= 0x10
    with pytest.raises(ValueError, match=r"crc32c mismatch in chunk 2: stored 0x[0-9a-f]{8}, computed"):
        gdecode.decode_on_device(chain, [_spec(0.0)] * 4, _stage([*stored[:2], bytes(corrupt), stored[3]]))
    with pytest.raises(ValueError, match="chunk 1 of 3 bytes holds no crc32c"):
        gdecode.decode_on_device(chain, [_spec(0.0)] * 2, _stage([stored[0], b"abc"]))


# -- enable_gpu() without a device ----------------------------------------------------------------------------


def _fake_cupy(device_count: Any) -> types.ModuleType:
    def get_device_count() -> int:
        if isinstance(device_count, BaseException):
            raise device_count
        return int(device_count)

    mod = types.ModuleType("cupy")
    mod.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_device_count))  # type: ignore[attr-defined]
    return mod


@pytest.mark.parametrize("count", [0, RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")])
def test_enable_gpu_without_a_device_raises_with_the_fix(monkeypatch: pytest.MonkeyPatch, count: Any) -> None:
    import zarr

    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(count))
    before = zarr.config.get("buffer")
    with pytest.raises(gdsstore.GPUUnavailableError, match=r"CuPy sees no CUDA device .*enable_gpu\(buffers=False\)"):
        gdsstore.enable_gpu()
    assert zarr.config.get("buffer") == before  # nothing switched


def test_enable_gpu_with_a_device_switches_zarrs_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    import zarr

    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(1))
    with gdsstore.enable_gpu():
        assert zarr.config.get("buffer") == "zarr.buffer.gpu.Buffer"
        assert zarr.config.get("codec_pipeline.path") == "gdsstore.gpu.pipeline.GDSCodecPipeline"


def _blosc_chunks(shape: tuple[int, int]) -> tuple[list[bytes], list[bytes | None]]:
    """Raw chunks and their blosc frames: lz4 byte-shuffled, zstd bit-shuffled, lz4 unshuffled, blosclz (no
    nvCOMP decoder: left for the CPU), and a missing one."""
    from numcodecs import Blosc

    rng = np.random.default_rng(11)
    raws = [np.round(rng.standard_normal(shape), 1).astype("f4").tobytes() for _ in range(5)]
    kinds = [("lz4", Blosc.SHUFFLE), ("zstd", Blosc.BITSHUFFLE), ("lz4", Blosc.NOSHUFFLE), ("blosclz", Blosc.SHUFFLE)]
    stored: list[bytes | None] = [bytes(Blosc(cname=c, shuffle=s, typesize=4).encode(r)) for (c, s), r in zip(kinds, raws)]
    return raws, [*stored, None]


def test_a_window_of_blosc_frames_decodes_in_the_batch_and_on_the_cpu(
    gpu_codecs: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A device read of blosc chunks: frames of nvCOMP's compressors decode in the batch (its groups' buffers
    taken into the window's Landed), a blosclz frame on the CPU with its reason; every chunk's bytes and
    address, the missing one absent."""
    from zarr.codecs import BloscCodec

    # the batch on the "device"; a host buffer (the CPU's route for the blosclz frame) through numcodecs
    monkeypatch.setattr(nvcomp, "route_codec", lambda fmt, device=False, **kw: Decision(
        "gpu-decode" if device else "cpu-codec", "test"))
    shape = (64, 64)
    raws, stored = _blosc_chunks(shape)
    with gdsstore.trace() as t:
        raw = gdecode.decode_on_device(_chain(BloscCodec(cname="lz4")), [_spec(0.0, shape=shape)] * 5, _stage(stored))
    assert isinstance(raw, Landed) and raw.absent.tolist() == [4] and raw.item(4) is None
    assert [bytes(raw.item(i)) for i in range(4)] == raws[:4]
    ptrs = raw.ptrs()
    assert ptrs[4] == 0 and all(int(ptrs[i]) == raw.item(i).ctypes.data for i in range(4))
    rows = {(ev.route, ev.reason) for ev in t.events if ev.op == "decode"}
    assert ("cpu-codec", "blosc frames compressed with blosclz: no nvCOMP decoder") in rows, rows
    assert any(route == "gpu-decode" for route, _ in rows), rows


def test_the_blosc_codec_decodes_device_buffers_as_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """zarr's blosc codec on device buffers (gdsstore's BloscCodec): one batch for the frames of nvCOMP's
    compressors, numcodecs for the blosclz one, each chunk its own bytes in the spec's buffers."""
    from zarr.codecs import BloscCodec
    from zarr.core.buffer.cpu import Buffer

    fake_cp = types.SimpleNamespace(asarray=_on_device, concatenate=lambda xs: _on_device(np.concatenate(xs)))
    monkeypatch.setattr(gcodecs, "_cupy", lambda: fake_cp)
    monkeypatch.setattr(nvcomp, "route_codec", lambda fmt, **kw: Decision("gpu-decode", "test"))
    shape = (64, 64)
    raws, stored = _blosc_chunks(shape)
    codec = gcodecs.upgrade(BloscCodec(cname="lz4"))
    assert isinstance(codec, gcodecs.BloscCodec)
    bufs = [Buffer(_on_device(np.frombuffer(s, np.uint8))) for s in stored if s is not None]
    with gdsstore.trace() as t:
        got = codec._decode_many(bufs, [_spec(0.0, shape=shape)] * 4)
    assert [bytes(np.asarray(g.as_numpy_array())) for g in got] == raws[:4]
    rows = [(ev.route, ev.reason, ev.nbytes) for ev in t.events if ev.op == "decode"]
    nbytes = len(raws[0])
    assert ("gpu-decode", "test", 3 * nbytes) in rows, rows  # the batch's bytes: the three frames it decoded
    assert ("cpu-codec", "blosc frames compressed with blosclz: no nvCOMP decoder", nbytes) in rows, rows
