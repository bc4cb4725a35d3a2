"""A wave's bytes copied on in parts while the rest of the wave is in flight (``gpu.wave_copy_bytes``): the
core tells the caller of each run of pieces once every piece of it is over (``read_table``'s ``segments``
and ``on_segment``), and ``read_wave`` copies each run that landed to its :class:`WaveCopy`, the rest after
the wave. Here the copy's target is host memory (the host twin of ``DeviceCopy``, which a GPU run tests in
``test_gpu_remote.py``): every byte ends up right, and each run is copied only after its bytes landed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from servers.faults import FaultServer

import gdsstore
from gdsstore.engine import native
from gdsstore.engine.backend import ByteRange, backend_for
from gdsstore.engine.remote import core
from gdsstore.engine.remote.retry import RetryPolicy
from gdsstore.engine.remote.wave import read_wave

from .conftest import payload

pytestmark = pytest.mark.skipif(not native.load(), reason=f"native core not built: {native.unavailable_reason()}")

SIZE = 16 << 10
RETRY = RetryPolicy(max_attempts=3, retry_status=(503,), backoff_base=0.001, backoff_max=0.01)


@pytest.fixture
def objs(faults: FaultServer) -> dict[str, bytes]:
    data = {f"o/{i}": payload(SIZE, seed=100 + i) for i in range(40)}
    faults.objects.update(data)
    faults.slow_seconds = 0.3
    return data


def table_of(paths: list[str]) -> core.PieceTable:
    """Whole objects of :data:`SIZE` bytes, each in its own slot, in order."""
    return core.PieceTable.of([(p, 0, None, SIZE, i * SIZE, SIZE) for i, p in enumerate(paths)])


def test_each_run_is_told_once_after_its_bytes_landed(faults: FaultServer, objs: dict[str, bytes]) -> None:
    """Runs of 10 pieces; the third has a slow piece and the last a missing object: every run is told
    once, the slow one after the two plain runs, and each run's bytes are all there when it is told."""
    paths = [f"ok/0/o/{i}" for i in range(40)]
    paths[25] = "slow/1/o/25"
    paths[35] = "ok/0/o/missing"
    buf = np.zeros(40 * SIZE, np.uint8)
    ends = np.array([10, 20, 30, 40], np.int64)
    told: list[tuple[int, bool, bool]] = []

    def on_segment(k: int, ok: bool) -> None:
        rows = range(int(ends[k - 1]) if k else 0, int(ends[k]))
        landed = all(buf[i * SIZE : (i + 1) * SIZE].tobytes() == objs[f"o/{i}"] for i in rows if i != 35)
        told.append((k, ok, landed))

    store = core.http_store(f"http://127.0.0.1:{faults.port}/", connect_timeout=2.0)
    res = core.read_table(store, "http://srv/", table_of(paths), buf, retry=RETRY, concurrency=8, timeout=5.0,
                          segments=ends, on_segment=on_segment)
    assert res.missing == [35]
    assert sorted(told) == [(0, True, True), (1, True, True), (2, True, True), (3, False, True)]
    assert [k for k, _, _ in told].index(2) > [k for k, _, _ in told].index(1)  # the slow run came later
    assert [k for k, _, _ in told].index(2) > [k for k, _, _ in told].index(0)


def test_runs_and_their_function_go_together(faults: FaultServer, objs: dict[str, bytes]) -> None:
    store = core.http_store(f"http://127.0.0.1:{faults.port}/", connect_timeout=2.0)
    mod = native.load()
    assert mod is not None
    t = table_of(["ok/0/o/0", "ok/0/o/1"])
    buf, got, total = np.zeros(2 * SIZE, np.uint8), np.zeros(2, np.int64), np.zeros(2, np.int64)
    with pytest.raises(ValueError, match="`segments` and `on_segment` go together"):
        mod.read_table(store, t, buf, got, total, segments=np.array([2], np.int64))
    for bad in ([1, 1, 2], [1], [0, 2], [2, 1]):
        with pytest.raises(ValueError, match="increasing rows each segment ends before, the last 2"):
            mod.read_table(store, t, buf, got, total, segments=np.array(bad, np.int64), on_segment=print)
    assert not faults.log  # refused before any request


