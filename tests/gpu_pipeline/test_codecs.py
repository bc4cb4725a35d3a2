"""gdsstore's codecs against zarr's own, both directions, for every codec; framing and CRC helpers."""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path
from typing import Any

import google_crc32c
import numcodecs
import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, TransposeCodec, ZstdCodec
from zarr.codecs.numcodecs import LZ4, Zstd
from zarr.storage import LocalStore

import gdsstore
from gdsstore.gpu import codecs as gcodecs
from gdsstore.gpu import kernels, nvcomp

DATA = np.random.default_rng(7).standard_normal((37, 29)).astype("f4")
DATA[::3] = 0  # some compressibility, some all-fill chunks

CHAINS: dict[str, dict[str, Any]] = {
    "zstd": {"compressors": [ZstdCodec(level=3)]},
    "zstd-checksum": {"compressors": [ZstdCodec(level=1, checksum=True)]},
    "gzip": {"compressors": [GzipCodec(level=5)]},
    "crc32c": {"compressors": [Crc32cCodec()]},
    "zstd+crc32c": {"compressors": [ZstdCodec(), Crc32cCodec()]},
    "numcodecs.zstd": {"compressors": [Zstd(level=2)]},
    "numcodecs.lz4": {"compressors": [LZ4()]},
    "blosc": {"compressors": [BloscCodec(cname="zstd", shuffle="shuffle")]},
    "none": {"compressors": None},
    "transpose+big-endian": {
        "filters": [TransposeCodec(order=(1, 0))],
        "serializer": BytesCodec(endian="big"),
        "compressors": [ZstdCodec()],
    },
    "sharded-gzip": {"shards": (16, 20), "compressors": [GzipCodec()]},
}


def _write(path: Path, kw: dict[str, Any]) -> None:
    z = zarr.create_array(
        LocalStore(path), shape=DATA.shape, chunks=(8, 10), dtype="f4", fill_value=0.0, **kw
    )
    z[:] = DATA


def _read(path: Path) -> np.ndarray:
    return np.asarray(zarr.open_array(LocalStore(path), mode="r")[:])


def _codec_classes(path: Path) -> set[str]:
    z = zarr.open_array(LocalStore(path), mode="r")
    return {type(c).__module__ for c in z._async_array.codec_pipeline}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_written_by_gdsstore_read_by_zarr(tmp_path: Path, name: str) -> None:
    with gdsstore.enable_gpu(buffers=False):
        _write(tmp_path / "a", CHAINS[name])
    assert np.array_equal(_read(tmp_path / "a"), DATA)


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_written_by_zarr_read_by_gdsstore(tmp_path: Path, name: str) -> None:
    _write(tmp_path / "a", CHAINS[name])
    with gdsstore.enable_gpu(buffers=False):
        assert np.array_equal(_read(tmp_path / "a"), DATA)


def test_enable_gpu_selects_gdsstore_codecs_and_undoes(tmp_path: Path) -> None:
    _write(tmp_path / "a", CHAINS["zstd+crc32c"])
    with gdsstore.enable_gpu(buffers=False):
        z = zarr.open_array(LocalStore(tmp_path / "a"), mode="r")
        pipe = z._async_array.codec_pipeline
        assert type(pipe).__name__ == "GDSCodecPipeline"
        assert {type(c) for c in pipe} >= {gcodecs.ZstdCodec, gcodecs.Crc32cCodec}
    z = zarr.open_array(LocalStore(tmp_path / "a"), mode="r")
    assert type(z._async_array.codec_pipeline).__name__ != "GDSCodecPipeline"
    assert gcodecs.ZstdCodec not in {type(c) for c in z._async_array.codec_pipeline}


def test_metadata_is_zarrs(tmp_path: Path) -> None:
    _write(tmp_path / "plain", CHAINS["zstd+crc32c"])
    with gdsstore.enable_gpu(buffers=False):
        _write(tmp_path / "ours", CHAINS["zstd+crc32c"])
    a = (tmp_path / "plain" / "zarr.json").read_text()
    b = (tmp_path / "ours" / "zarr.json").read_text()
    assert a == b


def test_codec_objects_roundtrip_on_host() -> None:
    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.buffer.cpu import Buffer
    from zarr.core.dtype import Float32

    spec = ArraySpec(
        shape=(10,),
        dtype=Float32(),
        fill_value=0.0,
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )
    raw = Buffer.from_bytes(os.urandom(40) + bytes(4000))
    for cls in (
        gcodecs.ZstdCodec,
        gcodecs.GzipCodec,
        gcodecs.Crc32cCodec,
        gcodecs.NumcodecsZstd,
        gcodecs.LZ4,
    ):
        c = cls()
        enc = c._encode_sync(raw, spec)
        assert enc is not None
        assert c._decode_sync(enc, spec).to_bytes() == raw.to_bytes(), cls


# -- routing and its reasons ---------------------------------------------------------------------------


