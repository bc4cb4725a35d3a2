"""``gds::s3://`` over a moto S3 server on 127.0.0.1: fsspec's shared suites, chained URLs,
and pandas reading through the chain."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import fsspec
import fsspec.tests.abstract as abstract
import numpy as np
import pytest

import gdsstore
from gdsstore.adapters.fsspec import GDSFileSystem

pytest.importorskip("moto.server")
botocore = pytest.importorskip("botocore")

BUCKET = "gds-fsspec"
CREDS = {"key": "testing", "secret": "testing"}


_MOTO = """
import sys
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print("%s:%d" % server.get_host_and_port(), flush=True)
sys.stdin.read()  # until the test closes our stdin
server.stop()
"""


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server in its own process (its request handling does not compete with the client
    for the GIL) on a free port of 127.0.0.1, with one bucket; stopped after the module."""
    import subprocess
    import sys

    import botocore.session

    proc = subprocess.Popen(
        [sys.executable, "-c", _MOTO], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line:
            pytest.fail(f"moto server did not start (exit code {proc.poll()})")
        endpoint = f"http://{line}"
        client = botocore.session.Session().create_client(
            "s3",
            region_name="us-east-1",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        client.create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def s3_options(s3_endpoint: str) -> dict[str, Any]:
    return {"endpoint_url": s3_endpoint, **CREDS}


@pytest.fixture
def s3fs_gds(s3_options: dict[str, Any]) -> GDSFileSystem:
    return GDSFileSystem(target_protocol="s3", target_options=s3_options)


class GDSS3Fixtures(abstract.AbstractFixtures):  # type: ignore[misc]
    @pytest.fixture
    def fs(self, s3fs_gds: GDSFileSystem) -> GDSFileSystem:
        return s3fs_gds

    @pytest.fixture
    def fs_path(self) -> str:
        return f"{BUCKET}/{uuid.uuid4().hex[:12]}"

    @pytest.fixture
    def supports_empty_directories(self) -> bool:
        return False


class TestGDSS3Copy(abstract.AbstractCopyTests, GDSS3Fixtures):  # type: ignore[misc]
    pass


class TestGDSS3Get(abstract.AbstractGetTests, GDSS3Fixtures):  # type: ignore[misc]
    pass


class TestGDSS3Put(abstract.AbstractPutTests, GDSS3Fixtures):  # type: ignore[misc]
    pass


class TestGDSS3Pipe(abstract.AbstractPipeTests, GDSS3Fixtures):  # type: ignore[misc]
    pass


class TestGDSS3Open(abstract.AbstractOpenTests, GDSS3Fixtures):  # type: ignore[misc]
    pass


DATA = bytes(range(256)) * 1024  # 256 KiB


def test_chained_url_open_and_cat(s3_options: dict[str, Any]) -> None:
    key = f"{BUCKET}/chain/{uuid.uuid4().hex}.bin"
    with fsspec.open(f"gds::s3://{key}", "wb", s3=s3_options) as f:
        f.write(DATA)
    fs, path = fsspec.core.url_to_fs(f"gds::s3://{key}", s3=s3_options)
    assert isinstance(fs, GDSFileSystem) and not fs.is_local
    assert fs.target_protocol == "s3" and path == key
    assert fs.cat_file(path, start=1000, end=1010) == DATA[1000:1010]
    assert fs.info(path)["size"] == len(DATA)
    assert fs.unstrip_protocol(path) == f"gds::s3://{key}"
    with fsspec.open(f"gds::s3://{key}", "rb", s3=s3_options) as f:
        f.seek(70000)
        assert f.read(5) == DATA[70000:70005]
    with pytest.raises(FileNotFoundError):
        fs.cat_file(f"{BUCKET}/chain/missing.bin")
    with pytest.raises(FileNotFoundError):
        fs.open(f"{BUCKET}/chain/missing.bin", "rb")


def test_remote_reads_go_through_the_engine(s3fs_gds: GDSFileSystem) -> None:
    fs = s3fs_gds
    path = f"{BUCKET}/engine/{uuid.uuid4().hex}.bin"
    fs.pipe_file(path, DATA)
    with pytest.raises(FileExistsError):
        fs.pipe_file(path, b"x", mode="create")
    with gdsstore.trace() as t:
        out = fs.cat_ranges([path] * 4, [0, 100, 5000, 200000], [10, 200, 5100, 200100])
    assert out == [DATA[0:10], DATA[100:200], DATA[5000:5100], DATA[200000:200100]]
    assert "s3" in t.routes, t
    buf = np.zeros(1000, dtype="u1")
    assert fs.read_into(path, buf, start=123) == 1000
    assert buf.tobytes() == DATA[123:1123]
    assert fs.read_array(path, 10, 20, device=False).tobytes() == DATA[10:20]
    listing = fs.ls(f"{BUCKET}/engine", detail=False)
    assert path in listing
    fs.rm(path)
    assert not fs.exists(path)


def test_pickle_remote(s3fs_gds: GDSFileSystem) -> None:
    import pickle

    from dask.base import tokenize

    fs2 = pickle.loads(pickle.dumps(s3fs_gds))
    assert fs2 == s3fs_gds and tokenize(fs2) == tokenize(s3fs_gds)
    assert fs2.target_protocol == "s3"
    assert "testing" not in repr(fs2)


def test_pandas_read_csv_chained(s3_options: dict[str, Any], tmp_path: Any) -> None:
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": np.arange(500), "b": np.linspace(0, 1, 500), "c": ["u", "v"] * 250})
    plain = tmp_path / "x.csv"
    df.to_csv(plain, index=False)
    url = f"gds::s3://{BUCKET}/pandas/{uuid.uuid4().hex}.csv"
    df.to_csv(url, index=False, storage_options={"s3": s3_options})
    got = pd.read_csv(url, storage_options={"s3": s3_options})
    pd.testing.assert_frame_equal(got, pd.read_csv(plain))
    pq_url = url.replace(".csv", ".parquet")
    df.to_parquet(pq_url, storage_options={"s3": s3_options})
    pd.testing.assert_frame_equal(pd.read_parquet(pq_url, storage_options={"s3": s3_options}), df)


def test_zarr_and_xarray_over_chained_s3(s3_options: dict[str, Any]) -> None:
    zarr = pytest.importorskip("zarr")
    xr = pytest.importorskip("xarray")
    url = f"gds::s3://{BUCKET}/zarr/{uuid.uuid4().hex}.zarr"
    so = {"s3": s3_options}
    data = np.arange(40 * 30, dtype="f8").reshape(40, 30)
    z = zarr.open_array(url, mode="w", shape=data.shape, chunks=(16, 16), dtype="f8", storage_options=so)
    z[:] = data
    with gdsstore.trace() as t:
        back = zarr.open_array(url, mode="r", storage_options=so)[5:35, 3:29]
    np.testing.assert_array_equal(back, data[5:35, 3:29])
    assert t.totals["s3"]["ops"] >= 6, t  # chunk reads through the remote engine
    ds = xr.Dataset({"v": (("y", "x"), data)})
    ds_url = url.replace(".zarr", "-ds.zarr")
    ds.to_zarr(ds_url, storage_options=so, zarr_format=3, consolidated=False)
    xr.testing.assert_identical(xr.open_zarr(ds_url, storage_options=so, consolidated=False).load(), ds)
