"""Archives whose references point at remote files: nginx (HTTP) and moto (S3) serving netCDF4/HDF5
files made by the tests, read through kerchunk references rewritten to their URLs, compared with h5py
reads of the same files; servers that ignore ``Range`` or truncate fail with the URL."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from servers.faults import FaultServer
from servers.moto_s3 import MotoServer
from servers.nginx import NginxServer

import gdsstore
import gdsstore.archives as ga
from gdsstore.archives import ArchiveChangedError, ChunkDecodeError

from .data import kerchunk_refs, manifest_store, write_h5

h5py = pytest.importorskip("h5py")

SELECTIONS: list[Any] = [..., (1,), (-1, slice(90, 140)), (slice(None, None, 2), slice(7, 290, 5), slice(3, None, 7))]


@pytest.fixture(autouse=True)
def quick_retries() -> Iterator[None]:
    """Bounded, quick retries: the fault tests fail in well under a second."""
    with gdsstore.config.set({"remote.backoff_base": 0.001, "remote.backoff_max": 0.01, "remote.max_attempts": 3,
                              "remote.timeout": 5.0, "remote.connect_timeout": 2.0}):
        yield


def rewrite_manifest(ms: Any, new: str) -> Any:
    """A VirtualiZarr ManifestStore (one file, one group) with every chunk's path replaced by ``new``."""
    from virtualizarr.manifests import ManifestGroup, ManifestStore

    g = ms._group
    arrays = {k: a.rename_paths(lambda old: new if old else old) for k, a in g.arrays.items()}  # "": missing
    return ManifestStore(ManifestGroup(arrays=arrays, attributes=dict(g.metadata.attributes)))


