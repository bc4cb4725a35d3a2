"""benchmarks/zarr_bench.py runs end to end on the CPU at a small size and writes its three outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_zarr_bench_small_host_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "zarr_bench.py"),
            "--out",
            str(out),
            "--size",
            "512",
            "--repeat",
            "1",
            "--host",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    workloads = [r["workload"] for r in res["rows"]]
    assert len(workloads) == 7 and workloads[0].startswith("raw")
    for row in res["rows"]:
        assert row["gbps"]["gdsstore"] and row["gbps"]["gdsstore"] > 0, row
        assert row["target"] > 0
    # the zarr anchor runs everywhere; GPU-only anchors are skipped with a note, not silently
    assert all(r["gbps"]["zarr"] for r in res["rows"][1:])
    assert any("kvikio" in n and "skipped" in n for n in res["notes"])
    assert "gdsstore_trace" in res["rows"][1]
    md = (out / "results.md").read_text()
    assert "| chunks 256², zstd |" in md
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (out / "data").exists()  # the data is removed unless --keep-data
