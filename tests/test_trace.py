"""``gdsstore.trace``: one table row per (op, route, reason), whatever the sizes read; sizes go in the
bytes and ops columns. The remote routes' rows are checked in tests/remote/test_trace_rows.py."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

import gdsstore
from gdsstore import policy
from gdsstore.policy import fmt_bytes
from gdsstore.trace import Trace, TraceEvent

SIZES = [1, 17, 4096, 65_537, 100_000, 262_144, 300_001, 700_000, 1 << 20, (1 << 20) + 3]


def assert_one_row_per_reason(t: Trace, sizes: list[int]) -> None:
    """Rows are few (one per decision) and no reason names a size that was read or written."""
    # Sizes a reason may name: the settings' (thresholds, bounds), not the request's.
    settings_sizes = {fmt_bytes(v) for v in dataclasses.astuple(policy.settings()) if type(v) is int}
    rows = t.by_reason()
    assert len(rows) < len(sizes), str(t)
    assert sum(r["ops"] for r in rows.values()) == len(t.events)
    table = str(t).splitlines()
    assert len(table) == 2 + len(rows) + sum(line.startswith(("wall:", "cufile stats")) for line in table)
    for _, _, reason in rows:
        for n in sizes:
            if n >= 1000:  # (smaller numbers may be a setting's: "concurrency 16", "1 MiB")
                assert not re.search(rf"(?<![\d.]){n}(?![\d.])", reason), (n, reason)
            named = re.search(rf"(?<![\d.]){re.escape(fmt_bytes(n))}", reason)
            assert not named or fmt_bytes(n) in settings_sizes, (n, reason)


def test_table_groups_events_by_op_route_reason() -> None:
    t = Trace(events=[TraceEvent("read", "posix", "host buffer", n, 0.001) for n in SIZES])
    t.add(TraceEvent("write", "posix", "host buffer", 10, 0.001))
    rows = t.by_reason()
    assert list(rows) == [("read", "posix", "host buffer"), ("write", "posix", "host buffer")]
    assert rows[("read", "posix", "host buffer")]["ops"] == len(SIZES)
    assert rows[("read", "posix", "host buffer")]["bytes"] == sum(SIZES)
    lines = str(t).splitlines()
    assert len(lines) == 4 and lines[0].split() == ["op", "route", "reason", "ops", "bytes", "seconds", "GB/s"]
    assert lines[2].split()[:6] == ["read", "posix", "host", "buffer", str(len(SIZES)), fmt_bytes(sum(SIZES)).split()[0]]


def test_local_host_reads_and_writes_of_many_sizes_keep_one_row_per_reason(tmp_path: Path) -> None:
    data = np.random.default_rng(0).integers(0, 256, max(SIZES) + 10, dtype=np.uint8)
    with gdsstore.config.set({"task_size": 64 << 10, "num_threads": 3}), gdsstore.trace() as t:
        for i, n in enumerate(SIZES):
            p = tmp_path / f"{i}.bin"
            with gdsstore.open(p, "wb") as f:
                f.write(data[:n])
            out = np.empty(n, dtype=np.uint8)
            with gdsstore.open(p) as f:
                assert f.read(out) == n
            assert np.array_equal(out, data[:n])
    assert_one_row_per_reason(t, SIZES)
    # small reads, large warm reads (probed, in page cache), writes: three decisions at most
    assert {(op, r) for op, _, r in t.by_reason()} <= {
        ("read", "host buffer"),
        ("read", "host buffer; in page cache: num_threads threads on one fd"),
        ("write", "host buffer"),
    }