def test_a_function_that_raises_stops_the_wave(faults: FaultServer, objs: dict[str, bytes]) -> None:
    """The first run's function raises while slow pieces are in flight: the wave stops, and the exception is
    raised once every request is over (the slow pieces are cut, not waited for)."""
    paths = ["ok/0/o/0", *[f"slow/always/o/{i}" for i in range(1, 9)]]
    buf = np.zeros(9 * SIZE, np.uint8)

    def on_segment(k: int, ok: bool) -> None:
        raise LookupError(f"run {k}")

    store = core.http_store(f"http://127.0.0.1:{faults.port}/", connect_timeout=2.0)
    faults.slow_seconds = 30.0
    mod = native.load()
    assert mod is not None
    got, total = np.zeros(9, np.int64), np.zeros(9, np.int64)
    with pytest.raises(LookupError, match="run 0"):
        mod.read_table(store, table_of(paths), buf, got, total, concurrency=9, timeout=60.0,
                       segments=np.array([1, 9], np.int64), on_segment=on_segment)


class HostCopy:
    """:class:`~gdsstore.engine.remote.wave.WaveCopy` into host memory, each copy checked against the
    objects: a span is copied only where its bytes have landed (``early`` counts the others)."""

    def __init__(self, part: int, check: Any) -> None:
        self.part = part
        self.target = np.zeros(0, np.uint8)
        self.copies: list[tuple[int, int]] = []
        self.parts = -1
        self.abandoned = False
        self.check = check

    def copy(self, buf: np.ndarray, lo: int, hi: int) -> None:
        if self.target.size < buf.size:
            self.target = np.zeros(buf.size, np.uint8)
        self.target[lo:hi] = buf[lo:hi]
        self.copies.append((lo, hi))
        self.check(buf, lo, hi)

    def result(self, nbytes: int, parts: int) -> np.ndarray:
        self.parts = parts
        return self.target[:nbytes]

    def abandon(self) -> None:
        self.abandoned = True


def wave_of(faults: FaultServer, mode: str = "ok", count: int | str = 0) -> Any:
    return backend_for(f"http://127.0.0.1:{faults.port}/{mode}/{count}")


def host(n: int) -> tuple[np.ndarray, None]:
    return np.zeros(n, dtype=np.uint8), None


def run_wave(backend: Any, keys: list[str], copy: HostCopy, expect: np.ndarray | None = None) -> Any:
    return read_wave(backend, backend.objects(keys, "test"), keys, None, host, expect=expect, copy=copy)


def all_there(landed: Any, copy: HostCopy, objs: dict[str, bytes], keys: list[str]) -> None:
    assert landed.dev is not None and landed.dev.nbytes == landed.host.nbytes
    for i, key in enumerate(keys):
        a, n = int(landed.offsets[i]), int(landed.sizes[i])
        assert landed.dev[a : a + n].tobytes() == objs[key], key


@pytest.mark.parametrize("sized", [True, False])
def test_a_wave_lands_whole_in_the_copy(faults: FaultServer, objs: dict[str, bytes], sized: bool) -> None:
    """Objects of known size (fixed slots) and of unknown size (room): the copy holds every byte, most of it
    copied while the wave ran (parts of 64 KiB: four objects each)."""
    keys = list(objs)
    copy = HostCopy(64 << 10, lambda buf, lo, hi: None)
    expect = np.full(len(keys), SIZE, np.int64) if sized else None
    landed = run_wave(wave_of(faults), keys, copy, expect)
    all_there(landed, copy, objs, keys)
    # unknown sizes: each object's room (the wave's first guess, larger than a part) is a run of its own
    assert copy.parts == (10 if sized else 40) and not copy.abandoned


