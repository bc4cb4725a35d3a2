"""Archive reads and codecs on the GPU, against h5py and the host codecs (run on the GPU machine:
``pytest -m gpu tests/archives``)."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest

import gdsstore.archives as ga
from gdsstore.archives import ChunkDecodeError
from gdsstore.archives import codecs as acodecs

from .data import kerchunk_refs, manifest_store, write_h5

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("source", ["manifest", "kerchunk"])
@pytest.mark.parametrize("sel", [..., (1, slice(100, 250)), (slice(2, 5), slice(None, None, 3), 7)], ids=repr)
def test_device_read_matches_h5py(tmp_path: Path, source: str, sel: Any) -> None:
    import cupy as cp

    p = tmp_path / "g.h5"
    data = write_h5(p)
    g = ga.open_virtual(manifest_store(p) if source == "manifest" else kerchunk_refs(p))
    for name in ("t", "q", "x"):
        s = sel if name == "t" else ...
        got = g[name].read(s, device=True)
        assert isinstance(got, cp.ndarray)
        np.testing.assert_array_equal(got.get(), data[name][s])


def test_device_fletcher32_and_corruption(tmp_path: Path) -> None:
    p = tmp_path / "f.h5"
    data = write_h5(p, fletcher32=True)
    ms = manifest_store(p)
    np.testing.assert_array_equal(ga.open_virtual(ms)["q"].read(device=True).get(), data["q"])
    refs = ga.from_manifest_store(ms)["q"]
    off = int(refs.offsets[0, 1])
    with open(p, "r+b") as f:
        f.seek(off + 3)
        b = f.read(1)
        f.seek(off + 3)
        f.write(bytes([b[0] ^ 1]))
    with pytest.raises(ChunkDecodeError, match=f"{p}: chunk at offset {off}"):
        ga.open_virtual(ms)["q"].read(device=True)


def test_device_codecs_match_host() -> None:
    import cupy as cp

    rng = np.random.default_rng(0)
    rows = rng.integers(0, 256, (8, 65536), dtype=np.uint8)
    d = cp.asarray(rows)
    assert acodecs.adler32_rows(d).get().tolist() == [zlib.adler32(r.tobytes()) for r in rows]
    want = [int.from_bytes(numcodecs.Fletcher32().encode(r.tobytes())[-4:], "little") for r in rows]
    assert acodecs.fletcher32(d).get().tolist() == want
    np.testing.assert_array_equal(acodecs.unshuffle_rows(d, 4).get(), np.stack([acodecs.unshuffle(r, 4) for r in rows]))
    streams = [zlib.compress(acodecs.shuffle(r, 4).tobytes(), 1) for r in rows]
    buf = np.zeros(sum(-(-len(s) // 64) * 64 for s in streams), dtype=np.uint8)
    offs, at = [], 0
    for s in streams:
        buf[at : at + len(s)] = np.frombuffer(s, np.uint8)
        offs.append(at)
        at += -(-len(s) // 64) * 64
    offsets, lengths = np.array(offs), np.array([len(s) for s in streams])
    heads = np.stack([np.frombuffer(s[:2] + s[-4:], np.uint8) for s in streams])
    out = acodecs.decode_zlib_batch(cp.asarray(buf), offsets, lengths, 65536, heads, lambda i: f"chunk {i}")
    np.testing.assert_array_equal(acodecs.unshuffle_rows(out, 4).get(), rows)


def test_zarr_codec_classes_on_device(tmp_path: Path) -> None:
    import zarr

    p = tmp_path / "z.h5"
    data = write_h5(p, fletcher32=True)
    names = {f"numcodecs.{n}": f"gdsstore.archives.codecs.{c}" for n, c in
             (("zlib", "Zlib"), ("shuffle", "Shuffle"), ("fletcher32", "Fletcher32"))}
    with zarr.config.set({"codecs": {**zarr.config.get("codecs"), **names}}), zarr.config.enable_gpu():
        got = zarr.open_group(manifest_store(p), mode="r")["q"][:]
    assert hasattr(got, "__cuda_array_interface__")
    np.testing.assert_array_equal(got.get(), data["q"])


def test_device_trace_and_host_fallback(tmp_path: Path) -> None:
    """A device read says it decoded on the GPU, blosc frames too (zarr v2 archives); a codec without a
    batch decoder (numcodecs zstd) decodes on the host, goes up in one copy, and the trace says why."""
    import json
    import os

    import cupy as cp
    import zarr
    from numcodecs import Blosc, Zstd

    import gdsstore

    p = tmp_path / "g.h5"
    write_h5(p)
    g = ga.open_virtual(kerchunk_refs(p))
    with gdsstore.trace() as t:
        g["t"].read(device=True)
    assert "gpu-decode" in t.routes
    want = np.arange(50 * 70, dtype="<i4").reshape(50, 70)
    for name, compressor, route in (("b", Blosc(cname="lz4"), "gpu-decode"), ("z", Zstd(level=1), "cpu-codec")):
        root = tmp_path / f"{name}.zarr"
        zarr.create_array(str(root), shape=want.shape, chunks=(16, 32), dtype="<i4", zarr_format=2,
                          compressors=compressor)[:] = want
        refs: dict[str, Any] = {".zgroup": json.dumps({"zarr_format": 2}), ".zarray": (root / ".zarray").read_text()}
        refs.update({f: [f"file://{root / f}"] for f in os.listdir(root) if not f.startswith(".")})
        with gdsstore.trace() as t:
            got = ga.open_virtual({"version": 1, "refs": refs})[""].read(device=True)
        assert isinstance(got, cp.ndarray) and (got.get() == want).all()
        assert route in t.routes, (name, t.routes)
    reasons = {reason for _, route, reason in t.by_reason() if route == "cpu-codec"}
    assert any("zstd" in r for r in reasons), reasons


def test_device_read_of_big_endian_data(tmp_path: Path) -> None:
    """CuPy holds native byte order only: big-endian data decode on the host and go up swapped."""
    import h5py

    p = tmp_path / "be.h5"
    want = np.arange(40 * 30, dtype=">f4").reshape(40, 30)
    with h5py.File(p, "w") as f:
        f.create_dataset("v", data=want, chunks=(16, 16), compression="gzip", shuffle=True)
    got = ga.open_virtual(kerchunk_refs(p))["v"].read(device=True)
    assert got.dtype == np.dtype("<f4")
    np.testing.assert_array_equal(got.get(), want)