def rewrite(refs: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """kerchunk references with every target ``old`` replaced by ``new`` (a URL)."""
    body = {k: [new, *v[1:]] if isinstance(v, list) and v[0] == old else v for k, v in refs["refs"].items()}
    return {"version": 1, "refs": body}


def _netcdf4(path: Path) -> np.ndarray:
    netCDF4 = pytest.importorskip("netCDF4")
    with netCDF4.Dataset(path, "w") as ds:
        for name, n in (("time", None), ("y", 100), ("x", 150)):
            ds.createDimension(name, n)
        v = ds.createVariable("temp", "f4", ("time", "y", "x"), zlib=True, complevel=1, shuffle=True,
                              chunksizes=(1, 64, 64), fill_value=np.float32(1e20))
        v[:5] = np.random.default_rng(3).standard_normal((5, 100, 150)).astype("f4")
    with h5py.File(path) as f:
        out: np.ndarray = f["temp"][...]
    return out


@pytest.fixture
def served(archive_nginx: NginxServer, tmp_path: Path) -> tuple[Path, str]:
    """A fresh directory under nginx's root, and its URL."""
    sub = uuid.uuid4().hex[:8]
    d = Path(archive_nginx.root) / sub
    d.mkdir()
    os.chmod(d, 0o755)
    return d, archive_nginx.url(sub)


def test_http_kerchunk_matches_h5py(served: tuple[Path, str], archive_nginx: NginxServer) -> None:
    d, url = served
    p = d / "a.h5"
    data = write_h5(p)
    refs = rewrite(kerchunk_refs(p), str(p), f"{url}/a.h5")
    g = ga.open_virtual(refs)
    assert g["t"].refs.files == [f"{url}/a.h5"]
    for sel in SELECTIONS:
        np.testing.assert_array_equal(g["t"][sel], data["t"][sel])
        np.testing.assert_array_equal(g["t"].read(sel, batch=True), data["t"][sel])
    np.testing.assert_array_equal(g["q"][:], data["q"])
    np.testing.assert_array_equal(np.asarray(g["x"]), data["x"])


def test_http_reads_are_waves_not_one_request_per_chunk(served: tuple[Path, str], archive_nginx: NginxServer) -> None:
    """The 2 x 3 chunks of one time step sit in a few runs of the file: one wave of a few coalesced
    ranges, not a request per chunk (nginx's access log counts the GETs)."""
    d, url = served
    p = d / "w.h5"
    data = write_h5(p, partial=False)
    g = ga.open_virtual(rewrite(kerchunk_refs(p), str(p), f"{url}/w.h5"))
    before = len(archive_nginx.requests())
    np.testing.assert_array_equal(g["t"][:], data["t"])  # 5 x 3 x 2 = 30 chunks
    gets = [r for r in archive_nginx.requests()[before:] if r.startswith("GET ") and "/w.h5" in r]
    assert 1 <= len(gets) < 30 // 3, gets


def test_http_netcdf4_two_files_and_zarr_store(served: tuple[Path, str]) -> None:
    d, url = served
    paths = [d / "n0.nc", d / "n1.nc"]
    wants = [_netcdf4(p) for p in paths]
    g0 = ga.open_virtual(rewrite(kerchunk_refs(paths[0]), str(paths[0]), f"{url}/n0.nc"))
    np.testing.assert_array_equal(g0["temp"][:], wants[0])
    np.testing.assert_array_equal(g0["temp"][2, 50:, 10:140], wants[0][2, 50:, 10:140])
    # Two files in one reference set: the second file's chunks shifted along time.
    r0, r1 = (rewrite(kerchunk_refs(p), str(p), f"{url}/{p.name}")["refs"] for p in paths)
    refs = {k: v for k, v in r0.items() if not k.startswith("temp/") or k.split("/")[1].startswith(".")}
    meta = json.loads(r0["temp/.zarray"])
    meta["shape"][0] = 10
    refs["temp/.zarray"] = json.dumps(meta)
    for shift, r in ((0, r0), (5, r1)):
        for k, v in r.items():
            if k.startswith("temp/") and not k.split("/")[1].startswith("."):
                i, j, m = k.split("/")[1].split(".")
                refs[f"temp/{int(i) + shift}.{j}.{m}"] = v
    want = np.concatenate(wants)
    g = ga.open_virtual({"version": 1, "refs": refs})
    np.testing.assert_array_equal(g["temp"][:], want)
    np.testing.assert_array_equal(g["temp"][4:9, 30:90], want[4:9, 30:90])
    z = zarr.open_group(ga.VirtualStore({"version": 1, "refs": refs}), mode="r", zarr_format=2)  # type: ignore[arg-type]
    np.testing.assert_array_equal(z["temp"][3:8], want[3:8])


def test_http_changed_file_fails_never_mixes(served: tuple[Path, str]) -> None:
    d, url = served
    p = d / "m.h5"
    write_h5(p)
    g = ga.open_virtual(rewrite(kerchunk_refs(p), str(p), f"{url}/m.h5"))
    g["t"][0]
    tmp = d / "m.tmp"
    write_h5(tmp, seed=1, partial=False)  # another size: the time steps never written are there now
    os.replace(tmp, p)
    with pytest.raises(ArchiveChangedError, match=f"{url}/m.h5: changed since its references were opened"):
        g["t"][0]
    os.remove(p)
    with pytest.raises(ArchiveChangedError, match=f"{url}/m.h5: referenced file is gone"):
        g["t"][0]


def test_answers_with_the_first_seen_etag_need_no_head_after_the_read(
    served: tuple[Path, str], archive_nginx: NginxServer
) -> None:
    """Through the native core, a read whose answers all carried the file's first-seen strong ETag sends no
    ``HEAD`` after it (the bytes are of that version)."""
    d, url = served
    p = d / "e.h5"
    data = write_h5(p, partial=False)
    g = ga.open_virtual(rewrite(kerchunk_refs(p), str(p), f"{url}/e.h5"))
    np.testing.assert_array_equal(g["t"][0], data["t"][0])  # the first read takes the stamp (one HEAD)
    before = len(archive_nginx.requests())
    np.testing.assert_array_equal(g["t"][1], data["t"][1])
    heads = [r for r in archive_nginx.requests()[before:] if r.startswith("HEAD ") and "/e.h5" in r]
    assert heads == []


def test_http_same_size_rewrite_fails(served: tuple[Path, str]) -> None:
    """A file rewritten with other bytes of the same size: nginx's ETag (modification time and size)
    changes, and the next read fails instead of mixing versions."""
    d, url = served
    p = d / "s.h5"
    write_h5(p, partial=False)
    g = ga.open_virtual(rewrite(kerchunk_refs(p), str(p), f"{url}/s.h5"))
    first = g["t"][0]
    raw = bytearray(p.read_bytes())
    off, n = kerchunk_refs(p)["refs"]["t/1.0.0"][1:]
    raw[off + 2 : off + n - 4] = bytes(n - 6)  # another chunk's bytes, the file's size unchanged
    st = p.stat()
    p.write_bytes(bytes(raw))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))  # a later second, as a real rewrite
    assert p.stat().st_size == st.st_size
    with pytest.raises(ArchiveChangedError, match=f"{url}/s.h5: changed since its references were opened"):
        g["t"][1]
    np.testing.assert_array_equal(ga.open_virtual(rewrite(kerchunk_refs(p), str(p), f"{url}/s.h5"))["t"][0], first)


