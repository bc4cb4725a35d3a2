"""blosc frames decoded by gdsstore (gdsstore/gpu/blosc.py), against numcodecs' Blosc.

CPU tests run the parser and the batch on numpy buffers (the same code the GPU runs, with the host's
stream decoders in place of nvCOMP); GPU tests read zarr v2 and v3 blosc arrays under
``gdsstore.enable_gpu()`` and compare with zarr's host read."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st
from numcodecs import Blosc
from zarr.codecs import BloscCodec

import gdsstore
from gdsstore.engine.landing import Landed
from gdsstore.errors import ChunkDecodeError
from gdsstore.gpu import blosc, nvcomp
from gdsstore.gpu.decode import CodecChain

HOST_COMPRESSORS = ("lz4", "zstd", "zlib")  # the numpy batch's stream decoders (blosclz has none)


def _data(ts: int, size: int, seed: int = 0) -> np.ndarray:
    """``size`` bytes of elements of ``ts`` bytes that compress (small integers), any tail random."""
    rng = np.random.default_rng(seed)
    body = rng.integers(0, 40, (size // ts, ts)).astype(np.uint8)
    body[:, 1:] = 0  # high bytes zero: shuffle pays, and each plane compresses its own way
    return np.concatenate([body.reshape(-1), rng.integers(0, 256, size % ts).astype(np.uint8)])


def _encode(raw: np.ndarray, **kw: Any) -> np.ndarray:
    return np.frombuffer(Blosc(**kw).encode(raw), np.uint8)


def _decode_all(frames: list[np.ndarray], nbytes: list[int], **kw: Any) -> Landed:
    """The frames packed into one buffer at odd offsets (stream payloads land unaligned) and decoded."""
    parts, offs, pos = [], [], 0
    for f in frames:
        parts += [np.zeros(3, np.uint8), f]
        offs.append(pos + 3)
        pos += 3 + f.size
    buf = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    return blosc.decode_frames(
        buf, np.array(offs), np.array([f.size for f in frames]), np.array(nbytes), compressors=HOST_COMPRESSORS, **kw
    )


# -- the frame parser and the numpy batch against numcodecs -------------------------------------------


@pytest.mark.parametrize("cname", ["lz4", "lz4hc", "zstd", "zlib", "blosclz"])
@pytest.mark.parametrize("shuffle", [Blosc.NOSHUFFLE, Blosc.SHUFFLE, Blosc.BITSHUFFLE])
def test_batch_equals_numcodecs(cname: str, shuffle: int) -> None:
    # typesizes 1..8 (and 3: blocks that are no multiple of it), sizes off every block size, small
    # block sizes (many blocks, a leftover one) and the automatic one
    cases = list(itertools.product([1, 2, 3, 4, 8], [1, 1000, 65_536 + 13, 300_001], [0, 1024]))
    raws = [_data(ts, size, seed=k) for k, (ts, size, _) in enumerate(cases)]
    frames = [
        _encode(r, cname=cname, clevel=5, shuffle=shuffle, blocksize=bs, typesize=ts)
        for r, (ts, _, bs) in zip(raws, cases)
    ]
    dec = _decode_all(frames, [r.size for r in raws])
    for k, (r, f) in enumerate(zip(raws, frames)):
        got = dec.item(k)
        if cname == "blosclz" and not struct.unpack_from("<B", f.tobytes(), 2)[0] & 0x2:
            assert got is None and "blosclz" in (dec.absent_reason or "")  # left for numcodecs, with the reason
            continue
        assert got is not None, cases[k]
        np.testing.assert_array_equal(got, np.frombuffer(Blosc().decode(f), np.uint8), err_msg=str(cases[k]))
        np.testing.assert_array_equal(got, r)


def test_memcpyed_and_empty_frames() -> None:
    rng = np.random.default_rng(5)
    noise = rng.integers(0, 256, 50_000).astype(np.uint8)  # incompressible: blosc stores it memcpyed
    frames = [_encode(noise, cname="lz4", shuffle=Blosc.SHUFFLE, typesize=4), _encode(np.zeros(0, np.uint8))]
    h = blosc.read_headers(np.stack([f[:16] for f in frames]), np.array([f.size for f in frames]))
    assert bool(h.memcpyed[0]) and int(h.nbytes[1]) == 0
    dec = _decode_all(frames, [noise.size, 0])
    np.testing.assert_array_equal(dec.item(0), noise)
    assert dec.item(1).size == 0


def test_streams_stored_raw_are_copied() -> None:
    # random planes beside compressible ones: some split streams do not compress and are stored raw
    rng = np.random.default_rng(6)
    raw = np.stack([rng.integers(0, 256, 40_000), np.zeros(40_000, int)], axis=1).astype(np.uint8).reshape(-1)
    f = _encode(raw, cname="lz4", shuffle=Blosc.SHUFFLE, typesize=2, blocksize=8192)
    h = blosc.read_headers(f[None, :16], np.array([f.size]))
    st = blosc.plan_streams(f, np.array([0]), h)
    assert st.stored.any() and (~st.stored).any()
    np.testing.assert_array_equal(_decode_all([f], [raw.size]).item(0), raw)


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(0, 20_000),
    ts=st.sampled_from([1, 2, 4, 8, 16, 17]),
    shuffle=st.sampled_from([0, 1, 2]),
    cname=st.sampled_from(["lz4", "zstd", "zlib"]),
    blocksize=st.sampled_from([0, 128, 256, 1000, 4096]),
    seed=st.integers(0, 2**16),
)
def test_property_matches_numcodecs(size: int, ts: int, shuffle: int, cname: str, blocksize: int, seed: int) -> None:
    raw = _data(ts, size, seed)
    f = _encode(raw, cname=cname, shuffle=shuffle, blocksize=blocksize, typesize=ts)
    got = _decode_all([f], [size]).item(0)
    np.testing.assert_array_equal(got, raw)
    if size:  # numcodecs refuses to decode the empty frame it wrote (c-blosc returns 0 bytes)
        np.testing.assert_array_equal(got, np.frombuffer(Blosc().decode(f), np.uint8))


def _frame() -> tuple[np.ndarray, np.ndarray]:
    raw = _data(4, 100_000)
    return raw, _encode(raw, cname="lz4", shuffle=Blosc.SHUFFLE, typesize=4, blocksize=8192)


def _patched(f: np.ndarray, at: int, fmt: str, value: int) -> np.ndarray:
    g = f.copy()
    g[at : at + struct.calcsize(fmt)] = np.frombuffer(struct.pack(fmt, value), np.uint8)
    return g


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda f: f[:10], "truncated"),
        (lambda f: f[: f.size - 7], "stored"),
        (lambda f: _patched(f, 0, "<B", 3), "format version 3"),
        (lambda f: _patched(f, 1, "<B", 2), "compressor format version"),
        (lambda f: _patched(f, 2, "<B", 0x29), "flags"),
        (lambda f: _patched(f, 2, "<B", 0xE1), "compressor code"),
        (lambda f: _patched(f, 4, "<i", 99_999), "expected 100000"),
        (lambda f: _patched(f, 8, "<i", 0), "block size"),
        (lambda f: _patched(f, 16, "<i", 1 << 30), "stream offset"),
        (lambda f: _patched(f, int(np.frombuffer(f[16:20].tobytes(), "<i4")[0]), "<i", 1 << 30), "overruns"),
    ],
)
def test_corrupt_frames_raise_naming_the_chunk(make: Any, match: str) -> None:
    raw, f = _frame()
    bad = make(f)
    with pytest.raises(ChunkDecodeError, match=match) as e:
        _decode_all([f, bad], [raw.size, raw.size], where=lambda i: f"chunk c/{i}")
    assert "chunk c/1" in str(e.value)


def test_corrupt_stream_raises_naming_the_chunk() -> None:
    raw, f = _frame()
    first = int(np.frombuffer(f[16:20].tobytes(), "<i4")[0])
    bad = _patched(f, first, "<i", int(np.frombuffer(f[first : first + 4].tobytes(), "<i4")[0]) - 9)
    with pytest.raises(ChunkDecodeError, match="chunk c/0"):
        _decode_all([bad], [raw.size], where=lambda i: f"chunk c/{i}")


# -- zarr arrays through the pipeline (host buffers here; GPU below) ---------------------------------


def _v2(root: Path, data: np.ndarray, cname: str, **kw: Any) -> None:
    z = zarr.create_array(str(root), shape=data.shape, chunks=(64, 48), dtype=data.dtype, zarr_format=2,
                          compressors=Blosc(cname=cname, shuffle=Blosc.SHUFFLE), fill_value=0, **kw)
    z[:] = data


def test_v2_codec_splits_into_a_blosc_stage(tmp_path: Path) -> None:
    data = np.arange(130 * 100, dtype="<f4").reshape(130, 100)
    _v2(tmp_path / "a", data, "lz4")
    from zarr.codecs._v2 import V2Codec

    z = zarr.open_array(str(tmp_path / "a"), mode="r")
    chain = CodecChain.of([V2Codec(filters=None, compressor=z.compressors[0])])  # type: ignore[arg-type]
    assert chain.bb_formats == ("blosc",)
    with gdsstore.enable_gpu(buffers=False), gdsstore.trace() as t:  # host buffers: batched reads, numcodecs
        ours = zarr.open_array(gdsstore.GDSStore(str(tmp_path / "a")), mode="r")
        np.testing.assert_array_equal(ours[:], data)
        np.testing.assert_array_equal(ours[5:129:3, 97:], data[5:129:3, 97:])
    assert "cpu-codec" in t.routes


# -- GPU -------------------------------------------------------------------------------------------

needs_nvcomp = pytest.mark.skipif(nvcomp.nvcomp_or_none() is None, reason="needs nvCOMP: pip install gdsstore[nvcomp]")


@pytest.mark.gpu
@needs_nvcomp
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize(("cname", "shuffle"), [("lz4", "shuffle"), ("zstd", "shuffle"), ("lz4", "bitshuffle"),
                                                ("zstd", "noshuffle"), ("blosclz", "shuffle")])
@pytest.mark.parametrize("order", ["C", "F"])
def test_gpu_read_equals_zarr(cp: Any, tmp_path: Path, fmt: int, cname: str, shuffle: str, order: str) -> None:
    if fmt == 3 and order == "F":
        pytest.skip("zarr v3 arrays have no memory order")
    rng = np.random.default_rng(0)
    data = np.round(rng.standard_normal((300, 257)), 2).astype("<f4")  # edge chunks in both axes
    shuffles = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
    comp: Any = (Blosc(cname=cname, shuffle=shuffles[shuffle]) if fmt == 2
                 else BloscCodec(cname=cname, shuffle=shuffle))  # type: ignore[arg-type]
    kw: dict[str, Any] = {"order": order, "zarr_format": 2} if fmt == 2 else {"zarr_format": 3}
    z = zarr.create_array(str(tmp_path / "a"), shape=data.shape, chunks=(64, 48), dtype="<f4",
                          compressors=comp, fill_value=0, **kw)
    z[:250] = data[:250]
    ref: Any = zarr.open_array(str(tmp_path / "a"), mode="r")[:]
    with gdsstore.enable_gpu():
        ours: Any = zarr.open_array(gdsstore.GDSStore(str(tmp_path / "a")), mode="r")
        with gdsstore.trace() as t:
            x = ours[:]
            y = ours[7:299:3, 250:]
            o = ours.oindex[[0, 5, 130, 299], 3:200:7]  # zarr's scatter (no kernel)
    assert isinstance(x, cp.ndarray)
    np.testing.assert_array_equal(x.get(), ref)
    np.testing.assert_array_equal(y.get(), ref[7:299:3, 250:])
    np.testing.assert_array_equal(o.get(), ref[np.ix_([0, 5, 130, 299], range(3, 200, 7))])
    rows = t.by_reason()
    if cname == "blosclz":
        assert any("blosclz" in r for (_, route, r) in rows if route == "cpu-codec"), str(t)
    else:
        assert any("blosc" in r for (op, route, r) in rows if route == "gpu-decode" and op == "decode"), str(t)
        assert not any(route == "cpu-codec" for (_, route, _) in rows), str(t)


@pytest.mark.gpu
@needs_nvcomp
def test_gpu_corrupt_chunk_names_its_key(cp: Any, tmp_path: Path) -> None:
    data = np.arange(128 * 96, dtype="<i4").reshape(128, 96)
    _v2(tmp_path / "a", data, "lz4")
    p = tmp_path / "a" / "1.1"
    p.write_bytes(p.read_bytes()[:-5])
    with gdsstore.enable_gpu():
        ours = zarr.open_array(gdsstore.GDSStore(str(tmp_path / "a")), mode="r")
        with pytest.raises(ChunkDecodeError, match=r"1\.1"):
            ours[:]


@pytest.mark.gpu
@needs_nvcomp
def test_gpu_codec_class_decodes_device_buffers(cp: Any) -> None:
    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.core.buffer import gpu
    from zarr.core.dtype import Float32

    from gdsstore.gpu.codecs import BloscCodec as GPUBlosc

    raw = _data(4, 64 * 64 * 4).view("<f4")
    frames = [Blosc(cname=c, shuffle=1, typesize=4).encode(raw) for c in ("lz4", "zstd", "blosclz")]
    spec = ArraySpec(shape=(64, 64), dtype=Float32(), fill_value=0, config=ArrayConfig.from_dict({}),
                     prototype=gpu.buffer_prototype)
    codec = GPUBlosc(typesize=4, shuffle="shuffle")
    with gdsstore.trace() as t:
        out = codec._decode_many([gpu.Buffer.from_bytes(f) for f in frames], [spec] * 3)
    for o in out:
        np.testing.assert_array_equal(cp.asnumpy(o.as_array_like()).view("<f4"), raw)
    assert {"gpu-decode", "cpu-codec"} <= set(t.routes), str(t)
