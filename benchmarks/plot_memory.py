"""Plot gdsstore's GB/s and peak device memory against ``gpu.memory_budget`` from a memory_bench.py sweep.

    .venv/bin/python benchmarks/plot_memory.py RESULTS/memory.json docs/bench/memory_sweep.png
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def series(results: dict) -> dict[str, list[tuple[int, float, float]]]:
    """``{array: [(budget MiB, GB/s, peak beyond the output MiB)]}``, budgets ascending."""
    out: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    for key, row in results["sweep"].items():
        if "error" in row:
            continue
        layout, budget = key.split(" | ")
        out[layout].append((int(budget.split()[0]), row["gbs"], row["peak_beyond"] / 2**20))
    return {k: sorted(v) for k, v in out.items()}


def main(src: str, dst: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = series(json.loads(Path(src).read_text()))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for layout, pts in data.items():
        style = "--" if layout.endswith("over HTTP") else "-"
        budgets = [b for b, _, _ in pts]
        ax1.plot(budgets, [g for _, g, _ in pts], style, marker="o", label=layout)
        ax2.plot(budgets, [p for _, _, p in pts], style, marker="o", label=layout)
    ticks = sorted({b for pts in data.values() for b, _, _ in pts})
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [f"{b} MiB" if b < 1024 else f"{b >> 10} GiB" for b in ticks])
        ax.set_xlabel("gpu.memory_budget")
        ax.grid(alpha=0.3)
    ax1.set_ylabel("GB/s, 1 GiB float32 into a CuPy array")
    ax2.set_ylabel("peak device MiB beyond the output")
    ax2.plot(ticks, ticks, ":", color="grey", label="the budget")
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.suptitle("gdsstore on an H200: speed and device memory against the memory budget (zstd)")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
