"""Property: any read (offset, size, task size, concurrency) over HTTP equals the reference slice."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from servers.faults import FaultServer

import gdsstore

from .conftest import payload

DATA = payload(60_001, seed=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    offset=st.integers(0, len(DATA) + 10),
    size=st.integers(0, len(DATA) + 10),
    task_size=st.integers(1, 70_000).map(lambda n: max(n, 1499)),
    concurrency=st.integers(1, 4),
    mode=st.sampled_from(["ok", "reset", "truncate", "503"]),
)
def test_random_ranges_match_reference(
    fault_server: FaultServer, offset: int, size: int, task_size: int, concurrency: int, mode: str
) -> None:
    fault_server.objects["prop.bin"] = DATA
    fault_server.reset()
    with gdsstore.config.set({"task_size": task_size, "remote.concurrency": concurrency}):
        with gdsstore.open(fault_server.url("prop.bin", mode, 2)) as f:
            buf = np.full(size, 0x5A, "u1")
            n = f.read(buf, size, offset)
    want = DATA[offset : offset + size]
    assert n == len(want)
    assert buf[:n].tobytes() == want
    assert np.all(buf[n:] == 0x5A)  # nothing written past what was read
