"""Archives read through their references, compared with h5py (and netCDF4) reads of the same files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gdsstore.archives as ga
from gdsstore.archives import ArchiveChangedError, ChunkDecodeError

from .data import kerchunk_refs, manifest_store, write_h5

h5py = pytest.importorskip("h5py")

SELECTIONS: list[Any] = [
    ...,
    (slice(None),),
    (1,),
    (-1, slice(90, 140)),
    (slice(1, 5), slice(100, 250), 5),
    (slice(None, None, 2), slice(7, 290, 5), slice(3, None, 7)),
    (4, 127, 128),
    (slice(2, 2),),
    (0, slice(128, 256), slice(0, 128)),  # exactly one chunk
]


@pytest.fixture(params=["manifest", "kerchunk"])
def opened(request: pytest.FixtureRequest, h5file: tuple[Path, dict[str, np.ndarray]]) -> tuple[ga.VirtualGroup, dict[str, np.ndarray]]:
    path, data = h5file
    source = manifest_store(path) if request.param == "manifest" else kerchunk_refs(path)
    return ga.open_virtual(source), data


@pytest.mark.parametrize("sel", SELECTIONS, ids=repr)
def test_selections_match_h5py(opened: tuple[ga.VirtualGroup, dict[str, np.ndarray]], sel: Any) -> None:
    g, data = opened
    got = g["t"][sel]
    want = data["t"][sel]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sel", SELECTIONS, ids=repr)
def test_batch_decoder_matches_h5py(opened: tuple[ga.VirtualGroup, dict[str, np.ndarray]], sel: Any) -> None:
    """The GPU path's batch code (gather, zlib batch, adler32 rows, unshuffle rows, scatter plan) on numpy."""
    g, data = opened
    np.testing.assert_array_equal(g["t"].read(sel, batch=True), data["t"][sel])
    np.testing.assert_array_equal(g["q"].read(batch=True), data["q"])
    np.testing.assert_array_equal(g["x"].read(slice(3, 150), batch=True), data["x"][3:150])


def test_fill_values_edges_and_other_arrays(opened: tuple[ga.VirtualGroup, dict[str, np.ndarray]]) -> None:
    g, data = opened
    t = g["t"][:]
    assert (t[3] == -9.5).all() and (t[4, 100:, :] == -9.5).all()  # chunks never written: the fill value
    np.testing.assert_array_equal(t, data["t"])
    np.testing.assert_array_equal(g["q"][:], data["q"])  # 70 x 90 in 32 x 32 chunks: edge chunks
    np.testing.assert_array_equal(np.asarray(g["x"]), data["x"])
    assert g["q"][5, 7] == data["q"][5, 7]
    assert set(g) >= {"t", "q", "x"} and len(g) == 3


def test_fletcher32_through_virtualizarr(tmp_path: Path) -> None:
    p = tmp_path / "f.h5"
    data = write_h5(p, fletcher32=True)
    ms = manifest_store(p)
    g = ga.open_virtual(ms)
    assert [c.codec_id for c in g["q"].refs.codecs][-1] == "fletcher32"
    np.testing.assert_array_equal(g["q"][:], data["q"])
    np.testing.assert_array_equal(g["t"][:], data["t"])
    np.testing.assert_array_equal(g["q"].read(batch=True), data["q"])
    np.testing.assert_array_equal(g["t"].read(slice(1, 3), batch=True), data["t"][1:3])


def test_archive_errors_are_in_the_one_exception_tree() -> None:
    import gdsstore
    import gdsstore.errors as errors

    assert ga.ChunkDecodeError is gdsstore.ChunkDecodeError is errors.ChunkDecodeError is ChunkDecodeError
    assert ga.ArchiveChangedError is gdsstore.ArchiveChangedError is errors.ArchiveChangedError
    assert issubclass(ChunkDecodeError, ValueError) and issubclass(ArchiveChangedError, OSError)
    assert issubclass(ChunkDecodeError, errors.GDSStoreError) and issubclass(ArchiveChangedError, errors.GDSStoreError)
    assert {"ChunkDecodeError", "ArchiveChangedError"} <= set(errors.__all__) & set(gdsstore.__all__)