def test_a_run_is_copied_only_once_its_bytes_landed(faults: FaultServer, objs: dict[str, bytes]) -> None:
    """Every copy made while the wave ran holds the objects' bytes where they are due: none of a slow
    object's run before it landed."""
    keys = list(objs)
    early: list[tuple[int, int]] = []

    def check(buf: np.ndarray, lo: int, hi: int) -> None:
        for i in range(lo // SIZE, -(-hi // SIZE)):
            if buf[i * SIZE : (i + 1) * SIZE].tobytes() != objs[keys[i]]:
                early.append((lo, hi))

    copy = HostCopy(64 << 10, check)
    backend = wave_of(faults, "slow", 1)
    faults.slow_seconds = 0.5
    landed = run_wave(backend, keys, copy, np.full(len(keys), SIZE, np.int64))
    all_there(landed, copy, objs, keys)
    assert not early


def test_runs_that_failed_are_copied_after_their_retry(faults: FaultServer, objs: dict[str, bytes]) -> None:
    """Every object answers 503 once, then its bytes: no run landed in the first attempt, so none is copied
    during the wave, and the copy after it holds every byte."""
    keys = list(objs)
    copy = HostCopy(64 << 10, lambda buf, lo, hi: None)
    landed = run_wave(wave_of(faults, "503", 1), keys, copy, np.full(len(keys), SIZE, np.int64))
    all_there(landed, copy, objs, keys)
    assert copy.parts == 0 and copy.copies


def test_objects_larger_than_their_room_are_copied_after_the_move(faults: FaultServer) -> None:
    """The room per object comes from the last wave's largest (1,000 bytes): every object is asked again into
    a larger buffer, so the copy is made again from that one, whole."""
    data = {f"big/{i}": payload(3000 + i, seed=i) for i in range(12)}
    faults.objects.update(data)
    faults.objects["small"] = b"s" * 1000
    backend = wave_of(faults)
    assert backend.get_many(["small"], None, host).view(0).tobytes() == b"s" * 1000  # sets the room hint
    copy = HostCopy(4096, lambda buf, lo, hi: None)
    keys = list(data)
    landed = run_wave(backend, keys, copy)
    all_there(landed, copy, data, keys)


def test_a_failed_wave_abandons_its_copies(faults: FaultServer, objs: dict[str, bytes]) -> None:
    copy = HostCopy(64 << 10, lambda buf, lo, hi: None)
    with pytest.raises(OSError, match="503"):
        run_wave(wave_of(faults, "503", "always"), list(objs), copy, np.full(len(objs), SIZE, np.int64))
    assert copy.abandoned


@pytest.mark.parametrize("seed", range(6))
def test_mixed_waves_land_whole_in_the_copy(faults: FaultServer, seed: int) -> None:
    """Whole objects (room after the fixed slots) and ranges (fixed slots) in one wave, in random order, some
    answering 503 once, parts of random size: the runs' spans interleave and some fail, and the copy still
    holds every item's bytes (against the objects)."""
    rng = np.random.default_rng(seed)
    data = {f"m{seed}/{i}": payload(int(rng.integers(1, 40_000)), seed=seed * 100 + i) for i in range(30)}
    faults.objects.update(data)
    keys, ranges, want = [], [], []
    for name, body in data.items():
        mode = "503/1" if rng.random() < 0.2 else "ok/0"
        keys.append(f"{mode}/{name}")
        if rng.random() < 0.5:
            ranges.append(None)
            want.append(body)
        else:
            a = int(rng.integers(0, len(body)))
            b = int(rng.integers(a + 1, len(body) + 1))
            ranges.append(ByteRange("range", a, b))
            want.append(body[a:b])
    backend = backend_for(f"http://127.0.0.1:{faults.port}")
    copy = HostCopy(int(rng.integers(1, 100_000)), lambda buf, lo, hi: None)
    landed = read_wave(backend, backend.objects(keys, "test"), keys, ranges, host, copy=copy)
    for i, body in enumerate(want):
        a, n = int(landed.offsets[i]), int(landed.sizes[i])
        assert landed.dev[a : a + n].tobytes() == body == landed.host[a : a + n].tobytes(), keys[i]


@pytest.mark.parametrize(("mode", "fail_at"), [("ok", 2), ("503", 5)])
def test_a_copy_that_fails_leaves_the_wave_to_the_copy_after_it(faults: FaultServer, objs: dict[str, bytes],
                                                                   mode: str, fail_at: int) -> None:
    """A copy that raises during the wave (the 2nd), or after it (every object answers 503 once: the 5th of the
    copies made after the wave):
    the wave still lands every byte in its buffer, without the copy's target (``dev`` None: the caller copies
    the window as it does without parts), the copies in flight waited for, and the trace says why."""
    keys = list(objs)
    calls = [0]

    def check(buf: np.ndarray, lo: int, hi: int) -> None:
        calls[0] += 1
        if calls[0] == fail_at:
            raise RuntimeError("no device")

    copy = HostCopy(64 << 10, check)
    backend = wave_of(faults, mode, 1)
    with gdsstore.trace() as t:
        landed = run_wave(backend, keys, copy, np.full(len(keys), SIZE, np.int64))
    assert landed.dev is None and copy.abandoned
    assert [landed.view(i).tobytes() for i in range(len(keys))] == list(objs.values())
    (row,) = [e for e in t.events if e.op == "h2d"]
    assert row.route == "parts-off" and "RuntimeError: no device" in row.reason