def test_decide_host_buffer_is_cpu() -> None:
    d = nvcomp.route_codec("zstd", device=False)
    assert (d.route, d.reason) == ("cpu-codec", "host buffer")


def test_decide_blosc_decodes_on_the_gpu_and_writes_on_the_cpu() -> None:
    from gdsstore import policy

    d = policy.decide_codec("blosc", device=True)
    assert d.route == "gpu-decode" and "blosc" in d.reason
    assert policy.decide_codec("blosc", device=True, encode=True).route == "cpu-codec"


def test_decide_gzip_encode_stays_on_cpu() -> None:
    d = nvcomp.route_codec("gzip", device=True, encode=True)
    assert d.route == "cpu-codec" and "gzip" in d.reason


def test_decide_without_gpu_or_nvcomp_says_so() -> None:
    from gdsstore.engine import cuda

    d = nvcomp.route_codec("zstd", device=True)
    if not cuda.gpu_available():
        assert d.route == "cpu-codec" and "GPU" in d.reason
    elif nvcomp.nvcomp_or_none() is None:
        assert d.route == "cpu-codec" and "nvCOMP" in d.reason
    else:
        assert d.route == "gpu-decode"


def test_a_decode_table_of_unequal_lists_is_refused_before_the_gpu() -> None:
    """One size short: nvCOMP's C API path broadcast the single out size to every payload and the size check
    zipped the lists short, so a wrong table decoded unchecked; now it names the lists, GPU or not."""
    with pytest.raises(ValueError, match=r"out_sizes have \[2, 2, 2, 1\] entries; pass one of each per payload"):
        nvcomp.decode_batch_into("zstd", None, [0, 8], [8, 8], None, [0, 16], [16])

def test_trace_records_cpu_codec_with_reason(tmp_path: Path) -> None:
    _write(tmp_path / "a", CHAINS["zstd"])
    with gdsstore.enable_gpu(buffers=False):
        z = zarr.open_array(LocalStore(tmp_path / "a"), mode="r")
        with gdsstore.trace() as t:
            z[:]
    keys = {(op, route, reason) for op, route, reason in t.by_reason()}
    assert ("decode", "cpu-codec", "host buffer") in keys
    assert "gpu-decode" not in t.routes


# -- framing: where nvCOMP's payload sits inside numcodecs' chunks -------------------------------------


def test_gzip_frame_plain_member() -> None:
    payload = os.urandom(3000)
    member = numcodecs.GZip(level=1).encode(payload)
    fr = nvcomp.frame_of("gzip", member[:512], len(member))
    assert fr.start == 10 and fr.stop == len(member) - 8
    import zlib

    assert zlib.decompress(bytes(member[fr.start : fr.stop]), wbits=-15) == payload
    assert nvcomp.gzip_isize(member) == len(payload)


def test_gzip_frame_with_name_extra_comment_hcrc() -> None:
    body = os.urandom(100)
    import zlib

    co = zlib.compressobj(6, zlib.DEFLATED, -15)
    deflate = co.compress(body) + co.flush()
    flg = 2 | 4 | 8 | 16
    header = b"\x1f\x8b\x08" + bytes([flg]) + b"\0\0\0\0\0\xff"
    header += struct.pack("<H", 3) + b"abc" + b"name\0" + b"comment\0" + b"\0\0"
    member = header + deflate + struct.pack("<II", zlib.crc32(body), len(body))
    fr = nvcomp.frame_of("gzip", member, len(member))
    assert member[fr.start : fr.stop] == deflate
    assert gzip.decompress(member) == body


@pytest.mark.parametrize("bad", [b"", b"\x1f\x8b\x09" + bytes(20), b"PK" + bytes(30)])
def test_gzip_frame_rejects_non_gzip(bad: bytes) -> None:
    with pytest.raises(ValueError, match="frame_of"):
        nvcomp.frame_of("gzip", bad, len(bad))


def test_lz4_frame_is_size_header_plus_block() -> None:
    payload = np.arange(5000, dtype="u2").tobytes()
    enc = bytes(numcodecs.LZ4().encode(payload))
    fr = nvcomp.frame_of("lz4", enc, len(enc))
    assert (fr.start, fr.stop, fr.size) == (4, len(enc), len(payload))


@given(n=st.integers(0, 1 << 22) | st.sampled_from([255, 256, 65791, 65792, 1 << 32]), level=st.sampled_from([-3, 1, 3, 19]))
@settings(max_examples=40, deadline=None)
def test_zstd_content_size_is_what_zstd_declares(n: int, level: int) -> None:
    """The header's size (1, 2 (+256), 4 and 8-byte fields) against the decoded length, for numcodecs' frames."""
    if n > 1 << 24:  # an 8-byte field without 4 GiB of input: a frame header as zstd writes one
        frame = b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + n.to_bytes(8, "little")
    else:
        frame = bytes(numcodecs.zstd.compress(bytes(n), level))
        assert not n or len(numcodecs.zstd.decompress(frame)) == n  # (numcodecs refuses an empty frame)
    assert nvcomp.zstd_content_size(frame) == n


