"""The device decode step's bookkeeping (slots, framing, crc32c, output layout), run on the CPU.

``decode_on_device`` copies a window to the device, decodes it with one nvCOMP call and returns
where each chunk's raw bytes are. Here the device is host memory: the copy is a numpy copy and the
nvCOMP call is replaced by numcodecs decoding into the same output slots, so every offset and
length the pipeline computes is checked against the raw bytes of each chunk.
"""

from __future__ import annotations

import types
import zlib
from typing import Any

import numcodecs
import numpy as np
import pytest

from gdsstore.engine import landing
from gdsstore.gpu import codecs as gcodecs
from gdsstore.gpu import decode as gdecode
from gdsstore.gpu import nvcomp, staging
from gdsstore.gpu import pipeline as gpipe
from gdsstore.policy import Decision
from gpu_pipeline.test_fast_path import _spec

_NC = {"zstd": numcodecs.Zstd(level=1), "gzip": numcodecs.GZip(level=1), "lz4": numcodecs.LZ4()}


@pytest.fixture
def host_device(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"decode": 0}
    fake_cp = types.SimpleNamespace(empty=np.empty, asarray=np.asarray, uint8=np.uint8)

    def decode_into(
        fmt: str, src: Any, s_off: list[int], s_len: list[int], out: Any, o_off: list[int], o_len: list[int]
    ) -> None:
        calls["decode"] += 1
        for a, m, b, n in zip(s_off, s_len, o_off, o_len):
            payload = bytes(src[a : a + m])
            if fmt == "gzip":
                dec = zlib.decompress(payload, -15)  # the raw deflate stream nvCOMP gets
            elif fmt == "lz4":
                dec = numcodecs.LZ4().decode(np.uint32(n).tobytes() + payload)
            else:
                dec = numcodecs.Zstd().decode(payload)
            assert len(dec) == n
            out[b : b + n] = np.frombuffer(dec, np.uint8)

    monkeypatch.setattr(gcodecs, "_cupy", lambda: fake_cp)
    monkeypatch.setattr(staging, "to_device", lambda st: st.host.copy())
    monkeypatch.setattr(nvcomp, "decode_batch_into", decode_into)
    monkeypatch.setattr(nvcomp, "route_codec", lambda fmt, **kw: Decision("gpu-decode", "test"))
    return calls


@pytest.mark.parametrize("fmt", [None, "zstd", "gzip", "lz4"])
def test_decode_raw_device_locates_every_chunk(host_device: dict[str, int], fmt: str | None) -> None:
    from zarr.codecs import BytesCodec, GzipCodec, ZstdCodec
    from zarr.codecs.numcodecs import LZ4

    comp = {None: [], "zstd": [ZstdCodec(level=1)], "gzip": [GzipCodec(level=1)], "lz4": [LZ4()]}[fmt]
    chain = gdecode.CodecChain.of(gpipe.GDSCodecPipeline.from_codecs([BytesCodec(), *comp]).codecs)
    spec = _spec((16, 8))
    rng = np.random.default_rng(5)
    raws = [np.round(rng.standard_normal((16, 8)), 1).astype("f4").tobytes() for _ in range(6)]
    stored = [r if fmt is None else bytes(_NC[fmt].encode(r)) for r in raws]
    bufs: list[Any] = [np.frombuffer(b, np.uint8) for b in stored]
    bufs[2] = None  # a missing chunk
    st = landing.from_host_buffers(bufs, pinned=False)
    raw = gdecode.decode_on_device(chain, [spec] * 6, st)
    ptrs = raw.ptrs()
    assert ptrs[2] == 0 and raw.item(2) is None
    for i in (0, 1, 3, 4, 5):
        assert ptrs[i] != 0
        assert bytes(raw.item(i)) == raws[i]
    assert host_device["decode"] == (0 if fmt is None else 1)


@pytest.mark.parametrize("dtype", ["u2", "f4", "f8"])
def test_swap_bytes_is_numpys_byteswap(dtype: str) -> None:
    """The one byte swap the GPU read and write paths use, on NumPy (it runs the same on CuPy)."""
    from gdsstore.gpu.decode import swap_bytes

    a = np.arange(24, dtype=dtype)
    got = swap_bytes(a.view(np.uint8), a.itemsize)
    assert got.tobytes() == a.byteswap().tobytes() and a.tobytes() == np.arange(24, dtype=dtype).tobytes()
