"""Local batches through the native core (``gdsstore._core.read_files``) and through the engine's Python
threads (``read_batch(core=False)``, the route where the core is not built): bytes against plain reads,
short, missing and directory items, bad arguments, staging slots, the trace's reason and fork."""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from forked import run_forked
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gdsstore
from gdsstore import policy
from gdsstore.engine import batch

core_mod: Any = batch._core_module()
needs_core = pytest.mark.skipif(core_mod is None, reason=f"native core not built: {batch._core_missing()}")
FILL = 0xA5
SIZES = (0, 1, 100, 4095, 4096, 65536 + 17, 300_000)


@pytest.fixture
def tree(tmp_path: Path) -> tuple[list[str], list[bytes]]:
    """Files of awkward sizes, then a missing path, a directory and a path below a file."""
    rng = np.random.default_rng(3)
    datas = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in SIZES]
    paths = []
    for i, d in enumerate(datas):
        (tmp_path / f"f{i}").write_bytes(d)
        paths.append(str(tmp_path / f"f{i}"))
    (tmp_path / "dir").mkdir()
    return [*paths, str(tmp_path / "missing"), str(tmp_path / "dir"), str(tmp_path / "f1" / "below")], datas


def plain(path: str, off: int, n: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(off)
        return f.read(n)


def layout(sizes: list[int], pad: int = 64) -> tuple[np.ndarray, int]:
    s = np.array(sizes, dtype=np.int64).clip(0) + pad
    return np.cumsum(s) - s, int(s.sum())


def read_files(paths: list[str], offs: list[int], sizes: list[int], threads: int = 2) -> tuple[Any, ...]:
    slots, total = layout(sizes)
    buf = np.full(max(total, 1), FILL, np.uint8)
    got = np.zeros(len(paths), np.int64)
    errors = core_mod.read_files(
        paths, np.array(offs, np.int64), np.array(sizes, np.int64), buf, slots, got, threads=threads
    )
    return buf, slots, got, {i: (kind, code, msg) for i, kind, code, msg in errors}


@needs_core
@pytest.mark.parametrize("threads", [1, 3, 16])
def test_read_files_equals_plain_reads(tree: tuple[list[str], list[bytes]], threads: int) -> None:
    paths, datas = tree
    rng = np.random.default_rng(threads)
    which = rng.integers(0, len(datas), 200).tolist()
    offs = [int(rng.integers(0, len(datas[w]) + 1)) for w in which]
    sizes = [int(rng.integers(0, 70_000)) for _ in which]
    buf, slots, got, errors = read_files([paths[w] for w in which], offs, sizes, threads)
    assert errors == {}
    for k, w in enumerate(which):
        want = plain(paths[w], offs[k], sizes[k])
        assert got[k] == len(want)  # short only where the file ends first
        a = int(slots[k])
        assert bytes(buf[a : a + len(want)]) == want
        assert np.all(buf[a + len(want) : a + sizes[k] + 64] == FILL)  # the slot's rest untouched


@needs_core
def test_read_files_failures_are_per_item(tree: tuple[list[str], list[bytes]]) -> None:
    paths, datas = tree
    missing, directory, below = paths[-3:]
    ok = paths[6]
    buf, slots, got, errors = read_files([ok, missing, directory, below, paths[2], ok], [0] * 6, [1000] * 6)
    assert got.tolist() == [1000, -1, 0, -1, 100, 1000]
    assert {i: e[0] for i, e in errors.items()} == {1: "not_found", 2: "is_directory", 3: "not_found"}
    assert errors[2][1] == errno.EISDIR and directory in errors[2][2]
    assert errors[1][1] == errno.ENOENT and missing in errors[1][2]
    for k in (1, 2, 3):  # a failed item lands nothing
        assert np.all(buf[slots[k] : slots[k] + 1064] == FILL)
    assert bytes(buf[slots[4] : slots[4] + 100]) == datas[2]
    assert np.all(buf[slots[4] + 100 : slots[4] + 1064] == FILL)  # short file: no garbage after its end
    assert bytes(buf[slots[5] : slots[5] + 1000]) == datas[6][:1000]


@needs_core
def test_read_files_refuses_bad_arguments(tree: tuple[list[str], list[bytes]]) -> None:
    paths, _ = tree
    p = [paths[6], paths[6]]
    buf, got = np.zeros(100, np.uint8), np.zeros(2, np.int64)
    a64 = np.array  # int64 arrays below

    def call(offs: list[int], sizes: list[int], slots: list[int], dest: Any = buf, out: Any = got) -> Any:
        return core_mod.read_files(p, a64(offs, np.int64), a64(sizes, np.int64), dest, a64(slots, np.int64), out)

    with pytest.raises(ValueError, match="overlaps"):
        call([0, 0], [50, 50], [0, 40])
    with pytest.raises(ValueError, match="outside the buffer of 100"):
        call([0, 0], [50, 50], [0, 60])
    with pytest.raises(ValueError, match="negative offset"):
        call([0, -1], [5, 5], [0, 10])
    with pytest.raises(ValueError, match="2 paths but 1 sizes"):
        call([0, 0], [5], [0, 10])
    with pytest.raises(ValueError, match="writable"):
        call([0, 0], [5, 5], [0, 10], dest=bytes(100))
    with pytest.raises(ValueError, match="`got` must be a writable int64 array of 2"):
        call([0, 0], [5, 5], [0, 10], out=np.zeros(3, np.int64))
    assert np.all(buf == 0) and np.all(got == 0)  # refused before any read
    call([0, 0], [5, 0], [0, 2])  # a read of size 0 overlaps nothing
    assert got.tolist() == [5, 0]


@needs_core
def test_read_files_takes_undecodable_names(tmp_path: Path) -> None:
    name = os.fsdecode(b"chunk-\xff")  # not UTF-8: a surrogate escape in the str
    (tmp_path / name).write_bytes(b"abcdef")
    buf, _, got, errors = read_files([str(tmp_path / name)], [1], [4])
    assert errors == {} and got.tolist() == [4] and bytes(buf[:4]) == b"bcde"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), threads=st.integers(1, 4), piece=st.sampled_from([None, 4096, 65536]))
