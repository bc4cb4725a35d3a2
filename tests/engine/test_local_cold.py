"""Cold local reads: the policy's cut by residency and device, device facts from sysfs, and real cold
reads through ``gdsstore.open`` (right bytes, the reason in the trace)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gdsstore
from gdsstore import pagecache, policy
from gdsstore.engine.storage import StorageFacts, facts_from_sysfs, storage_facts

ROTATIONAL = StorageFacts("rotational", "vda", virtio=True)
NVME = StorageFacts("nvme", "nvme0n1")
SSD = StorageFacts("ssd", "sda")
UNKNOWN = StorageFacts("unknown")

# -- the decision (pure) ----------------------------------------------------------------------------


def _settings(**kw: object) -> policy.Settings:
    with gdsstore.config.set({"task_size": 8 << 20, "num_threads": 16, **kw}):
        return policy.settings()


def test_small_reads_are_not_probed_and_keep_todays_cut() -> None:
    s = _settings()
    assert not policy.needs_residency_probe(4 * s.task_size, s)
    assert policy.needs_residency_probe(4 * s.task_size + 1, s)
    plan = policy.decide_local_read(nbytes=s.task_size, resident=None, storage=None, s=s)
    assert plan == policy.ReadPlan(16, 8 << 20, False, "")


@pytest.mark.parametrize("facts", [ROTATIONAL, NVME, SSD, UNKNOWN, None])
def test_warm_reads_keep_todays_cut_on_every_device(facts: StorageFacts | None) -> None:
    s = _settings()
    for resident in (1.0, 0.75, policy.COLD_RESIDENT_FRACTION):
        plan = policy.decide_local_read(nbytes=1 << 30, resident=resident, storage=facts, s=s)
        assert (plan.threads, plan.piece, plan.stretches) == (16, 8 << 20, False)
        assert plan.reason == "in page cache: num_threads threads on one fd"


def test_cold_rotational_gets_one_stream_read_whole() -> None:
    s = _settings()
    plan = policy.decide_local_read(nbytes=1 << 30, resident=0.0, storage=ROTATIONAL, s=s)
    assert (plan.threads, plan.piece, plan.stretches) == (policy.ROTATIONAL_STREAMS, 1 << 30, True)
    assert plan.threads == 1
    assert plan.reason == "cold (under half in page cache), rotational virtio vda: one stretch, read whole on its own fd"
    one = policy.decide_local_read(nbytes=1 << 30, resident=0.0, storage=ROTATIONAL, s=_settings(num_threads=1))
    assert one == plan


@pytest.mark.parametrize(("facts", "words"), [(NVME, "NVMe nvme0n1"), (SSD, "ssd sda"), (UNKNOWN, "unknown device"),
                                              (None, "unknown device")])
def test_cold_non_rotational_gets_one_stretch_per_thread(facts: StorageFacts | None, words: str) -> None:
    s = _settings()
    plan = policy.decide_local_read(nbytes=1 << 30, resident=0.1, storage=facts, s=s)
    assert (plan.threads, plan.piece, plan.stretches) == (16, 1 << 30, True)
    assert plan.reason == f"cold (under half in page cache), {words}: one stretch per thread, each read whole on its own fd"


def test_reasons_carry_no_per_call_number() -> None:
    """The trace keeps one row per route and reason: the read's size and residency stay out of it."""
    s = _settings()
    for facts in (ROTATIONAL, NVME, UNKNOWN):
        for lo, hi in ((0.0, 0.49), (0.5, 1.0)):
            a = policy.decide_local_read(nbytes=40 << 20, resident=lo, storage=facts, s=s)
            b = policy.decide_local_read(nbytes=7 << 30, resident=hi if lo else 0.3, storage=facts, s=s)
            assert a.reason == b.reason


# -- device facts from sysfs ------------------------------------------------------------------------


def _fake_disk(root: Path, name: str, rotational: str, parent: str = "devices/pci0000:00/0000:00:02.0") -> Path:
    disk = root / parent / "block" / name
    (disk / "queue").mkdir(parents=True)
    (disk / "queue" / "rotational").write_text(rotational + "\n")
    return disk