def test_http_file_shorter_than_its_references(served: tuple[Path, str]) -> None:
    d, url = served
    p = d / "s.h5"
    write_h5(p)
    refs = rewrite(kerchunk_refs(p), str(p), f"{url}/s.h5")
    shutil.copyfile(p, d / "full.h5")
    os.truncate(p, p.stat().st_size // 2)
    with pytest.raises(ChunkDecodeError, match=f"{url}/s.h5: truncated"):
        ga.open_virtual(refs)["t"][:]


@pytest.mark.parametrize("mode", ["ignore-range", "truncate"])
def test_faulty_server_fails_with_the_url(archive_faults: FaultServer, tmp_path: Path, mode: str) -> None:
    p = tmp_path / "f.h5"
    write_h5(p)
    name = f"{mode}-{uuid.uuid4().hex[:6]}.h5"
    archive_faults.objects[name] = p.read_bytes()
    url = archive_faults.url(name, mode, "always")
    g = ga.open_virtual(rewrite(kerchunk_refs(p), str(p), url))
    with pytest.raises(OSError, match=f"{mode}/always/{name}"):
        g["t"][1]


@pytest.fixture
def bucket(moto: MotoServer) -> tuple[Any, dict[str, str]]:
    """A fresh bucket of moto's S3 server: a botocore client and the storage options."""
    import botocore.session

    opts = moto.storage_options
    client = botocore.session.get_session().create_client(
        "s3", region_name="us-east-1", endpoint_url=opts["endpoint_url"],
        aws_access_key_id=opts["key"], aws_secret_access_key=opts["secret"],
    )
    name = f"archives-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=name)
    return client, {**opts, "bucket": name}


def test_s3_kerchunk_matches_h5py(bucket: tuple[Any, dict[str, str]], tmp_path: Path) -> None:
    client, opts = bucket
    b = opts.pop("bucket")
    p = tmp_path / "a.h5"
    data = write_h5(p, fletcher32=True)
    n = tmp_path / "n.nc"
    want_n = _netcdf4(n)
    for f in (p, n):
        client.put_object(Bucket=b, Key=f"dir/{f.name}", Body=f.read_bytes())
    # VirtualiZarr's ManifestStore (fletcher32 too: kerchunk skips those arrays), targets on S3.
    g = ga.open_virtual(rewrite_manifest(manifest_store(p), f"s3://{b}/dir/a.h5"), storage_options=opts)
    assert g["t"].refs.files == [f"s3://{b}/dir/a.h5"]
    for sel in SELECTIONS:
        np.testing.assert_array_equal(g["t"][sel], data["t"][sel])
    np.testing.assert_array_equal(g["q"].read(batch=True), data["q"])
    gn = ga.open_virtual(rewrite(kerchunk_refs(n), str(n), f"s3://{b}/dir/n.nc"), storage_options=opts)
    np.testing.assert_array_equal(gn["temp"][1:4, 10:90], want_n[1:4, 10:90])
    store = ga.VirtualStore(rewrite(kerchunk_refs(n), str(n), f"s3://{b}/dir/n.nc"), storage_options=opts)
    np.testing.assert_array_equal(zarr.open_group(store, mode="r", zarr_format=2)["temp"][2:4], want_n[2:4])  # type: ignore[arg-type]


def test_s3_changed_object_fails(bucket: tuple[Any, dict[str, str]], tmp_path: Path) -> None:
    client, opts = bucket
    b = opts.pop("bucket")
    p, other = tmp_path / "a.h5", tmp_path / "b.h5"
    write_h5(p)
    write_h5(other, seed=5, partial=False)
    client.put_object(Bucket=b, Key="a.h5", Body=p.read_bytes())
    g = ga.open_virtual(rewrite(kerchunk_refs(p), str(p), f"s3://{b}/a.h5"), storage_options=opts)
    g["t"][0]
    client.put_object(Bucket=b, Key="a.h5", Body=other.read_bytes())
    with pytest.raises(ArchiveChangedError, match=f"s3://{b}/a.h5: changed since its references were opened"):
        g["t"][0]


def test_s3_whole_file_references_of_a_blosc_zarr_v2_array(bucket: tuple[Any, dict[str, str]], tmp_path: Path) -> None:
    """``[url]`` references (whole objects, sizes by HEAD at open), blosc through numcodecs."""
    from numcodecs import Blosc

    client, opts = bucket
    b = opts.pop("bucket")
    root = tmp_path / "a.zarr"
    want = np.random.default_rng(7).integers(0, 1000, (50, 70)).astype("<i4")
    z = zarr.create_array(str(root), shape=want.shape, chunks=(16, 32), dtype="<i4", zarr_format=2, fill_value=-1,
                          compressors=Blosc(cname="zstd", shuffle=Blosc.SHUFFLE))
    z[:40] = want[:40]
    refs: dict[str, Any] = {".zgroup": json.dumps({"zarr_format": 2}), ".zarray": (root / ".zarray").read_text()}
    for f in os.listdir(root):
        if not f.startswith("."):
            client.put_object(Bucket=b, Key=f"z/{f}", Body=(root / f).read_bytes())
            refs[f] = [f"s3://{b}/z/{f}"]
    got = ga.open_virtual({"version": 1, "refs": refs}, storage_options=opts)[""][:]
    np.testing.assert_array_equal(got, z[:])


def test_wave_laid_out_otherwise_is_copied_where_the_plan_says(served: tuple[Path, str]) -> None:
    """When the wave's slots are not the plan's (here: the plan puts the later range first), the
    bytes still land at the plan's positions (one copy)."""
    from gdsstore.archives import fetch
    from gdsstore.archives.plan import plan_reads

    d, url = served
    data = np.random.default_rng(0).integers(0, 256, 10_000, dtype=np.uint8)
    (d / "b.bin").write_bytes(data.tobytes())
    rp = plan_reads(np.array([0, 0]), np.array([100, 5000]), np.array([300, 700]), max_gap=0)
    targets = fetch.Targets([f"{url}/b.bin"])
    root = fetch.split_url(f"{url}/b.bin")[0]
    buf = np.zeros(2048, dtype=np.uint8)
    read_pos = np.array([704, 0])
    fetch._land_run(targets, root, [f"{url}/b.bin"] * 2, rp, np.array([1, 0]), buf, read_pos, "test")
    np.testing.assert_array_equal(buf[704:1004], data[100:400])
    np.testing.assert_array_equal(buf[0:700], data[5000:5700])
    assert fetch.chunk_positions(rp, read_pos).tolist() == [704, 0]


@pytest.mark.parametrize("order", [[0, 1], [1, 0]])  # the plan's layout, and another: in place or copied
def test_large_reads_are_cut_into_pieces_in_flight_together(
    served: tuple[Path, str], archive_nginx: NginxServer, order: list[int]
) -> None:
    """A window's reads are few and large (a file's chunks coalesced): the wave sends each as requests of at
    most one piece, and every byte lands where the plan says."""
    from gdsstore.archives import fetch
    from gdsstore.archives.plan import plan_reads

    d, url = served
    data = np.random.default_rng(1).integers(0, 256, (7 << 20) // 2 + 1000, dtype=np.uint8)
    (d / "big.bin").write_bytes(data.tobytes())
    rp = plan_reads(np.array([0, 0]), np.array([10, len(data) - 500]), np.array([3 << 20, 300]), max_gap=0)
    buf = np.zeros((3 << 20) + 1024, dtype=np.uint8)
    read_pos = np.array([0, 3 << 20]) if order == [0, 1] else np.array([320, 0])
    before = len(archive_nginx.requests())
    targets = fetch.Targets([f"{url}/big.bin"])
    root = fetch.split_url(f"{url}/big.bin")[0]
    fetch._land_run(targets, root, [f"{url}/big.bin"] * 2, rp, np.array(order), buf, read_pos, "test")
    a, b = read_pos.tolist()
    np.testing.assert_array_equal(buf[a : a + (3 << 20)], data[10 : 10 + (3 << 20)])
    np.testing.assert_array_equal(buf[b : b + 300], data[len(data) - 500 : len(data) - 200])
    gets = [r for r in archive_nginx.requests()[before:] if r.startswith("GET ") and "/big.bin" in r]
    assert len(gets) == 3 + 1, gets  # 3 MiB in pieces of 1 MiB, and the small read


def test_local_and_remote_files_in_one_read_and_pickled(served: tuple[Path, str], tmp_path: Path) -> None:
    """One reference set over a local file and a file on nginx: one read lands both (the local batch,
    then the wave) in one buffer; the group pickles (dask) and reads the same after."""
    import pickle

    d, url = served
    local, remote = tmp_path / "l.h5", d / "r.h5"
    datas = [write_h5(local, seed=0, partial=False), write_h5(remote, seed=1, partial=False)]
    ra = kerchunk_refs(local)["refs"]
    rb = rewrite(kerchunk_refs(remote), str(remote), f"{url}/r.h5")["refs"]
    refs = {k: v for k, v in ra.items() if not k.startswith("t/") or k.split("/")[1].startswith(".")}
    meta = json.loads(ra["t/.zarray"])
    meta["shape"][0] = 10
    refs["t/.zarray"] = json.dumps(meta)
    for shift, r in ((0, ra), (5, rb)):
        for k, v in r.items():
            if k.startswith("t/") and not k.split("/")[1].startswith("."):
                i, j, m = k.split("/")[1].split(".")
                refs[f"t/{int(i) + shift}.{j}.{m}"] = v
    want = np.concatenate([x["t"] for x in datas])
    g = ga.open_virtual({"version": 1, "refs": refs})
    assert sorted(g["t"].refs.files) == sorted([str(local), f"{url}/r.h5"])
    np.testing.assert_array_equal(g["t"][3:8, 100:200], want[3:8, 100:200])
    again = pickle.loads(pickle.dumps(g))
    np.testing.assert_array_equal(again["t"][:], want)
    np.testing.assert_array_equal(again["t"].read(slice(4, 6), batch=True), want[4:6])
