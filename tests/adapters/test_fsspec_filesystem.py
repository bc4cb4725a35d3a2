"""The ``gds`` fsspec filesystem over local files: surface, coalescing, device reads, and the
dataframe/array readers that take fsspec URLs (pandas, pyarrow, xarray through zarr's FsspecStore)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest

import gdsstore
from gdsstore.adapters.fsspec import GDSFile, GDSFileSystem, GDSLocalFileSystem

DATA = bytes(range(256)) * 64  # 16 KiB, every offset distinguishable


@pytest.fixture
def fs() -> GDSFileSystem:
    return fsspec.filesystem("gds")  # type: ignore[no-any-return]


@pytest.fixture
def blob(tmp_path: Path) -> str:
    p = tmp_path / "d" / "blob.bin"
    p.parent.mkdir()
    p.write_bytes(DATA)
    return str(p)


def test_protocol_and_classes(fs: GDSFileSystem) -> None:
    from fsspec.implementations.local import LocalFileSystem

    assert isinstance(fs, GDSFileSystem) and isinstance(fs, GDSLocalFileSystem)
    # cuDF hands paths of LocalFileSystem instances straight to libcudf (its GDS reader).
    assert isinstance(fs, LocalFileSystem)
    assert fs.async_impl and fs.is_local
    assert type(fsspec.filesystem("gds", target_protocol="file")) is GDSLocalFileSystem
    remote = GDSFileSystem("s3", {"anon": True})  # positional, as fsspec's make_instance calls it
    assert type(remote) is GDSFileSystem and not isinstance(remote, LocalFileSystem)
    with pytest.raises(TypeError, match="local files take no storage options"):
        GDSFileSystem(endpoint_url="http://x", skip_instance_cache=True)
    # fsspec's generic options are accepted (LocalFileSystem users pass auto_mkdir).
    assert fsspec.filesystem("gds", auto_mkdir=True, use_listings_cache=False).is_local
    with pytest.raises(ValueError, match="unsupported target_protocol 'gcs'"):
        GDSFileSystem(target_protocol="gcs")


def test_url_forms(fs: GDSFileSystem, blob: str) -> None:
    got, path = fsspec.core.url_to_fs("gds://" + blob)
    assert got is fs and path == blob
    assert fs._strip_protocol("file://" + blob) == blob
    assert fs.unstrip_protocol(blob) == "gds://" + blob
    # What cuDF calls before deciding to hand the path to libcudf: a LocalFileSystem and a plain path.
    fs2, _, paths = fsspec.core.get_fs_token_paths("gds://" + blob, mode="rb")
    assert fs2 is fs and paths == [blob]
    with fsspec.open("gds://" + blob, "rb") as f:
        assert f.read() == DATA


def test_cat_file_ranges(fs: GDSFileSystem, blob: str) -> None:
    whole = fs.cat_file(blob)
    # Real, immutable bytes (filled in place by the engine): equal, hashable, usable as dict keys.
    assert type(whole) is bytes and whole == DATA and hash(whole) == hash(DATA)
    assert {whole: 1}[DATA] == 1
    assert fs.cat_file(blob, start=10, end=20) == DATA[10:20]
    assert fs.cat_file(blob, start=-5) == DATA[-5:]
    assert fs.cat_file(blob, start=100, end=-100) == DATA[100:-100]
    assert fs.cat_file(blob, start=len(DATA) + 5) == b""
    assert fs.cat_file(blob, start=len(DATA) - 3, end=len(DATA) + 100) == DATA[-3:]


def test_missing_paths_raise_file_not_found(fs: GDSFileSystem, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.bin")
    for call in (fs.cat_file, fs.info, fs.ls, fs.rm_file, lambda p: fs.open(p, "rb")):
        with pytest.raises(FileNotFoundError):
            call(missing)
    assert not fs.exists(missing)
    out = fs.cat_ranges([missing], [0], [1])
    assert isinstance(out[0], FileNotFoundError)
    with pytest.raises(FileNotFoundError):
        fs.cat_ranges([missing], [0], [1], on_error="raise")


def test_listing(fs: GDSFileSystem, tmp_path: Path) -> None:
    root = str(tmp_path / "tree")
    fs.pipe({f"{root}/a.bin": b"1", f"{root}/sub/b.bin": b"22", f"{root}/sub/deep/c.bin": b"333"})
    fs.mkdir(f"{root}/empty")
    names = fs.ls(root, detail=False)
    assert names == [f"{root}/a.bin", f"{root}/empty", f"{root}/sub"]
    types = {d["name"]: d["type"] for d in fs.ls(root)}
    assert types[f"{root}/sub"] == "directory" and types[f"{root}/a.bin"] == "file"
    assert fs.find(root) == [f"{root}/a.bin", f"{root}/sub/b.bin", f"{root}/sub/deep/c.bin"]
    assert fs.du(root) == 6
    assert fs.info(f"{root}/sub/deep/c.bin")["size"] == 3
    assert fs.isdir(f"{root}/empty") and not fs.isfile(f"{root}/empty")
    with pytest.raises(FileExistsError):
        fs.mkdir(f"{root}/empty")
    fs.rm(root, recursive=True)
    assert not fs.exists(root)


def test_pipe_file_create_is_exclusive(fs: GDSFileSystem, tmp_path: Path) -> None:
    p = str(tmp_path / "x" / "y.bin")
    fs.pipe_file(p, b"first", mode="create")
    with pytest.raises(FileExistsError):
        fs.pipe_file(p, b"second", mode="create")
    assert fs.cat_file(p) == b"first"
    fs.pipe_file(p, np.arange(4, dtype="u1"))  # any host buffer
    assert fs.cat_file(p) == b"\x00\x01\x02\x03"
    with pytest.raises(ValueError, match="mode must be"):
        fs.pipe_file(p, b"z", mode="append")
    # No temporary files left behind.
    assert fs.ls(str(tmp_path / "x"), detail=False) == [p]


def test_cat_ranges_coalesces_nearby_ranges(fs: GDSFileSystem, blob: str, tmp_path: Path) -> None:
    other = str(tmp_path / "other.bin")
    fs.pipe_file(other, DATA[::-1])
    starts = [0, 100, 50, 4000, 16000, 10]
    ends = [10, 200, 60, 4100, 16384, 10]
    paths = [blob] * 5 + [other]
    with gdsstore.trace() as t:
        out = fs.cat_ranges(paths, starts, ends)
    assert out == [DATA[s:e] for s, e in zip(starts[:5], ends[:5])] + [b""]
    assert all(type(x) is bytes for x in out)
    reads = [e for e in t.events if e.op == "read"]
    # Five ranges of blob within 64 KiB of each other: one engine read; the empty range: none.
    assert len(reads) == 1, t
    assert reads[0].nbytes == 16384
    with gdsstore.trace() as t:
        out = fs.cat_ranges(paths[:2], starts[:2], ends[:2], max_gap=0)
    assert out == [DATA[0:10], DATA[100:200]]
    assert len([e for e in t.events if e.op == "read"]) == 2
    # Scalars broadcast; mismatched lengths are an error.
    assert fs.cat_ranges([blob, other], 0, 2) == [DATA[:2], DATA[::-1][:2]]
    with pytest.raises(ValueError, match="2 paths but 1 starts"):
        fs.cat_ranges([blob, other], [0], [1, 2])


async def test_async_methods(blob: str, tmp_path: Path) -> None:
    fs = GDSFileSystem(asynchronous=True, skip_instance_cache=True)
    assert await fs._cat_file(blob, start=1, end=3) == DATA[1:3]
    assert (await fs._info(blob))["size"] == len(DATA)
    assert await fs._cat_ranges([blob, blob], [0, 5], [2, 7]) == [DATA[0:2], DATA[5:7]]
    p = str(tmp_path / "async.bin")
    await fs._pipe_file(p, b"abc")
    with pytest.raises(FileExistsError):
        await fs._pipe_file(p, b"abc", mode="create")
    assert await fs._exists(p)
    assert await fs._find(str(tmp_path)) == sorted([blob, p])
    await fs._rm(p)
    assert not await fs._exists(p)


def test_open_read_random_access(fs: GDSFileSystem, blob: str) -> None:
    with fs.open(blob, "rb", block_size=1000) as f:
        assert isinstance(f, GDSFile)
        assert f.size == len(DATA)
        f.seek(5000)
        assert f.read(300) == DATA[5000:5300]
        f.seek(-10, 2)
        assert f.read() == DATA[-10:]
        f.seek(0)
        assert f.read(3) == DATA[:3]
        assert f.read(5000) == DATA[3:5003]  # a block or more: straight from the engine
        buf = np.zeros(2000, dtype="u1")
        assert f.readinto(buf) == 2000 and buf.tobytes() == DATA[5003:7003]
        assert f.tell() == 7003
        f.seek(len(DATA) - 10)
        assert f.readinto(memoryview(bytearray(100))) == 10
        assert f.read(5000) == b""
    with pytest.raises(IsADirectoryError):
        fs.open(str(Path(blob).parent), "rb")


def test_open_write_is_atomic_and_exclusive(fs: GDSFileSystem, tmp_path: Path) -> None:
    p = str(tmp_path / "new" / "w.bin")
    with fs.open(p, "wb", block_size=4096) as f:
        for i in range(10):
            f.write(DATA[i * 1000 : (i + 1) * 1000])
        # Nothing visible at the target before close (written to a temporary file).
        assert not fs.exists(p)
    assert fs.cat_file(p) == DATA[:10000]
    assert fs.ls(str(tmp_path / "new"), detail=False) == [p]
    with pytest.raises(FileExistsError):
        fs.open(p, "xb")
    with gdsstore.config.set({"fsync": True}), fs.open(p, "ab") as f:
        f.write(b"tail")
    with gdsstore.config.set({"fsync": True}), fs.open(p + ".durable", "wb") as f:
        f.write(b"synced")
    assert fs.cat_file(p + ".durable") == b"synced"
    fs.rm_file(p + ".durable")
    assert fs.cat_file(p) == DATA[:10000] + b"tail"
    # A failing writer leaves the old value and no temporary file.
    with pytest.raises(RuntimeError), fs.open(p, "wb") as f:
        f.write(b"partial" * 10000)
        f.flush(force=False)
        raise RuntimeError("boom")
    assert fs.cat_file(p) == DATA[:10000] + b"tail"
    assert fs.ls(str(tmp_path / "new"), detail=False) == [p]


def test_read_into_and_read_array_host(fs: GDSFileSystem, blob: str) -> None:
    buf = np.zeros(100, dtype="u1")
    assert fs.read_into(blob, buf, start=1000) == 100
    assert buf.tobytes() == DATA[1000:1100]
    tail = bytearray(100)
    assert fs.read_into(blob, tail, start=len(DATA) - 40) == 40  # fewer at end of file
    assert bytes(tail[:40]) == DATA[-40:]
    arr = fs.read_array(blob, 10, 30, device=False)
    assert isinstance(arr, np.ndarray) and arr.dtype == np.uint8
    assert arr.tobytes() == DATA[10:30]
    with gdsstore.trace() as t:
        fs.read_array(blob, device=False)
    assert t.totals["posix"]["bytes"] == len(DATA)


def test_pickle_and_tokenize(fs: GDSFileSystem, blob: str) -> None:
    from dask.base import tokenize

    fs2 = pickle.loads(pickle.dumps(fs))
    assert fs2 == fs and type(fs2) is GDSLocalFileSystem
    assert tokenize(fs2) == tokenize(fs)
    assert fs2.cat_file(blob, 0, 4) == DATA[:4]
    with fs.open(blob) as f:
        f.seek(7)
        f2 = pickle.loads(pickle.dumps(f))
        assert f2.read(3) == DATA[7:10]  # reopened at the same position


def test_cp_mv_get_put(fs: GDSFileSystem, blob: str, tmp_path: Path) -> None:
    dst = str(tmp_path / "copies" / "c.bin")
    fs.cp_file(blob, dst)
    assert fs.cat_file(dst) == DATA
    fs.mv(dst, dst + ".moved")
    assert not fs.exists(dst) and fs.cat_file(dst + ".moved") == DATA
    local = tmp_path / "local.bin"
    fs.get_file(blob, str(local))
    assert local.read_bytes() == DATA
    fs.put_file(str(local), str(tmp_path / "up" / "u.bin"))
    assert fs.cat_file(str(tmp_path / "up" / "u.bin")) == DATA
    with pytest.raises(FileNotFoundError):
        fs.cp_file(str(tmp_path / "missing"), dst)


# -- readers that take fsspec URLs ---------------------------------------------------------------


@pytest.fixture
def frame() -> Any:
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(
        {"a": np.arange(1000, dtype="i8"), "b": np.linspace(0, 1, 1000), "c": ["x", "y"] * 500}
    )


def test_pandas_read_parquet_and_csv(frame: Any, tmp_path: Path) -> None:
    import pandas as pd

    p = tmp_path / "t.parquet"
    frame.to_parquet(p)
    pd.testing.assert_frame_equal(pd.read_parquet(f"gds://{p}"), pd.read_parquet(p))
    c = tmp_path / "t.csv"
    frame.to_csv(c, index=False)
    pd.testing.assert_frame_equal(pd.read_csv(f"gds://{c}"), pd.read_csv(c))
    # Writing through the filesystem too.
    frame.to_parquet(f"gds://{tmp_path}/w.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "w.parquet"), frame)


def test_dask_read_parquet(frame: Any, tmp_path: Path) -> None:
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd

    p = tmp_path / "t.parquet"
    frame.to_parquet(p)
    with gdsstore.trace() as t:
        got = dd.read_parquet(f"gds://{p}").compute(scheduler="sync")
    pd.testing.assert_frame_equal(got, dd.read_parquet(str(p)).compute(scheduler="sync"))
    assert t.totals["posix"]["ops"] >= 1  # dask's reads went through the engine


def test_pyarrow_read_table_with_filesystem(fs: GDSFileSystem, frame: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    p = tmp_path / "t.parquet"
    frame.to_parquet(p, row_group_size=100)
    with gdsstore.trace() as t:
        got = pq.read_table(str(p), filesystem=fs)
    assert got.equals(pq.read_table(p))
    assert t.totals["posix"]["ops"] >= 1  # the bytes came through the engine
    part = pq.read_table(str(p), filesystem=fs, columns=["b"])
    assert part.column("b").to_pylist() == frame["b"].tolist()


def test_xarray_open_zarr(tmp_path: Path) -> None:
    xr = pytest.importorskip("xarray")
    ds = xr.Dataset(
        {"t": (("y", "x"), np.arange(64 * 48, dtype="f4").reshape(64, 48))},
        coords={"y": np.arange(64), "x": np.arange(48)},
    )
    plain = tmp_path / "ds.zarr"
    ds.chunk({"y": 16, "x": 16}).to_zarr(plain, zarr_format=3, consolidated=False)
    with gdsstore.trace() as t:
        got = xr.open_zarr(f"gds://{plain}", consolidated=False).load()
    xr.testing.assert_identical(got, xr.open_zarr(plain, consolidated=False).load())
    assert t.totals["posix"]["ops"] >= 12  # 12 chunks + metadata, all through the engine
    # And writing a zarr store through gds.
    ds.to_zarr(f"gds://{tmp_path}/w.zarr", zarr_format=3, consolidated=False)
    xr.testing.assert_identical(xr.open_zarr(tmp_path / "w.zarr", consolidated=False).load(), ds)


# -- GPU -------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_read_into_device_equals_host(fs: GDSFileSystem, blob: str, cp: Any) -> None:
    buf = cp.zeros(5000, dtype="u1")
    assert fs.read_into(blob, buf, start=333) == 5000
    assert cp.asnumpy(buf).tobytes() == DATA[333:5333]
    # An open file fills device memory too (readinto goes to the engine, not through bytes).
    with fs.open(blob) as f:
        f.seek(100)
        dev = cp.empty(3000, dtype="u1")
        assert f.readinto(dev) == 3000 and f.tell() == 3100
    assert cp.asnumpy(dev).tobytes() == DATA[100:3100]


@pytest.mark.gpu
def test_read_array_device_equals_host(fs: GDSFileSystem, tmp_path: Path, cp: Any) -> None:
    big = np.random.default_rng(0).integers(0, 256, 24 << 20, dtype="u1")  # several engine pieces
    p = str(tmp_path / "big.bin")
    fs.pipe_file(p, big)
    with gdsstore.trace() as t:
        arr = fs.read_array(p, 1000, None, device=True)
    assert isinstance(arr, cp.ndarray)
    assert cp.array_equal(arr, cp.asarray(big[1000:]))
    assert all(e.device is not None for e in t.events if e.op == "read")
    # Device buffer written back through pipe_file.
    q = str(tmp_path / "back.bin")
    fs.pipe_file(q, arr)
    assert fs.cat_file(q) == big[1000:].tobytes()