def test_facts_from_sysfs_kinds(tmp_path: Path) -> None:
    vda = _fake_disk(tmp_path, "vda", "1", "devices/pci0000:00/0000:00:02.0/virtio1")
    nvme = _fake_disk(tmp_path, "nvme0n1", "0", "devices/pci0000:00/0000:00:04.0/nvme/nvme0")
    sda = _fake_disk(tmp_path, "sda", "0")
    part = nvme / "nvme0n1p2"
    part.mkdir()
    (part / "partition").write_text("2\n")
    links = tmp_path / "dev-block"
    links.mkdir()
    for name, target in (("254:0", vda), ("259:0", nvme), ("8:0", sda), ("259:2", part)):
        os.symlink(target, links / name)
    assert facts_from_sysfs(str(links / "254:0")) == StorageFacts("rotational", "vda", virtio=True)
    assert facts_from_sysfs(str(links / "259:0")) == StorageFacts("nvme", "nvme0n1")
    assert facts_from_sysfs(str(links / "259:2")) == StorageFacts("nvme", "nvme0n1")  # a partition: its disk
    assert facts_from_sysfs(str(links / "8:0")) == StorageFacts("ssd", "sda")
    assert facts_from_sysfs(str(tmp_path / "nowhere")).kind == "unknown"


def test_storage_facts_of_real_devices_are_cached(tmp_path: Path) -> None:
    assert storage_facts(os.makedev(0, 42)) == StorageFacts("unknown")  # anonymous: tmpfs, overlay, NFS
    dev = os.stat(tmp_path).st_dev
    facts = storage_facts(dev)
    assert facts.kind in ("nvme", "ssd", "rotational", "unknown")
    assert storage_facts(dev) is facts  # read from sysfs once per device


# -- residency --------------------------------------------------------------------------------------


def _dropped(p: Path) -> None:
    left = pagecache.drop(p)
    if left.fraction > 0.1:
        pytest.skip(f"this file system kept {left.fraction:.0%} of the file cached after DONTNEED (tmpfs?)")


def test_resident_fraction_whole_sampled_and_unaligned(tmp_path: Path) -> None:
    p = tmp_path / "r.bin"
    page = os.sysconf("SC_PAGE_SIZE")
    p.write_bytes(os.urandom(256 * page))
    fd = os.open(p, os.O_RDONLY)
    try:
        p.read_bytes()
        assert pagecache.resident_fraction(fd, 0, 256 * page) == 1.0
        assert pagecache.resident_fraction(fd, 123, 1000) == 1.0  # unaligned offset, part of a page
        assert pagecache.resident_fraction(fd, 0, 0) == 1.0
        _dropped(p)
        assert pagecache.resident_fraction(fd, 0, 256 * page) == 0.0
        rd = os.open(p, os.O_RDONLY)  # the first half back in the cache, and no readahead past it
        os.posix_fadvise(rd, 0, 0, os.POSIX_FADV_RANDOM)
        os.pread(rd, 128 * page, 0)
        os.close(rd)
        half = pagecache.resident_fraction(fd, 0, 256 * page)
        assert 0.4 <= half <= 0.6
        assert 0.3 <= pagecache.resident_fraction(fd, 0, 256 * page, max_pages=32) <= 0.7  # 16 windows of 2
        assert pagecache.resident_fraction(fd, 0, 100 * page, max_pages=4) == 1.0  # sampled, all inside the half
        assert pagecache.resident_fraction(fd, 200 * page + 5, 50 * page, max_pages=4) == 0.0
    finally:
        os.close(fd)


# -- real reads through gdsstore.open ---------------------------------------------------------------

SMALL = {"task_size": 64 << 10, "num_threads": 3}
SIZE = (64 << 10) * 20 + 777  # 20 pieces and a tail: probed


@pytest.fixture
def data_file(tmp_path: Path) -> tuple[Path, np.ndarray]:
    p = tmp_path / "cold.bin"
    data = np.random.default_rng(7).integers(0, 256, SIZE, dtype=np.uint8)
    data.tofile(p)
    return p, data


def _read(p: Path, size: int, offset: int = 0) -> tuple[np.ndarray, int, gdsstore.Trace]:
    out = np.full(size, 0xAB, dtype=np.uint8)
    with gdsstore.config.set(SMALL), gdsstore.trace() as t, gdsstore.open(p) as f:
        n = f.read(out, size, offset)
    return out, n, t