def _flip(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def test_corrupt_chunk_names_file_and_offset(tmp_path: Path) -> None:
    p = tmp_path / "c.h5"
    write_h5(p, fletcher32=True)
    ms = manifest_store(p)
    refs = ga.from_manifest_store(ms)["q"]
    off, n = int(refs.offsets[1, 1]), int(refs.lengths[1, 1])
    _flip(p, off + n // 2)
    g = ga.open_virtual(ms)
    np.testing.assert_array_equal(g["q"][:32, :32], h5py.File(p)["q"][:32, :32])  # other chunks still read
    with pytest.raises(ChunkDecodeError, match=f"{p}: chunk at offset {off} .*fletcher32.*checksum"):
        g["q"][:]
    with pytest.raises(ChunkDecodeError, match=f"{p}: chunk at offset {off} .*fletcher32 checksum mismatch"):
        g["q"].read(batch=True)


def test_corrupt_zlib_chunk(tmp_path: Path) -> None:
    p = tmp_path / "z.h5"
    write_h5(p)
    refs = kerchunk_refs(p)
    off, n = refs["refs"]["t/0.0.0"][1:]
    _flip(p, off + n - 2)  # the adler32 trailer
    with pytest.raises(ChunkDecodeError, match=rf"{p}: chunk at offset {off} \(array 't'\): zlib: corrupt \(.*incorrect data check"):
        ga.open_virtual(refs)["t"][0]
    with pytest.raises(ChunkDecodeError, match=rf"{p}: chunk at offset {off} \(array 't'\): adler32 mismatch"):
        ga.open_virtual(refs)["t"].read(0, batch=True)


def test_truncated_file(tmp_path: Path) -> None:
    p = tmp_path / "t.h5"
    write_h5(p)
    ms = manifest_store(p)
    size = p.stat().st_size
    os.truncate(p, size // 2)
    with pytest.raises(ChunkDecodeError, match=f"{p}: truncated"):
        ga.open_virtual(ms)["t"][:]


def test_changed_file_fails_never_mixes(tmp_path: Path) -> None:
    p = tmp_path / "m.h5"
    write_h5(p)
    g = ga.open_virtual(kerchunk_refs(p))
    g["t"][0]
    write_h5(p, seed=1)  # rewritten since the references were opened
    with pytest.raises(ArchiveChangedError, match=f"{p}: changed since its references were opened"):
        g["t"][0]
    os.remove(p)
    with pytest.raises(ArchiveChangedError, match="gone"):
        g["t"][0]


def test_several_files_one_reference_set(tmp_path: Path) -> None:
    """A kerchunk set over two files, the second file's chunks after the first's along time."""
    paths = [tmp_path / "a.h5", tmp_path / "b.h5"]
    datas = [write_h5(p, seed=i, partial=False) for i, p in enumerate(paths)]
    ra, rb = (kerchunk_refs(p)["refs"] for p in paths)
    refs = {k: v for k, v in ra.items() if not k.startswith("t/")}
    meta = json.loads(ra["t/.zarray"])
    meta["shape"][0] = 10
    refs["t/.zarray"] = json.dumps(meta)
    refs["t/.zattrs"] = ra["t/.zattrs"]
    for shift, r in ((0, ra), (5, rb)):
        for k, v in r.items():
            if k.startswith("t/") and not k.split("/")[1].startswith("."):
                i, j, m = k.split("/")[1].split(".")
                refs[f"t/{int(i) + shift}.{j}.{m}"] = v
    path = tmp_path / "refs.json"
    path.write_text(json.dumps({"version": 1, "refs": refs}))
    g = ga.open_virtual(str(path))
    want = np.concatenate([d["t"] for d in datas])
    np.testing.assert_array_equal(g["t"][:], want)
    np.testing.assert_array_equal(g["t"][3:7, 120:140], want[3:7, 120:140])
    assert sorted(g["t"].refs.files) == sorted(str(p) for p in paths)


def test_netcdf4_file(tmp_path: Path) -> None:
    netCDF4 = pytest.importorskip("netCDF4")
    p = tmp_path / "n.nc"
    rng = np.random.default_rng(3)
    temp = rng.standard_normal((6, 100, 150)).astype("f4")
    with netCDF4.Dataset(p, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("y", 100)
        ds.createDimension("x", 150)
        v = ds.createVariable(
            "temp", "f4", ("time", "y", "x"), zlib=True, complevel=1, shuffle=True,
            chunksizes=(1, 64, 64), fill_value=np.float32(1e20),
        )
        v[:5] = temp[:5]
        ds.createVariable("x", "i4", ("x",))[:] = np.arange(150)
    with h5py.File(p) as f:
        want = f["temp"][...]
    assert (want[:5] == temp[:5]).all()
    for source in (manifest_store(p), kerchunk_refs(p)):
        g = ga.open_virtual(source)
        np.testing.assert_array_equal(g["temp"][:], want)
        np.testing.assert_array_equal(g["temp"][2, 50:, 10:140], want[2, 50:, 10:140])
        np.testing.assert_array_equal(g["x"][:], np.arange(150))


def test_inlined_chunks(tmp_path: Path) -> None:
    import kerchunk.hdf

    p = tmp_path / "i.h5"
    data = write_h5(p)
    refs = kerchunk.hdf.SingleHdf5ToZarr(str(p), inline_threshold=4000).translate()
    g = ga.open_virtual(refs)
    assert g["x"].refs.inlined  # the coordinate's small chunks sit in the references
    np.testing.assert_array_equal(g["x"][:], data["x"])
    np.testing.assert_array_equal(g["t"][:2], data["t"][:2])


def test_zarr_codec_classes_on_host_match_zarr(h5file: tuple[Path, dict[str, np.ndarray]]) -> None:
    zarr = pytest.importorskip("zarr")
    path, data = h5file
    ms = manifest_store(path)
    names = {f"numcodecs.{n}": f"gdsstore.archives.codecs.{c}" for n, c in
             (("zlib", "Zlib"), ("shuffle", "Shuffle"), ("fletcher32", "Fletcher32"))}
    with zarr.config.set({"codecs": {**zarr.config.get("codecs"), **names}}):
        arr = zarr.open_group(ms, mode="r")["t"]
        assert type(arr.metadata.codecs[-1]).__module__ == "gdsstore.archives.codecs"
        np.testing.assert_array_equal(arr[:], data["t"])


def test_errors_for_what_is_not_read(h5file: tuple[Path, dict[str, np.ndarray]]) -> None:
    path, _ = h5file
    g = ga.open_virtual(kerchunk_refs(path))
    with pytest.raises(IndexError, match="out of bounds"):
        g["t"][5]
    with pytest.raises(IndexError, match="positive slice steps"):
        g["t"][::-1]
    with pytest.raises(TypeError, match="unsupported index"):
        g["t"][[0, 1]]
    with pytest.raises(TypeError, match="open_virtual"):
        ga.open_virtual(42)
    refs = kerchunk_refs(path)
    refs["refs"]["t/0.0.0"] = ["gs://bucket/a.h5", 0, 10]
    with pytest.raises(NotImplementedError, match=r"only local files, http\(s\):// and s3:// URLs"):
        ga.open_virtual(refs)


def test_device_read_without_gpu(h5file: tuple[Path, dict[str, np.ndarray]]) -> None:
    from gdsstore.engine import cuda

    if cuda.gpu_available():
        pytest.skip("a GPU is here: tests/archives/test_gpu.py reads on it")
    from gdsstore.errors import GPUUnavailableError

    path, _ = h5file
    with pytest.raises(GPUUnavailableError):
        ga.open_virtual(kerchunk_refs(path))["t"].read(0, device=True)


def test_blosc_zarr_v2_chunks_through_whole_file_references(tmp_path: Path) -> None:
    """A zarr v2 array's chunk files as ``[url]`` references (whole files), blosc through numcodecs."""
    zarr = pytest.importorskip("zarr")
    from numcodecs import Blosc

    root = tmp_path / "a.zarr"
    want = np.random.default_rng(7).integers(0, 1000, (50, 70)).astype("<i4")
    z = zarr.create_array(
        str(root), shape=want.shape, chunks=(16, 32), dtype="<i4", zarr_format=2, fill_value=-1,
        compressors=Blosc(cname="lz4", shuffle=Blosc.SHUFFLE),
    )
    z[:40] = want[:40]  # the last row of chunks is never written
    refs: dict[str, Any] = {".zgroup": json.dumps({"zarr_format": 2}), ".zarray": (root / ".zarray").read_text()}
    for f in os.listdir(root):
        if not f.startswith("."):
            refs[f] = [f"file://{root / f}"]
    g = ga.open_virtual({"version": 1, "refs": refs})
    got = g[""][:]
    np.testing.assert_array_equal(got, z[:])
    assert (got[48:] == -1).all()
    # the GPU path's batch code on the host: frames parsed, lz4 streams decoded as a batch, unshuffled
    np.testing.assert_array_equal(g[""].read(batch=True), z[:])
    np.testing.assert_array_equal(g[""].read((slice(3, 45), slice(30, 70)), batch=True), z[3:45, 30:70])
    from gdsstore.gpu import nvcomp

    reason = ga.reader.gpu_unsupported(g[""].refs)
    assert reason is None if nvcomp.nvcomp_or_none() is not None else "nvCOMP not available" in str(reason)


@pytest.mark.parametrize("cname", ["lz4", "zstd", "blosclz", "zlib"])
@pytest.mark.parametrize("shuffle", [0, 1, 2])
def test_blosc_frames_in_batches_match_zarr(tmp_path: Path, cname: str, shuffle: int) -> None:
    """Every blosc compressor and shuffle through the batch decoder (nvCOMP's compressors as a batch, the
    others through numcodecs), equal to zarr's read; a corrupt frame names its chunk."""
    zarr = pytest.importorskip("zarr")
    from numcodecs import Blosc

    root = tmp_path / "b.zarr"
    want = np.round(np.random.default_rng(3).standard_normal((40, 60)), 2).astype("<f8")
    z = zarr.create_array(str(root), shape=want.shape, chunks=(16, 16), dtype="<f8", zarr_format=2,
                          compressors=Blosc(cname=cname, clevel=5, shuffle=shuffle, blocksize=512))
    z[:] = want
    refs: dict[str, Any] = {".zgroup": json.dumps({"zarr_format": 2}), ".zarray": (root / ".zarray").read_text()}
    for f in os.listdir(root):
        if not f.startswith("."):
            refs[f] = [f"file://{root / f}"]
    np.testing.assert_array_equal(ga.open_virtual({"version": 1, "refs": refs})[""].read(batch=True), want)
    with open(root / "1.2", "r+b") as f:  # the header's cbytes: blosc has no checksum, its sizes are checked
        f.seek(12)
        f.write((10**6).to_bytes(4, "little"))
    with pytest.raises(ChunkDecodeError, match=r"1\.2"):
        ga.open_virtual({"version": 1, "refs": refs})[""].read(batch=True)


def test_gpu_unsupported_says_why(h5file: tuple[Path, dict[str, np.ndarray]]) -> None:
    path, _ = h5file
    refs = ga.open_virtual(kerchunk_refs(path))["t"].refs
    from gdsstore.gpu import nvcomp

    reason = ga.reader.gpu_unsupported(refs)
    assert reason is None if nvcomp.nvcomp_or_none() is not None else "nvCOMP not available" in str(reason)
    refs.dtype = np.dtype("<c16")
    assert "no GPU scatter" in str(ga.reader.gpu_unsupported(refs))


@pytest.mark.parametrize("dtype", ["u1", "<i2", ">i2", "<f4", ">f4", "<f8", "<i8", "<u4"])
@pytest.mark.parametrize("filters", ["zlib+shuffle", "shuffle", "none", "zlib", "zlib+shuffle+fletcher32"])
def test_dtypes_and_filter_chains(tmp_path: Path, dtype: str, filters: str) -> None:
    p = tmp_path / "d.h5"
    rng = np.random.default_rng(11)
    data = (rng.standard_normal((37, 29)) * 100).astype(dtype)
    kw: dict[str, Any] = {"chunks": (8, 16), "shuffle": "shuffle" in filters, "fletcher32": "fletcher32" in filters}
    if "zlib" in filters:
        kw.update(compression="gzip", compression_opts=4)
    with h5py.File(p, "w") as f:
        f.create_dataset("v", data=data, **kw)
    with h5py.File(p) as f:
        want = f["v"][...]
    assert want.dtype == np.dtype(dtype)
    g = ga.open_virtual(manifest_store(p))
    pairs = [(g["v"][:], want), (g["v"].read(batch=True), want), (g["v"][3:30:2, 5], want[3:30:2, 5])]
    for got, expected in pairs:
        np.testing.assert_array_equal(got, expected)
        assert got.dtype == expected.dtype


def test_parquet_references(tmp_path: Path) -> None:
    """kerchunk references as parquet (fsspec's LazyReferenceMapper, pyarrow), inlined chunks included."""
    pytest.importorskip("pyarrow")
    import fsspec
    import kerchunk.hdf
    import zarr
    from fsspec.implementations.reference import LazyReferenceMapper

    p = tmp_path / "p.h5"
    data = write_h5(p)
    refs = kerchunk.hdf.SingleHdf5ToZarr(str(p), inline_threshold=500).translate()["refs"]
    root = str(tmp_path / "refs.parq")
    out = LazyReferenceMapper.create(root=root, fs=fsspec.filesystem("file"), record_size=7, engine="pyarrow")
    for k in sorted(refs):
        out[k] = refs[k]
    out.flush()
    g = ga.open_virtual(root)
    assert g["x"].refs.inlined and g["t"].refs.files == [str(p)]
    for name in ("t", "q", "x"):
        np.testing.assert_array_equal(g[name][:], data[name])
    np.testing.assert_array_equal(g["t"][2:4, 99:201], data["t"][2:4, 99:201])
    np.testing.assert_array_equal(zarr.open_group(ga.VirtualStore(root), mode="r", zarr_format=2)["q"][:], data["q"])


def test_scalar_empty_and_contiguous_datasets(tmp_path: Path) -> None:
    """A scalar, an empty extendable dataset and a contiguous (unchunked) one: one chunk or none."""
    p = tmp_path / "s.h5"
    with h5py.File(p, "w") as f:
        f["s"] = np.float64(3.5)
        f.create_dataset("e", shape=(0, 5), maxshape=(None, 5), chunks=(4, 5), dtype="i4")
        f.create_dataset("c", data=np.arange(10.0))
    g = ga.open_virtual(kerchunk_refs(p))
    assert g["s"][...] == 3.5 and g["s"].read(batch=True) == 3.5
    assert g["e"][:].shape == (0, 5)
    np.testing.assert_array_equal(g["c"][2:7], np.arange(2.0, 7.0))
    np.testing.assert_array_equal(g["c"].read(batch=True), np.arange(10.0))


@pytest.mark.parametrize("window", [1, 40_000, 1 << 30])
def test_windows_give_the_same_array(
    monkeypatch: pytest.MonkeyPatch, opened: tuple[ga.VirtualGroup, dict[str, np.ndarray]], window: int
) -> None:
    """A selection read window by window (one chunk, a few, all at once) lands the same values."""
    from gdsstore.archives import reader

    monkeypatch.setattr(reader, "WINDOW_BYTES", window)
    g, data = opened
    for sel in (..., (slice(1, 5), slice(100, 250), 5)):
        np.testing.assert_array_equal(g["t"][sel], data["t"][sel])
        np.testing.assert_array_equal(g["t"].read(sel, batch=True), data["t"][sel])
    np.testing.assert_array_equal(g["q"][:], data["q"])


def test_windows_are_cut_by_stored_bytes_and_by_count() -> None:
    """A window holds at most the stored bytes asked and, on the GPU, at most the chunks whose decoded
    bytes fit the memory budget's share; missing chunks are in none."""
    from gdsstore.archives import reader

    fids = np.array([0, 0, reader.MISSING, 0, 0, 0, 0])
    lens = np.array([10, 10, 0, 10, 10, 10, 10])
    cut = reader._windows(fids, lens, 25)
    assert [w.tolist() for w in cut] == [[0, 1], [3, 4], [5, 6]]  # 60 bytes: 3 windows of 20, not 25 + 25 + 10
    cut = reader._windows(fids, lens, 1000, most=4)
    assert [w.tolist() for w in cut] == [[0, 1, 3], [4, 5, 6]]  # 2 windows of 3, not 4 + 2
    cut = reader._windows(fids, lens, 25, most=1)
    assert [w.tolist() for w in cut] == [[0], [1], [3], [4], [5], [6]]
    big = np.array([0, 0, 0, 0])
    cut = reader._windows(big, np.array([5, 100, 5, 5]), 25)  # a chunk over the budget: a window of its own
    assert all(len(w) for w in cut) and sorted(np.concatenate(cut).tolist()) == [0, 1, 2, 3]


@settings(max_examples=200, deadline=None)
@given(
    lens=st.lists(st.integers(0, 300), min_size=0, max_size=60),
    missing=st.lists(st.booleans(), min_size=60, max_size=60),
    budget=st.integers(1, 1000),
    most=st.one_of(st.none(), st.integers(1, 20)),
)
def test_windows_keep_their_bounds(lens: list[int], missing: list[bool], budget: int, most: int | None) -> None:
    """Every present chunk in exactly one window, in order; no window over ``most`` chunks; past its first
    chunk no window over ``budget`` stored bytes (a window starts where the running total crosses a share);
    without ``most``, no more windows than the budget needs."""
    from gdsstore.archives import reader

    n = len(lens)
    fids = np.where(np.array(missing[:n], dtype=bool), reader.MISSING, 0).astype(np.int64)
    size = np.maximum(np.array(lens, dtype=np.int64), 1)
    cut = reader._windows(fids, np.array(lens, dtype=np.int64), budget, most)
    present = np.flatnonzero(fids != reader.MISSING)
    assert (np.concatenate(cut).tolist() if cut else []) == present.tolist()
    for w in cut:
        assert len(w) and (most is None or len(w) <= most)
        assert int(size[w].sum()) - int(size[w[0]]) < budget
    if len(present) and most is None:
        assert len(cut) <= -(-int(size[present].sum()) // budget)


def test_a_failing_window_stops_the_read_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A corrupt chunk in the first of several windows fails the read with its file and offset, while
    the next window was landing on the read-ahead thread; the next read of the array works."""
    from gdsstore.archives import reader

    p = tmp_path / "c.h5"
    data = write_h5(p, partial=False)
    refs = kerchunk_refs(p)
    off, n = refs["refs"]["t/0.0.0"][1:]
    _flip(p, off + n - 2)
    monkeypatch.setattr(reader, "WINDOW_BYTES", 40_000)
    with pytest.raises(ChunkDecodeError, match=rf"{p}: chunk at offset {off} "):
        ga.open_virtual(refs)["t"][:]
    np.testing.assert_array_equal(ga.open_virtual(refs)["t"][1:], data["t"][1:])


def test_windows_land_ahead_on_the_engines_one_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read of several windows lands the next one while this one decodes on the engine's pool: the
    threads alive after it are the ones before it and the engine pool's (no pool of the archives' own)."""
    import threading

    from gdsstore.archives import reader

    p = tmp_path / "w.h5"
    data = write_h5(p, partial=False)
    monkeypatch.setattr(reader, "WINDOW_BYTES", 40_000)
    before = {t.ident for t in threading.enumerate()}
    np.testing.assert_array_equal(ga.open_virtual(kerchunk_refs(p))["t"][:], data["t"])
    new = [t.name for t in threading.enumerate() if t.ident not in before]
    assert all(name.startswith("gdsstore_") for name in new), new


def test_read_ahead_in_a_forked_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked after the parent's read-ahead threads started reads in windows too (its own
    threads: the parent's do not exist there), and gets the same array."""
    import multiprocessing

    from gdsstore.archives import reader

    p = tmp_path / "f.h5"
    data = write_h5(p, partial=False)
    monkeypatch.setattr(reader, "WINDOW_BYTES", 40_000)
    g = ga.open_virtual(kerchunk_refs(p))
    np.testing.assert_array_equal(g["t"][:], data["t"])  # the parent's read-ahead threads exist now
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=lambda: q.put(bool((g["t"][:] == data["t"]).all())))
    child.start()
    child.join(60)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive, "the forked child hung reading with read-ahead"
    assert q.get(timeout=5) is True
