"""GDSStore against zarr's shared store contract (``zarr.testing.store.StoreTests``), host and device."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import Buffer, cpu, default_buffer_prototype, gpu
from zarr.core.sync import _collect_aiterator
from zarr.testing.store import StoreTests

import gdsstore
from gdsstore import GDSStore
from gdsstore.engine.localfs import TMP_SUFFIX, LocalBackend


def _write_direct(store: GDSStore, key: str, data: bytes) -> None:
    path = Path(store.root, *key.split("/"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


class TestGDSStoreHost(StoreTests[GDSStore, cpu.Buffer]):
    store_cls = GDSStore
    buffer_cls = cpu.Buffer

    async def set(self, store: GDSStore, key: str, value: Buffer) -> None:
        # Bypasses the store (the contract tests read what the store wrote, and vice versa).
        _write_direct(store, key, value.to_bytes())

    async def get(self, store: GDSStore, key: str) -> Buffer:
        return self.buffer_cls.from_bytes(Path(store.root, *key.split("/")).read_bytes())

    @pytest.fixture
    def store_kwargs(self, tmp_path: Path) -> dict[str, Any]:
        # The root exists, as zarr's LocalStore tests give theirs: a read-only store must find its root.
        (tmp_path / "store").mkdir(exist_ok=True)
        return {"root": str(tmp_path / "store")}

    def test_store_repr(self, store: GDSStore) -> None:
        assert repr(store) == f"GDSStore('file://{store.root}')"
        assert str(store) == f"file://{store.root}"

    def test_store_supports_writes(self, store: GDSStore) -> None:
        assert store.supports_writes
        assert store.supports_deletes

    def test_store_supports_listing(self, store: GDSStore) -> None:
        assert store.supports_listing

    # -- beyond the shared suite ----------------------------------------------------------------------

    def test_public_attributes(self, store: GDSStore) -> None:
        assert isinstance(store.backend, LocalBackend)
        assert os.path.isabs(store.root)
        assert store.backend.url == str(store)

    def test_file_url_root_equals_path_root(self, tmp_path: Path) -> None:
        a = GDSStore(str(tmp_path))
        b = GDSStore(f"file://{tmp_path}")
        assert a == b and a.root == b.root == str(tmp_path)
        assert a != GDSStore(str(tmp_path / "other"))
        assert GDSStore(tmp_path) == a  # os.PathLike

    def test_relative_root_pickles_as_absolute(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(tmp_path)
        store = GDSStore("rel.zarr")
        store.set_sync("k", cpu.Buffer.from_bytes(b"v"))
        payload = pickle.dumps(store)
        monkeypatch.chdir("/")
        again = pickle.loads(payload)
        assert again.root == str(tmp_path / "rel.zarr")
        assert again.get_sync("k").to_bytes() == b"v"  # type: ignore[union-attr]

    def test_open_creates_root_unless_read_only(self, tmp_path: Path) -> None:
        with pytest.raises(FileNotFoundError, match="does not exist"):  # as zarr's LocalStore
            zarr.core.sync.sync(GDSStore.open(str(tmp_path / "ro"), read_only=True))
        assert not (tmp_path / "ro").exists()
        zarr.core.sync.sync(GDSStore.open(str(tmp_path / "rw")))
        assert (tmp_path / "rw").is_dir()

    async def test_pickle_keeps_read_only_and_reads(self, store: GDSStore) -> None:
        await store.set("k", cpu.Buffer.from_bytes(b"abc"))
        ro = pickle.loads(pickle.dumps(store.with_read_only(True)))
        assert ro.read_only and ro == store
        got = await ro.get("k", default_buffer_prototype())
        assert got is not None and got.to_bytes() == b"abc"
        with pytest.raises(ValueError, match="read-only"):
            await ro.set("k", cpu.Buffer.from_bytes(b"x"))

    async def test_set_rejects_non_buffer(self, store: GDSStore) -> None:
        with pytest.raises(TypeError, match=r"GDSStore\.set\(\): `value` must be a Buffer"):
            await store.set("k", b"abc")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"GDSStore\.set_sync\(\): `value` must be a Buffer"):
            store.set_sync("k", np.zeros(3, "u1"))  # type: ignore[arg-type]
        assert not await store.exists("k")

    @pytest.mark.parametrize(
        "bad",
        [RangeByteRequest(-1, 2), RangeByteRequest(3, 1), OffsetByteRequest(-2), SuffixByteRequest(-1)],
    )
    async def test_bad_byte_ranges(self, store: GDSStore, bad: Any) -> None:
        await store.set("k", cpu.Buffer.from_bytes(b"abcdef"))
        with pytest.raises(ValueError, match=r"GDSStore\.get\(\): byte range"):
            await store.get("k", default_buffer_prototype(), bad)

    async def test_past_eof_ranges_clamp(self, store: GDSStore) -> None:
        await store.set("k", cpu.Buffer.from_bytes(b"abcdef"))
        proto = default_buffer_prototype()
        cases = {
            RangeByteRequest(4, 100): b"ef",
            RangeByteRequest(10, 20): b"",
            OffsetByteRequest(6): b"",
            OffsetByteRequest(60): b"",
            SuffixByteRequest(100): b"abcdef",
            SuffixByteRequest(0): b"",
        }
        for req, want in cases.items():
            got = await store.get("k", proto, req)
            assert got is not None and got.to_bytes() == want, req
            sync_got = store.get_sync("k", prototype=proto, byte_range=req)
            assert sync_got is not None and sync_got.to_bytes() == want, req

    async def test_get_ranges_coalesces_into_few_engine_reads(self, store: GDSStore) -> None:
        data = bytes(range(256)) * 64  # 16 KiB
        await store.set("shard", cpu.Buffer.from_bytes(data))
        reqs = [RangeByteRequest(i * 100, i * 100 + 50) for i in range(20)] + [SuffixByteRequest(10)]
        with gdsstore.trace() as t:
            batches = await _collect_aiterator(
                store.get_ranges("shard", reqs, prototype=default_buffer_prototype())
            )
        # All 21 ranges are within 1 MiB of each other: one engine read serves them all.
        assert len(batches) == 1
        assert sum(v["ops"] for v in t.totals.values()) == 1
        got = {i: b.to_bytes() for batch in batches for i, b in batch}
        assert got == {i: data[r.start : r.end] for i, r in enumerate(reqs[:-1])} | {20: data[-10:]}
        # With no gap allowed, the 20 disjoint ranges are 20 reads (the suffix is its own).
        batches = await _collect_aiterator(
            store.get_ranges("shard", reqs, prototype=default_buffer_prototype(), max_gap_bytes=0)
        )
        assert len(batches) == 21
        flat = store.get_ranges_sync("shard", reqs, prototype=default_buffer_prototype())
        assert {i: b.to_bytes() for i, b in flat if b is not None} == got

    async def test_get_ranges_missing_key(self, store: GDSStore) -> None:
        with pytest.raises(BaseExceptionGroup) as ei:
            await _collect_aiterator(
                store.get_ranges("nope", [RangeByteRequest(0, 1)], prototype=default_buffer_prototype())
            )
        assert ei.group_contains(FileNotFoundError)
        with pytest.raises(BaseExceptionGroup) as ei:
            store.get_ranges_sync("nope", [None], prototype=default_buffer_prototype())
        assert ei.group_contains(FileNotFoundError)

    async def test_get_partial_values_missing_and_repeated(self, store: GDSStore) -> None:
        await store.set("a", cpu.Buffer.from_bytes(b"0123456789"))
        out = await store.get_partial_values(
            default_buffer_prototype(),
            [("a", RangeByteRequest(0, 2)), ("missing", None), ("a", SuffixByteRequest(3)), ("a", None)],
        )
        assert [o.to_bytes() if o is not None else None for o in out] == [b"01", None, b"789", b"0123456789"]

    async def test_directory_is_not_a_key(self, store: GDSStore) -> None:
        await store.set("g/c/0", cpu.Buffer.from_bytes(b"x"))
        assert await store.get("g", default_buffer_prototype()) is None
        assert await store.get("g/c/0/deeper", default_buffer_prototype()) is None
        assert not await store.exists("g")
        with pytest.raises(FileNotFoundError):
            await store.getsize("g")

    async def test_temp_files_never_listed(self, store: GDSStore) -> None:
        await store.set("a/b", cpu.Buffer.from_bytes(b"x"))
        # What a writer killed mid-set leaves behind.
        _write_direct(store, f"a/.b.0123{TMP_SUFFIX}", b"torn")
        assert [k async for k in store.list()] == ["a/b"]
        assert [k async for k in store.list_dir("a")] == ["b"]
        with pytest.raises(ValueError, match="reserved"):
            await store.set(f"a/.x.0123{TMP_SUFFIX}", cpu.Buffer.from_bytes(b"x"))
        # A key that only looks like the suffix is an ordinary key, listed as any other.
        await store.set(f"{TMP_SUFFIX}/0", cpu.Buffer.from_bytes(b"y"))
        await store.set(f"c/{TMP_SUFFIX}", cpu.Buffer.from_bytes(b"z"))
        assert sorted([k async for k in store.list()]) == sorted(["a/b", f"{TMP_SUFFIX}/0", f"c/{TMP_SUFFIX}"])

    async def test_list_dir_names_only_prefixes_of_keys(self, store: GDSStore) -> None:
        # zarr's hierarchy state machine: deleting an array's last chunk leaves no "c" in its listing
        # (as in an object store), though the file system keeps the emptied directories.
        for k in ("a/zarr.json", "a/c/0/0", "a/d/0"):
            await store.set(k, cpu.Buffer.from_bytes(b"."))
        await store.delete("a/c/0/0")
        assert Path(store.root, "a", "c", "0").is_dir()
        assert sorted([k async for k in store.list_dir("a")]) == ["d", "zarr.json"]
        os.makedirs(Path(store.root, "a", "empty"))
        assert sorted([k async for k in store.list_dir("a")]) == ["d", "zarr.json"]
        assert [k async for k in store.list_dir("a/c")] == []

    async def test_list_prefix_is_a_string_prefix(self, store: GDSStore) -> None:
        for k in ("foo/a", "foo/b/c", "food", "f"):
            await store.set(k, cpu.Buffer.from_bytes(b"."))
        assert sorted([k async for k in store.list_prefix("foo")]) == ["foo/a", "foo/b/c", "food"]
        assert sorted([k async for k in store.list_prefix("foo/")]) == ["foo/a", "foo/b/c"]
        assert sorted([k async for k in store.list_prefix("foo/b")]) == ["foo/b/c"]
        assert await store.getsize_prefix("foo") == 2

    async def test_delete_dir_and_clear_keep_root(self, store: GDSStore) -> None:
        for k in ("zarr.json", "x/zarr.json", "x/c/0", "xy/c/0"):
            await store.set(k, cpu.Buffer.from_bytes(b"."))
        await store.delete_dir("x")
        assert sorted([k async for k in store.list()]) == ["xy/c/0", "zarr.json"]
        await store.clear()
        assert await store.is_empty("")
        assert os.path.isdir(store.root)

    async def test_set_if_not_exists_is_exclusive_under_races(self, store: GDSStore) -> None:
        import asyncio

        values = [cpu.Buffer.from_bytes(bytes([i]) * 4096) for i in range(16)]
        await asyncio.gather(*(store.set_if_not_exists("race", v) for v in values))
        got = (await store.get("race", default_buffer_prototype())).to_bytes()  # type: ignore[union-attr]
        assert got in {v.to_bytes() for v in values}
        assert os.listdir(store.root) == ["race"]  # no temp files left behind


@pytest.mark.gpu
class TestGDSStoreDevice(TestGDSStoreHost):
    """The same contract with device buffers: writes from and reads into CuPy memory."""

    buffer_cls = gpu.Buffer  # type: ignore[assignment]

    @pytest.fixture(autouse=True)
    def _gpu_buffers(self) -> Any:
        # default_buffer_prototype() -> the GPU prototype, so the suite's reads allocate device memory.
        with zarr.config.enable_gpu():
            yield

    async def get(self, store: GDSStore, key: str) -> Buffer:
        return gpu.Buffer.from_bytes(Path(store.root, *key.split("/")).read_bytes())

    async def test_reads_land_in_device_memory(self, store: GDSStore) -> None:
        import cupy

        await store.set("k", gpu.Buffer.from_bytes(b"0123456789"))
        proto = default_buffer_prototype()
        assert proto.buffer is gpu.Buffer
        got = await store.get("k", proto, RangeByteRequest(2, 6))
        assert isinstance(got, gpu.Buffer)
        assert isinstance(got.as_array_like(), cupy.ndarray)
        assert got.to_bytes() == b"2345"
        sync_got = store.get_sync("k", prototype=proto)
        assert isinstance(sync_got, gpu.Buffer) and isinstance(sync_got.as_array_like(), cupy.ndarray)
        with gdsstore.trace() as t:
            await store.get("k", proto)
        assert all(e.device is not None for e in t.events if e.op == "read")
        assert t.routes <= {"posix", "cufile"} and t.routes
