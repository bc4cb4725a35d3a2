"""benchmarks/write_bench.py runs end to end on the CPU at a small size (local and S3 modes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_write_bench_small_host_run(tmp_path: Path) -> None:
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    out = tmp_path / "out"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "write_bench.py"), "--mode", "local,s3", "--out", str(out)]
    cmd += ["--mib", "4", "--s3-mib", "2", "--rounds", "2", "--tmp", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["workload"] for r in rows] == [
        "local, 1 MiB chunks, none",
        "local, 1 MiB chunks, zstd",
        "S3 (moto), 1 MiB chunks, none, remote.concurrency 16",
    ]
    for r in rows:
        assert r["gbps"]["gdsstore"] > 0 and r["gbps"][r["anchor"]] > 0 and len(r["seconds"]["gdsstore"]) == 2
    assert rows[2]["ceiling"]["moto PUT 1 MiB x 16 threads"] > 0
    assert "| workload |" in (out / "results.md").read_text()