def test_read_batch_routes_agree(
    tree: tuple[list[str], list[bytes]], data: st.DataObject, threads: int, piece: int | None
) -> None:
    """The core and the Python threads land the same bytes and counts, in place and through slots."""
    paths, datas = tree
    n = data.draw(st.integers(0, 12))
    which = [data.draw(st.integers(0, len(datas))) for _ in range(n)]  # len(datas): the missing path
    offs = [data.draw(st.integers(0, len(datas[w]) + 5 if w < len(datas) else 10)) for w in which]
    sizes = [data.draw(st.integers(-1, 80_000)) for _ in which]
    ps = [paths[w] for w in which]
    dst, total = layout(sizes, data.draw(st.integers(0, 3000)))
    outs = []
    for core in (False, True):
        out = np.full(max(total, 1), FILL, np.uint8)
        dest: Any = out if piece is None else SlotSink(out, piece)
        got = batch.read_batch(ps, np.array(offs, np.int64), np.array(sizes, np.int64), dest, dst, threads, core=core)
        outs.append((got.tolist(), out))
    (got_py, out_py), (got_core, out_core) = outs
    assert got_core == got_py
    for k, w in enumerate(which):
        want = plain(ps[k], offs[k], max(sizes[k], 0)) if w < len(datas) else None
        assert got_py[k] == (len(want) if want is not None else -1 if sizes[k] > 0 else 0)  # size <= 0: not opened
        if want:
            a = int(dst[k])
            assert bytes(out_core[a : a + len(want)]) == want == bytes(out_py[a : a + len(want)])


class SlotSink:
    """Staging slots in host memory, copied into ``dest`` on flush: the device sink's protocol on a machine
    without a GPU. Slots come dirty (0xEE) so that a hole would show."""

    def __init__(self, dest: np.ndarray, piece: int) -> None:
        self.dest, self.nbytes, self.piece, self.device = dest, dest.nbytes, piece, None
        self.open = 0
        self._lock = threading.Lock()

    def acquire(self) -> tuple[memoryview, np.ndarray]:
        with self._lock:
            self.open += 1
        slot = np.full(self.piece, 0xEE, dtype=np.uint8)
        # The view a pinned slot hands out (cuda.PinnedBuffer.view): ctypes bytes cast to "B".
        return memoryview((ctypes.c_ubyte * self.piece).from_buffer(slot)).cast("B"), slot

    def flush(self, handle: np.ndarray, lo: int, hi: int, base: int) -> None:
        self.dest[base + lo : base + hi] = handle[lo:hi]
        self.discard(handle)

    def discard(self, handle: np.ndarray) -> None:
        with self._lock:
            self.open -= 1

    def finish(self) -> None:
        assert self.open == 0  # every slot went back


