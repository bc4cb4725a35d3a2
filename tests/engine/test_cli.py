"""The CLI on a machine without a GPU: doctor says so and exits 0 quickly; bench prints a table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gdsstore import pagecache
from gdsstore.engine import cufile


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gdsstore.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_doctor_runs_fast_and_reports() -> None:
    t0 = time.perf_counter()
    out = _cli("doctor", timeout=60)
    elapsed = time.perf_counter() - t0
    assert out.returncode == 0, out.stderr
    assert elapsed < 30
    text = out.stdout
    assert "gdsstore doctor" in text
    assert "compat_mode: auto" in text
    assert "host buffer" in text and "-> posix" in text
    assert "probe read (4 MiB, write then read back): ok" in text
    from gdsstore.engine import cuda

    if cuda.device_count() == 0:
        assert "GPU: none" in text
        assert "no CUDA device" in text


def test_doctor_json() -> None:
    out = _cli("doctor", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["routes"]["host buffer"] == {"route": "posix", "reason": "host buffer"}
    assert report["probe"]["host_ok"] is True
    assert report["probe"]["totals"]["posix"]["ops"] == 2
    assert "settings" in report and report["settings"]["compat_mode"] == "auto"
    assert report["hints"] == []  # no cuFile driver on this machine: nothing to advise


def test_doctor_reports_bad_setting_without_crashing() -> None:
    out = _cli("doctor", env={"GDSSTORE_COMPAT_MODE": "maybe"})
    assert out.returncode == 1  # reported, not a traceback; and a failed check
    assert "Traceback" not in out.stderr
    assert "settings: INVALID" in out.stdout and "maybe" in out.stdout


def test_bench_table(tmp_path: Path) -> None:
    p = tmp_path / "b.bin"
    p.write_bytes(os.urandom(8 << 20))
    out = _cli("bench", str(p), "--repeat", "1", "--threads", "2")
    assert out.returncode == 0, out.stderr
    assert "gdsstore (defaults)" in out.stdout and "numpy.fromfile" in out.stdout
    assert "gdsstore (2 threads)" in out.stdout
    out = _cli("bench", str(p), "--repeat", "1", "--json", "--cold")
    rows = json.loads(out.stdout)
    assert {r["name"] for r in rows} >= {"gdsstore (defaults)"}
    assert all(r["gbps"] > 0 for r in rows)


def test_bench_rejects_bad_setting(tmp_path: Path) -> None:
    p = tmp_path / "b.bin"
    p.write_bytes(b"x" * 100)
    out = _cli("bench", str(p), "--repeat", "1", env={"GDSSTORE_TASK_SIZE": "0"})
    rows = out.stdout
    assert "task_size" in rows  # reported per route, not a crash
    assert out.returncode == 0


def test_pagecache_resident_and_drop(tmp_path: Path) -> None:
    p = tmp_path / "pc.bin"
    p.write_bytes(os.urandom(4 << 20))
    p.read_bytes()
    r = pagecache.resident(p)
    assert r.total_pages == (4 << 20) // os.sysconf("SC_PAGE_SIZE")
    after = pagecache.drop(p)
    assert after.resident_pages <= r.resident_pages
    if after.resident_pages:  # some filesystems (tmpfs, overlay) cannot drop pages
        pytest.skip(f"filesystem kept {after.fraction:.0%} resident after DONTNEED")
    p.read_bytes()
    assert pagecache.resident(p).fraction == 1.0
    assert pagecache.resident(tmp_path / "pc.bin").total_pages == r.total_pages


def test_empty_file_residency(tmp_path: Path) -> None:
    p = tmp_path / "e"
    p.write_bytes(b"")
    assert pagecache.resident(p).fraction == 1.0


def test_cufile_probe_is_guarded_and_quick() -> None:
    """Without a GPU the driver is never opened (it would hang): the probe answers at once with why."""
    from gdsstore.engine import cuda

    if cuda.device_count():
        pytest.skip("GPU machine: covered by tests/engine/test_gpu_local.py")
    t0 = time.perf_counter()
    res = cufile.driver_probe()
    assert time.perf_counter() - t0 < 5
    assert not res.ok
    assert res.reason in (
        "no CUDA device",
        "libcufile not found",
    ) or res.reason.startswith("cuda.bindings.cufile not importable")
    # and a device read decision would fall back with that reason
    from gdsstore import policy

    assert policy.decide_local(device=True, nbytes=1 << 30, cufile=res).reason == res.reason


def test_cufile_stats_none_without_driver() -> None:
    assert cufile.read_stats() is None or cufile.driver_probe().ok


def test_demo_runs_and_prints_the_trace(tmp_path: Path) -> None:
    out = _cli("demo", "--n", "128", "--path", str(tmp_path / "demo.zarr"))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "equal to the source: True" in text
    assert "route" in text and "reason" in text  # the trace table
    from gdsstore.engine import cuda

    if cuda.device_count() == 0:
        assert "host (numpy)" in text and "posix" in text


def test_bench_zarr_array(tmp_path: Path) -> None:
    import numpy as np
    import zarr

    root = tmp_path / "a.zarr"
    zarr.create_array(str(root), shape=(256, 256), chunks=(64, 64), dtype="f4")[:] = np.ones((256, 256), "f4")
    out = _cli("bench", str(root), "--repeat", "1", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert set(rows) == {"gdsstore GDSStore + pipeline, host buffers", "zarr LocalStore"}
    assert all(r["nbytes"] == 256 * 256 * 4 and r["gbps"] > 0 for r in rows.values()), rows
    bad = _cli("bench", str(tmp_path), "--repeat", "1")
    assert bad.returncode == 2 and "without zarr.json" in bad.stderr


def test_bench_url(tmp_path: Path) -> None:
    from servers.faults import FaultServer

    srv = FaultServer()
    try:
        srv.objects["o.bin"] = os.urandom(3 << 20)
        out = _cli("bench", srv.url("o.bin"), "--repeat", "1", "--json")
    finally:
        srv.close()
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["gdsstore (defaults)"]["nbytes"] == 3 << 20 and rows["gdsstore (defaults)"]["gbps"] > 0
    assert "fsspec" in rows


def test_doctor_fails_on_an_unusable_setting_naming_its_variable() -> None:
    """Issue 18: doctor printed `settings: INVALID` and exited 0."""
    out = _cli("doctor", "--no-probe", env={"GDSSTORE_REMOTE__TIMEOUT": "inf"}, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "settings: INVALID" in out.stdout and "GDSSTORE_REMOTE__TIMEOUT" in out.stdout and "'inf'" in out.stdout