def test_cold_read_returns_right_bytes_and_says_why(data_file: tuple[Path, np.ndarray]) -> None:
    p, data = data_file
    _dropped(p)
    out, n, t = _read(p, SIZE)
    assert n == SIZE and np.array_equal(out, data)
    (ev,) = t.events
    facts = storage_facts(os.stat(p).st_dev)
    assert ev.route == "posix" and ev.reason.startswith(f"host buffer; cold (under half in page cache), {facts.describe()}: ")
    assert "read whole on its own fd" in ev.reason
    # now cached: today's cut, and the trace says so
    out, n, t = _read(p, SIZE)
    assert np.array_equal(out, data)
    assert [e.reason for e in t.events] == ["host buffer; in page cache: num_threads threads on one fd"]


def test_small_read_is_not_probed(data_file: tuple[Path, np.ndarray]) -> None:
    p, data = data_file
    _dropped(p)
    out, n, t = _read(p, 4 * (64 << 10), 5)
    assert np.array_equal(out, data[5 : 5 + n]) and n == 4 * (64 << 10)
    assert [e.reason for e in t.events] == ["host buffer"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(0, SIZE + 100), size=st.integers(0, SIZE + 100))
def test_cold_reads_match_reference(data_file: tuple[Path, np.ndarray], offset: int, size: int) -> None:
    """Stretches cut anywhere (unaligned ends, past EOF) land exactly the file's bytes, no more."""
    p, data = data_file
    _dropped(p)
    out, n, _ = _read(p, size, offset)
    expected = data[offset : offset + size]
    assert n == len(expected) and np.array_equal(out[:n], expected)
    assert (out[n:] == 0xAB).all()


def test_cold_read_follows_the_open_file_not_the_path(data_file: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    """Each stream reopens the *open* file (its inode), even after the path was replaced."""
    p, data = data_file
    other = tmp_path / "other.bin"
    other.write_bytes(bytes(SIZE))
    out = np.empty(SIZE, dtype=np.uint8)
    with gdsstore.config.set(SMALL), gdsstore.trace() as t, gdsstore.open(p) as f:
        os.replace(other, p)  # the path now names a file of zeros
        _dropped(Path(f"/proc/self/fd/{f.fileno()}"))
        assert f.read(out) == SIZE
    assert np.array_equal(out, data)
    assert "cold" in t.events[0].reason


# -- device buffers (GPU machine) -------------------------------------------------------------------


@pytest.mark.gpu
def test_cold_device_read_follows_the_same_decision(cp, data_file: tuple[Path, np.ndarray]) -> None:  # type: ignore[no-untyped-def]
    p, data = data_file
    for cold in (True, False):
        if cold:
            _dropped(p)
        out = cp.full(SIZE, 0xAB, dtype=cp.uint8)
        with gdsstore.config.set({**SMALL, "compat_mode": "on"}), gdsstore.trace() as t, gdsstore.open(p) as f:
            assert f.read(out) == SIZE
        assert np.array_equal(cp.asnumpy(out), data)
        (ev,) = t.events
        assert ev.route == "posix" and ev.device is not None
        assert ev.reason.startswith("compat_mode=on; " + ("cold (under half" if cold else "in page cache"))


@pytest.mark.gpu
def test_small_device_reads_keep_one_trace_row(cp, data_file: tuple[Path, np.ndarray]) -> None:  # type: ignore[no-untyped-def]
    """Device reads below gds_threshold, of many sizes: one row (the threshold, not each size)."""
    p, data = data_file
    sizes = [1, 17, 4096, 65_537, 100_000, 300_001, 700_000]
    with gdsstore.config.set({"gds_threshold": 1 << 20}), gdsstore.trace() as t, gdsstore.open(p) as f:
        for n in sizes:
            out = cp.empty(n, dtype=cp.uint8)
            assert f.read(out) == n
            assert np.array_equal(cp.asnumpy(out), data[:n])
    assert len(t.by_reason()) == 1, str(t)
    ((_, route, reason),) = t.by_reason()
    assert route == "posix" and any(w in reason for w in ("below gds_threshold 1 MiB", "cuFile", "CUDA", "compat_mode"))


@pytest.mark.parametrize(("total", "threads", "task_size"), [(10, 3, 1), (1 << 30, 16, 8 << 20), (SIZE, 3, 64 << 10),
                                                             (5, 16, 8), ((1 << 20) + 1, 1, 4096)])
def test_stretches_cover_the_read_once(total: int, threads: int, task_size: int) -> None:
    from gdsstore.engine.local import stretches

    parts = stretches(total, threads, task_size)
    assert len(parts) <= threads and parts[0][0] == 0
    assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(parts))  # contiguous, in order
    assert sum(n for _, n in parts) == total
    assert all(n >= min(task_size, total) for _, n in parts[:-1])
