"""The default path: plain zarr over GDSStore (host buffers, zarr's own pipeline, no enable call)
reaches the engine's batches — the concurrent gets of one event-loop tick are one batch of reads
(locally) or one wave (remotely), concurrent sets are published as batches — and
``gdsstore.enable_pipeline()`` switches zarr to gdsstore's pipeline with host buffers."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import Buffer, cpu, default_buffer_prototype
from zarr.storage import LocalStore

import gdsstore
from gdsstore import GDSStore
from gdsstore.engine.localfs import TMP_SUFFIX

BATCH_READ = ("read", "posix", "batch of reads into host buffer")
BATCH_WRITE = ("write", "posix", "batch of atomic writes from host buffers")
PROTO = default_buffer_prototype()


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def data() -> np.ndarray:
    return np.arange(64 * 64, dtype="f4").reshape(64, 64)


def test_plain_zarr_reads_go_through_engine_batches(tmp_path: Path, data: np.ndarray) -> None:
    z = zarr.create_array(LocalStore(tmp_path / "a.zarr"), shape=data.shape, chunks=(16, 16), dtype="f4",
                          compressors=None)
    z[:] = data
    with gdsstore.trace() as t:
        got = zarr.open_array(GDSStore(tmp_path / "a.zarr"), mode="r")[:]
    assert isinstance(got, np.ndarray) and np.array_equal(got, data)
    rows = t.by_reason()
    assert BATCH_READ in rows, str(t)
    # 16 chunks (and the metadata) in fewer engine calls than gets: several chunks a batch.
    assert rows[BATCH_READ]["ops"] < 16
    assert rows[BATCH_READ]["bytes"] == data.nbytes + os.path.getsize(tmp_path / "a.zarr" / "zarr.json")
    assert not [k for k in rows if k[2] == "host buffer" and k[0] == "read"]  # no read of its own per chunk


def test_gets_of_one_tick_are_one_batch(tmp_path: Path) -> None:
    store = GDSStore(tmp_path)
    for i in range(8):
        (tmp_path / f"k{i}").write_bytes(bytes([i]) * (100 + i))

    async def gets(n: int) -> list[Buffer | None]:
        return list(await asyncio.gather(*(store.get(f"k{i}", PROTO) for i in range(n))))

    # Opened first: on a fresh store each get's lazy open is a thread hop of its own, and on a loaded
    # machine the two hops came back in different ticks (two batches, in one full-suite run of five).
    zarr.core.sync.sync(store._ensure_open())
    with gdsstore.trace() as t:
        two = zarr.core.sync.sync(gets(2))
    assert [b.to_bytes() for b in two if b is not None] == [b"\x00" * 100, b"\x01" * 101]
    assert t.by_reason()[BATCH_READ]["ops"] == 1
    with gdsstore.trace() as t:
        eight = zarr.core.sync.sync(gets(8))
    assert [len(b) for b in eight if b is not None] == [100 + i for i in range(8)]
    # At most a few gets a batch (the loop thread copies chunks meanwhile): 8 gets, 2 batches.
    assert t.by_reason()[BATCH_READ]["ops"] == 2
    assert t.by_reason()[BATCH_READ]["bytes"] == sum(100 + i for i in range(8))


def test_batched_gets_keep_each_answer(tmp_path: Path) -> None:
    """Ranges, missing keys, directories and a failing key in one batch: each caller gets its own."""
    store = GDSStore(tmp_path)
    (tmp_path / "x").write_bytes(bytes(range(100)))
    (tmp_path / "d").mkdir()
    os.symlink("loop", tmp_path / "loop")  # opening it fails with ELOOP: an error, not "missing"
    requests = [
        ("x", None), ("x", RangeByteRequest(10, 20)), ("x", OffsetByteRequest(95)),
        ("x", SuffixByteRequest(3)), ("x", RangeByteRequest(90, 200)), ("missing", None), ("d", None),
        ("loop", None),
    ]

    async def gets() -> list[object]:
        return await asyncio.gather(*(store.get(k, PROTO, r) for k, r in requests), return_exceptions=True)

    got = zarr.core.sync.sync(gets())
    assert [g.to_bytes() if isinstance(g, cpu.Buffer) else g for g in got[:7]] == [
        bytes(range(100)), bytes(range(10, 20)), bytes(range(95, 100)), bytes(range(97, 100)),
        bytes(range(90, 100)), None, None,
    ]
    assert isinstance(got[7], OSError) and not isinstance(got[7], FileNotFoundError)


def test_symlink_rules_hold_in_batches(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"s")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "link")
    follow = GDSStore(root)
    strict = GDSStore(root, storage_options={"follow_symlinks": False})
    assert zarr.core.sync.sync(follow.get("link/secret", PROTO)).to_bytes() == b"s"  # type: ignore[union-attr]
    with pytest.raises(PermissionError, match="follow_symlinks"):
        zarr.core.sync.sync(strict.get("link/secret", PROTO))
    with pytest.raises(PermissionError, match="outside the root"):
        zarr.core.sync.sync(follow.set("link/new", cpu.Buffer.from_bytes(b"n")))
    assert not (outside / "new").exists()


def test_plain_zarr_writes_are_published_in_batches(tmp_path: Path, data: np.ndarray) -> None:
    kw = {"shape": data.shape, "chunks": (16, 16), "dtype": "f4", "compressors": None}
    zarr.create_array(LocalStore(tmp_path / "ref.zarr"), **kw)[:] = data  # type: ignore[arg-type]
    z = zarr.create_array(GDSStore(tmp_path / "gds.zarr"), **kw)  # type: ignore[arg-type]
    with gdsstore.trace() as t:
        z[:] = data
    rows = t.by_reason()
    assert BATCH_WRITE in rows and rows[BATCH_WRITE]["ops"] < 16, str(t)
    assert rows[BATCH_WRITE]["bytes"] == data.nbytes
    assert _tree(tmp_path / "gds.zarr") == _tree(tmp_path / "ref.zarr")  # byte-identical, no temp files
    assert not [p for p in (tmp_path / "gds.zarr").rglob(f"*{TMP_SUFFIX}")]


def test_batched_sets_stay_exclusive_and_make_way(tmp_path: Path) -> None:
    store = GDSStore(tmp_path)
    (tmp_path / "empty" / "sub").mkdir(parents=True)  # deleted keys' directories: the name is free
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_bytes(b"f")

    async def sets() -> list[object]:
        return await asyncio.gather(
            *(store.set_if_not_exists("once", cpu.Buffer.from_bytes(bytes([i]) * 4)) for i in range(6)),
            store.set("empty", cpu.Buffer.from_bytes(b"e")),
            store.set("full", cpu.Buffer.from_bytes(b"x")),
            store.set_if_not_exists("once", cpu.Buffer.from_bytes(b"late")),
            return_exceptions=True,
        )

    got = zarr.core.sync.sync(sets())
    assert got[:7] == [None] * 7 and got[8] is None
    assert isinstance(got[7], IsADirectoryError)
    once = (tmp_path / "once").read_bytes()
    assert once in {b"late", *(bytes([i]) * 4 for i in range(6))}  # exactly one racing writer won, whole
    assert (tmp_path / "empty").read_bytes() == b"e" and (tmp_path / "full" / "f").read_bytes() == b"f"
    assert not list(tmp_path.rglob(f"*{TMP_SUFFIX}"))


def test_values_over_task_size_keep_the_file_route(tmp_path: Path) -> None:
    """A value over task_size goes through the engine file (parallel pieces), still atomic."""
    store = GDSStore(tmp_path)
    value = np.arange(3 << 18, dtype="u1")
    with gdsstore.config.set({"task_size": 1 << 18}), gdsstore.trace() as t:
        store.set_sync("big", cpu.Buffer.from_array_like(value))
    assert (tmp_path / "big").read_bytes() == value.tobytes()
    assert t.by_reason()[("write", "posix", "host buffer")]["bytes"] == value.nbytes


def test_enable_pipeline_is_gdsstores_pipeline_on_host_buffers(tmp_path: Path, data: np.ndarray) -> None:
    store = GDSStore(tmp_path / "a.zarr")
    before, buffer = zarr.config.get("codec_pipeline.path"), zarr.config.get("buffer")
    with gdsstore.enable_pipeline():
        assert zarr.config.get("codec_pipeline.path") == "gdsstore.gpu.pipeline.GDSCodecPipeline"
        assert zarr.config.get("buffer") == buffer  # host buffers stay
        z = zarr.create_array(store, shape=data.shape, chunks=(16, 16), dtype="f4", compressors=None)
        z[:] = data
        with gdsstore.trace() as t:
            got = zarr.open_array(store, mode="r")[:]
    assert zarr.config.get("codec_pipeline.path") == before
    assert isinstance(got, np.ndarray) and np.array_equal(got, data)
    assert t.totals["posix"]["bytes"] >= data.nbytes


# -- remote: the gets of a tick are one wave --------------------------------------------------------


@pytest.fixture(scope="module")
def nginx_array(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, np.ndarray]]:
    from servers.nginx import NginxServer, nginx_binary

    if nginx_binary() is None:
        pytest.skip("nginx is not installed (apt-get install nginx-light)")
    root = tmp_path_factory.mktemp("www")
    data = np.arange(32 * 32, dtype="i4").reshape(32, 32)
    z = zarr.create_array(LocalStore(root / "a.zarr"), shape=data.shape, chunks=(8, 8), dtype="i4",
                          compressors=None)
    z[:] = data
    srv = NginxServer(str(root), workers=1, tcp_nopush=False)
    try:
        yield srv.url("a.zarr"), data
    finally:
        srv.close()


def test_plain_zarr_over_http_reads_in_waves(nginx_array: tuple[str, np.ndarray]) -> None:
    url, data = nginx_array
    with gdsstore.trace() as t:
        got = zarr.open_array(GDSStore(url, read_only=True), mode="r")[:]
    assert np.array_equal(got, data)
    waves = {k: v for k, v in t.by_reason().items() if k[0] == "read" and k[2].startswith("wave")}
    assert waves, str(t)
    ops = sum(v["ops"] for v in waves.values())
    requests = sum(v["requests"] for v in waves.values())
    assert requests >= 16 and ops < requests  # 16 chunks, several requests a wave
