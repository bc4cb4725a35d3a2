"""benchmarks/memory_bench.py without a GPU: its data step at a small size, its worker's source, a
cell's error without CuPy, and the results table from made-up cells."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import zarr

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("memory_bench", ROOT / "benchmarks" / "memory_bench.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["memory_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_worker_source_compiles(bench: ModuleType) -> None:
    compile(bench.WORKER, "memory_bench worker", "exec")


def test_data_is_written_once(bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "SIZE", 64)
    monkeypatch.setattr(bench, "SMALL", 32)
    monkeypatch.setattr(bench, "LAYOUTS", {"chunks": (16, None), "shards": (8, 32)})
    paths = bench.write_data(tmp_path, lambda msg: None)
    assert set(paths) == {"chunks", "shards", "16 MiB"}
    assert zarr.open_array(paths["shards"], mode="r").shape == (64, 64)
    assert zarr.open_array(paths["16 MiB"], mode="r").shape == (32, 32)
    assert bench.write_data(tmp_path, lambda msg: None) == paths  # kept


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="the error path: no CuPy here")
def test_a_cell_without_cupy_is_an_error_not_a_crash(bench: ModuleType, tmp_path: Path) -> None:
    res = bench.run_cell({"kind": "read", "reader": "gdsstore", "path": str(tmp_path), "reads": 1}, 60)
    assert "error" in res and "cupy" in res["error"].lower()


def _sample(peak: int, held: int) -> dict[str, Any]:
    return {"seconds": 0.1, "peak_beyond": peak, "held": held,
            "pinned": {"total": 32 << 20, "slots": 0, "external": 32 << 20, "limit": 1 << 30}}


def test_the_table_from_made_up_cells(bench: ModuleType) -> None:
    run = {"times": [0.1, 0.2, 0.1], "samples": [_sample(900 << 20, 80 << 20), _sample(800 << 20, 10 << 20)]}
    first = {"seconds": 0.2, "with_imports": 1.5, "imports": 1.0, "held": 4 << 20, "peak_beyond": 40 << 20,
             "pinned": None}
    write = {"first": _sample(700 << 20, 0), "second": _sample(600 << 20, 0)}
    results: dict[str, Any] = {
        "machine": "test",
        "reads": {"4 MiB zstd chunks | gdsstore": bench.summarize_reads([run, run]),
                  "4 MiB zstd chunks | tensorstore": bench.summarize_reads([{"error": "not installed"}])},
        "sweep": {"4 MiB zstd chunks | 256 MiB": bench.summarize_reads([run])},
        "first_read": {"gdsstore": [first, first], "zarr enable_gpu": [{"error": "boom"}]},
        "first_write": [write],
    }
    row = results["reads"]["4 MiB zstd chunks | gdsstore"]
    assert row["peak_beyond"] == 800 << 20 and row["peak_first_call"] == 900 << 20  # a later call's, the first's
    assert row["held"] == 10 << 20 and row["held_first_call"] == 80 << 20
    assert abs(row["gbs"] - (1 << 30) / 0.1 / 1e9) < 1e-9
    md = bench.markdown(results)
    assert "| 4 MiB zstd chunks | gdsstore | 10.74 | 800 (900) | 10 (80) | 32 |" in md, md
    assert "error: not installed" in md and "| first in the process | 0.100 | 700 |" in md