@pytest.mark.parametrize("bad", [b"", b"\x28\xb5\x2f", b"\x28\xb5\x2f\xfd\x00", b"\x28\xb5\x2f\xfc" + bytes(8)])
def test_zstd_content_size_without_a_declared_size(bad: bytes) -> None:
    assert nvcomp.zstd_content_size(bad) is None  # short, no size field, or not a zstd magic


def test_unknown_format_has_no_frame() -> None:
    with pytest.raises(ValueError, match="blosc"):
        nvcomp.frame_of("blosc", b"\0" * 16, 16)


# -- the GPU CRC-32C algorithm, checked in numpy --------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 3, 1023, 1024, 1025, 4096 + 17])
def test_blocked_crc32c_equals_google_crc32c(n: int) -> None:
    data = os.urandom(n)
    assert kernels.crc32c_blocked(data) == google_crc32c.value(data)
    assert kernels.crc32c_blocked(data, block=64) == google_crc32c.value(data)


def test_shift_matrix_is_linear_zero_feed() -> None:
    m = kernels.shift_matrix(16)
    assert m.dtype == np.uint32 and m.shape == (32,)
    # feeding zeros into state 0 keeps it 0; the map is not the identity
    assert any(int(m[j]) != 1 << j for j in range(32))


def test_explicit_zarr_codec_objects_are_upgraded(tmp_path: Path) -> None:
    from zarr.codecs import ShardingCodec

    from gdsstore.gpu.pipeline import GDSCodecPipeline

    pipe = GDSCodecPipeline.from_codecs(
        [
            ShardingCodec(
                chunk_shape=(4, 4), codecs=[BytesCodec(), LZ4()], index_codecs=[BytesCodec(), Crc32cCodec()]
            )
        ]
    )
    (shard,) = pipe.codecs
    assert isinstance(shard, ShardingCodec)
    assert isinstance(shard.codecs[1], gcodecs.LZ4) and isinstance(shard.index_codecs[1], gcodecs.Crc32cCodec)
    assert (
        shard.to_dict()
        == ShardingCodec(
            chunk_shape=(4, 4), codecs=[BytesCodec(), LZ4()], index_codecs=[BytesCodec(), Crc32cCodec()]
        ).to_dict()
    )
    # An array created with zarr's codec objects still encodes through gdsstore's codecs.
    with gdsstore.enable_gpu(buffers=False):
        z = zarr.create_array(
            LocalStore(tmp_path / "a"), shape=(8,), chunks=(4,), dtype="i4", compressors=[ZstdCodec()]
        )
        with gdsstore.trace() as t:
            z[:] = np.arange(8, dtype="i4")
    assert ("encode", "cpu-codec", "host buffer") in set(t.by_reason())
    assert np.array_equal(zarr.open_array(LocalStore(tmp_path / "a"), mode="r")[:], np.arange(8))


def test_cpu_route_decodes_zstd_into_its_slots_and_refuses_wrong_sizes_and_corrupt_frames() -> None:
    """The CPU route of a device read (``decode_bb_on_host``): a frame declaring its chunk's size decodes into
    its slot; a frame of another size fails naming the chunk, a corrupt one fails as zstd says (no bytes)."""
    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.core.buffer.cpu import numpy_buffer_prototype
    from zarr.core.dtype import Float32

    from gdsstore.engine import landing
    from gdsstore.gpu import decode as gdecode

    chain = gdecode.CodecChain.of([BytesCodec(), ZstdCodec(level=1)])
    spec = ArraySpec(shape=(256,), dtype=Float32(), fill_value=0, config=ArrayConfig.from_dict({}),
                     prototype=numpy_buffer_prototype())
    good = np.arange(256, dtype="f4")
    corrupt = bytearray(numcodecs.zstd.compress(np.random.default_rng(0).standard_normal(256).astype("f4").tobytes(), 1))
    corrupt[20:40] = bytes(20)  # its header still declares 1024 bytes
    frames = [numcodecs.zstd.compress(good.tobytes(), 1), numcodecs.zstd.compress(good[:128].tobytes(), 1), corrupt]
    staged = landing.from_host_buffers([np.frombuffer(bytes(f), "u1") for f in frames], pinned=False)
    out = gdecode.decode_bb_on_host(chain, [spec] * 3, staged, [0])
    np.testing.assert_array_equal(out.view(0).view("f4"), good)
    with pytest.raises(ValueError, match="chunk 1 of the window decoded to 512 bytes, expected 1024"):
        gdecode.decode_bb_on_host(chain, [spec] * 3, staged, [0, 1])
    with pytest.raises(RuntimeError, match="Zstd decompression error"):
        gdecode.decode_bb_on_host(chain, [spec] * 3, staged, [2])