@pytest.mark.parametrize("core", [False, True])
@pytest.mark.parametrize("piece", [None, 4096])
def test_read_batch_errors_alike(tree: tuple[list[str], list[bytes]], core: bool, piece: int | None) -> None:
    """A directory fails the batch with IsADirectoryError naming it; a missing file reads as -1."""
    paths, datas = tree
    missing, directory, below = paths[-3:]
    out = np.full(8192, FILL, np.uint8)
    dests = np.array([0, 1024, 2048, 3072])

    def read(ps: list[str]) -> np.ndarray:
        dest: Any = out if piece is None else SlotSink(out, piece)
        return batch.read_batch(ps, np.zeros(len(ps), np.int64), np.full(len(ps), 500), dest, dests[: len(ps)], 2, core=core)

    assert read([paths[2], missing, below, paths[6]]).tolist() == [100, -1, -1, 500]
    assert bytes(out[:100]) == datas[2] and bytes(out[3072:3572]) == datas[6][:500]
    with pytest.raises(IsADirectoryError) as err:
        read([paths[2], directory])
    if core:  # the Python route's preadv does not name the file
        assert err.value.filename == directory


@needs_core
def test_trace_names_the_route(tree: tuple[list[str], list[bytes]]) -> None:
    paths, _ = tree
    out = np.zeros(1 << 20, np.uint8)
    rows = []
    for core in (True, False):
        with gdsstore.trace() as t:
            batch.read_batch(paths[:3], np.zeros(3, np.int64), np.full(3, 4096), out, np.arange(3) * 8192, core=core)
        rows += [r for (op, route, r) in t.by_reason() if op == "read" and route == "posix"]
    assert rows == [
        "batch of reads into host buffer; native core, GIL released",
        "batch of reads into host buffer; python threads: native core unavailable (core=False)",
    ]
    # Reads that land on shared bytes stay on the Python threads (the core writes disjoint slots only).
    with gdsstore.trace() as t:
        batch.read_batch(paths[5:7], np.zeros(2, np.int64), np.full(2, 4096), out, np.array([0, 100]))
    assert [r for (_, _, r) in t.by_reason()] == [
        "batch of reads into host buffer; python threads: reads overlap in the destination"
    ]


@pytest.mark.parametrize("core", [False, True])
def test_stat_batch_routes_agree(tree: tuple[list[str], list[bytes]], tmp_path: Path, core: bool) -> None:
    paths, datas = tree
    (tmp_path / "link").symlink_to(tmp_path / "f6")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    extra = [str(tmp_path / "link"), str(tmp_path / "dangling")]
    sizes = batch.stat_batch([*paths, *extra] * 300, 4, core=core)  # 3,000 paths: several core threads
    assert sizes.tolist() == ([len(d) for d in datas] + [-1, -1, -1, len(datas[6]), -1]) * 300


def test_policy_decides_with_a_reason() -> None:
    assert policy.decide_local_batch(core_missing=None, reads=3).route == "core"
    assert policy.decide_local_batch(core_missing=None, reads=0).reason == "python threads: an empty batch"
    assert policy.decide_local_batch(core_missing="x", reads=3).route == "python"
    assert policy.decide_local_batch(core_missing=None, reads=3, overlapping=True).route == "python"
    sizes = np.array([10, 0, 10, 5])
    assert not batch._overlapping(np.array([0, 5, 10, 20]), sizes)
    assert batch._overlapping(np.array([0, 5, 9, 20]), sizes)


@needs_core
def test_core_batch_in_a_forked_child(tree: tuple[list[str], list[bytes]]) -> None:
    """The core's threads do not survive fork(): the child gets its own and its batch completes."""
    paths, datas = tree
    n, size = 16, len(datas[6])  # ~4.8 MB: the core reads on 4 threads
    out = np.zeros(n * size, np.uint8)

    def read() -> bool:
        out[:] = 0
        got = batch.read_batch([paths[6]] * n, np.zeros(n, np.int64), np.full(n, size), out, np.arange(n) * size, 4)
        return got.tolist() == [size] * n and out.tobytes() == datas[6] * n

    assert read()  # the parent's threads exist before the fork
    code = run_forked(lambda: 0 if read() else 3, timeout=30)
    assert code == 0, "the forked child's batch hung" if code is None else f"exit {code}"
