"""gdsstore.engine.batch: batched local reads (pieces, missing files, bounds, one trace event)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gdsstore
from gdsstore import policy
from gdsstore.engine import batch, localfs
from gdsstore.engine.landing import AddressTable, land


@pytest.fixture
def files(tmp_path: Path) -> tuple[list[str], list[bytes]]:
    rng = np.random.default_rng(0)
    datas = [rng.integers(0, 255, n, dtype=np.uint8).tobytes() for n in (3 << 20, 100, (2 << 20) + 5)]
    paths = []
    for i, b in enumerate(datas):
        (tmp_path / str(i)).write_bytes(b)
        paths.append(str(tmp_path / str(i)))
    return [*paths, str(tmp_path / "missing")], datas


def test_read_batch_splits_big_reads_and_reports_counts(files: tuple[list[str], list[bytes]]) -> None:
    paths, datas = files
    sizes = np.array([3 << 20, 100, (2 << 20) + 99, 1 << 20])  # the third asks past EOF: short
    dst = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    dest = np.zeros(int(sizes.sum()), np.uint8)
    with gdsstore.config.set({"task_size": 1 << 20}), gdsstore.trace() as t:
        got = batch.read_batch(paths, np.zeros(4, np.int64), sizes, dest, dst, 4, into="test")
    assert got.tolist() == [len(d) for d in datas] + [-1]
    for i, d in enumerate(datas):
        assert bytes(dest[dst[i] : dst[i] + len(d)]) == d
    events = [(op, route, r) for (op, route, r) in t.by_reason() if op == "read"]
    who = policy.decide_local_batch(core_missing=batch._core_missing(), reads=1).reason
    assert events == [("read", "posix", f"batch of reads into test; {who}")]  # one event per batch
    assert t.totals["posix"]["bytes"] == sum(len(d) for d in datas)


def test_read_batch_offsets_and_bounds(files: tuple[list[str], list[bytes]]) -> None:
    paths, datas = files
    dest = np.zeros(64, np.uint8)
    got = batch.read_batch(paths[1:2], np.array([10]), np.array([50]), dest, np.array([7]))
    assert got.tolist() == [50] and bytes(dest[7:57]) == datas[1][10:60]
    with pytest.raises(ValueError, match="overflow"):
        batch.read_batch(paths[1:2], np.array([0]), np.array([60]), dest, np.array([10]))


def test_stat_batch_and_local_paths(files: tuple[list[str], list[bytes]], tmp_path: Path) -> None:
    paths, datas = files
    assert batch.stat_batch([*paths, str(tmp_path)]).tolist() == [len(d) for d in datas] + [-1, -1]
    assert localfs.local_paths(str(tmp_path), ["0", "c/1"], "t") == [
        os.path.join(str(tmp_path), "0"),
        os.path.join(str(tmp_path), "c", "1"),
    ]
    for bad in ("../x", "a//b", "/abs", "a/./b"):
        with pytest.raises(ValueError, match="invalid key"):
            localfs.local_paths(str(tmp_path), ["ok", bad], "t")


def test_land_local_expect_checks_sizes(tmp_path: Path) -> None:
    backend = gdsstore.GDSStore(str(tmp_path)).backend
    (tmp_path / "a").write_bytes(b"x" * 10)
    (tmp_path / "b").write_bytes(b"y" * 12)
    st = land(backend, AddressTable(["a", "gone"], expect=np.array([10, 10])))
    assert st.sizes.tolist() == [10, -1] and bytes(st.view(0)) == b"x" * 10
    with pytest.raises(OSError, match="larger than the 10 bytes"):
        land(backend, AddressTable(["b"], expect=np.array([10])))
    with pytest.raises(OSError, match="10 bytes, not the 11"):
        land(backend, AddressTable(["a"], expect=np.array([11])))


class _SlotSink:
    """A host stand-in for the device sink: slots of a small pool, "copied" into ``dest`` on flush.

    Slots are handed out dirty (filled with 0xEE) so that a read that leaves a hole would show.
    """

    def __init__(self, dest: np.ndarray, piece: int) -> None:
        self.dest = dest
        self.nbytes = dest.nbytes
        self.piece = piece
        self.device = None
        self.flushed: list[tuple[int, int, int]] = []
        self.open = 0
        self._lock = threading.Lock()

    def acquire(self) -> tuple[memoryview, np.ndarray]:
        with self._lock:
            self.open += 1
        slot = np.full(self.piece, 0xEE, dtype=np.uint8)
        return memoryview(slot), slot

    def flush(self, handle: np.ndarray, lo: int, hi: int, base: int) -> None:
        assert 0 <= lo < hi <= self.piece
        self.dest[base + lo : base + hi] = handle[lo:hi]
        with self._lock:
            self.flushed.append((base, lo, hi))
            self.open -= 1

    def discard(self, handle: np.ndarray) -> None:
        with self._lock:
            self.open -= 1

    def finish(self) -> None:
        pass


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    piece=st.sampled_from([4096, 8192, 65536]),
    threads=st.integers(1, 4),
)
def test_read_batch_through_slots_and_in_place_read_the_files(
    files: tuple[list[str], list[bytes]], data: st.DataObject, piece: int, threads: int
) -> None:
    """Reads cut at piece boundaries, several per slot, land where the reference says: each read's bytes
    sliced from its file's contents (short at the end of the file, -1 for a missing file), in place and
    through slots alike."""
    paths, datas = files
    n = data.draw(st.integers(0, 12))
    which = [data.draw(st.integers(0, len(paths) - 1)) for _ in range(n)]
    offs, sizes = [], []
    for w in which:
        flen = len(datas[w]) if w < len(datas) else 10
        o = data.draw(st.integers(0, flen + 5))
        offs.append(o)
        sizes.append(data.draw(st.one_of(st.sampled_from([-1, 0]), st.integers(1, 30_000))))
    offsets = np.array(offs, dtype=np.int64)
    sz = np.array(sizes, dtype=np.int64)
    pad = data.draw(st.integers(0, 3000))
    dst = (np.cumsum(sz.clip(0) + pad) - (sz.clip(0) + pad)).astype(np.int64)
    total = int((dst + sz.clip(0)).max()) if n else 0
    ps = [paths[w] for w in which]
    # the reference: each file's bytes, sliced
    want = [_expected_read(datas, w, o, s) for w, o, s in zip(which, offs, sizes)]
    in_place = np.zeros(max(total, 1), np.uint8)
    got_in_place = batch.read_batch(ps, offsets, sz, in_place, dst, threads)
    out = np.zeros(max(total, 1), np.uint8)
    sink = _SlotSink(out, piece)
    got = batch.read_batch(ps, offsets, sz, sink, dst, threads)
    expected_counts = [-1 if b is None else len(b) for b in want]
    assert got.tolist() == expected_counts and got_in_place.tolist() == expected_counts
    assert sink.open == 0  # every slot went back
    for i, b in enumerate(want):
        if b:
            a = int(dst[i])
            assert bytes(out[a : a + len(b)]) == b and bytes(in_place[a : a + len(b)]) == b
    assert all(hi - lo <= piece for _, lo, hi in sink.flushed)
    assert len({base for base, _, _ in sink.flushed}) == len(sink.flushed)  # one copy per piece


def _expected_read(datas: list[bytes], which: int, offset: int, size: int) -> bytes | None:
    """What a read of ``size`` bytes at ``offset`` of file ``which`` gives (``None``: the file is missing;
    a read of no bytes is skipped, the file not even looked at)."""
    if size <= 0:
        return b""
    if which >= len(datas):
        return None
    return datas[which][offset : offset + size]


def test_read_batch_through_slots_checks_and_piece_size(files: tuple[list[str], list[bytes]]) -> None:
    paths, _ = files
    out = np.zeros(64, np.uint8)
    with pytest.raises(ValueError, match=r"read_batch\(\): reads overflow the destination of 64"):
        batch.read_batch(paths[1:2], np.array([0]), np.array([60]), _SlotSink(out, 4096), np.array([10]))
    with pytest.raises(ValueError, match="negative destination offset"):
        batch.read_batch(paths[1:2], np.array([0]), np.array([6]), _SlotSink(out, 4096), np.array([-1]))
    for total, threads, cap in [(1 << 30, 16, 8 << 20), (12345, 3, 1 << 20), ((5 << 20) + 1, 2, 1 << 20)]:
        p = batch.piece_size(total, threads, cap)
        rounds = -(-total // (threads * cap))  # the fewest rounds of full slots
        assert min(1 << 20, cap) <= p <= cap and -(-total // p) <= threads * rounds


def test_read_objects_whole_ranges_missing_and_errors(files: tuple[list[str], list[bytes]], tmp_path: Path) -> None:
    from gdsstore.engine.ranges import ByteRange

    paths, datas = files
    os.symlink("loop", tmp_path / "loop")
    all_paths = [*paths, str(tmp_path), str(tmp_path / "loop"), paths[1], paths[0]]
    ranges = [None, None, None, None, None, None, ByteRange("suffix", 7), ByteRange("range", 5, 1 << 30)]
    with gdsstore.trace() as t:
        out = batch.read_objects(all_paths, ranges, lambda n: np.empty(n, np.uint8), 2)
    assert [bytes(b) if b is not None else None for b in out.bufs[:4]] == [*datas, None]
    assert out.bufs[4] is None and out.bufs[5] is None  # a directory is no key; the failed item has no buffer
    assert list(out.errors) == [5] and isinstance(out.errors[5], OSError)  # ELOOP fails its item alone
    assert bytes(out.bufs[6]) == datas[1][-7:] and bytes(out.bufs[7]) == datas[0][5:]
    rows = t.by_reason()
    assert list(rows) == [("read", "posix", "batch of reads into host buffer")]  # one event per batch
    assert rows[next(iter(rows))]["bytes"] == sum(len(d) for d in datas) + 7 + len(datas[0]) - 5


def test_read_objects_refuses_a_file_that_shrinks(tmp_path: Path) -> None:
    """A size from fstat and fewer bytes from the read: an error, never a buffer with a stale tail."""
    p = tmp_path / "f"
    p.write_bytes(b"x" * 100)

    def alloc(n: int) -> np.ndarray:
        os.truncate(p, 10)  # between the size lookup and the read
        return np.empty(n, np.uint8)

    out = batch.read_objects([str(p)], None, alloc, 1)
    assert out.bufs == [None] and "short read" in str(out.errors[0])
