"""Each answer is the range asked for, and each coalesced request stays within its bound: both checked
where the requests arrive, at the server, through the native core."""

from __future__ import annotations

import numpy as np
import pytest
from servers.faults import FaultServer, parse_range
from zarr.abc.store import RangeByteRequest
from zarr.core.buffer import default_buffer_prototype

import gdsstore
from gdsstore.engine.remote import RangeMismatchError

from .conftest import payload

DATA = payload(512 << 10, seed=11)
FILL = 0xA5


@pytest.fixture
def srv(faults: FaultServer) -> FaultServer:
    faults.objects["obj.bin"] = DATA
    return faults


def _gets(srv: FaultServer) -> list[tuple[int, int]]:
    """The byte range of every GET the server received, inclusive ``(first, last)``."""
    out = []
    for method, _, rng, _ in srv.log:
        if method == "GET":
            assert rng is not None, "a GET without Range"
            r = parse_range(rng, len(DATA))
            assert r is not None, rng
            out.append(r)
    return out


# -- Content-Range: its end is checked too -------------------------------------------------------------------

# The message names the request and the range the server claimed (the core's words are object_store's).
LATE_END = r"bytes=1000-10999: .*(got Content-Range 'bytes 1000-11000/|got 1000\.\.11001)"


def test_a_content_range_ending_late_is_refused(srv: FaultServer) -> None:
    """The server answers with the right first byte, the right length and a Content-Range that ends one byte
    late: only the range's end says the answer is not what was asked. An error, once (not retried), and no
    byte of the answer in the caller's buffer."""
    with gdsstore.open(srv.url("obj.bin", "wrong-end", "always")) as f:
        buf = np.full(10_000, FILL, "u1")
        srv.log.clear()
        with pytest.raises(RangeMismatchError, match=LATE_END):
            f.read(buf, offset=1000)
    assert _gets(srv) == [(1000, 10_999)]
    assert np.all(buf == FILL)


def test_a_store_read_refuses_a_content_range_ending_late(srv: FaultServer) -> None:
    store = gdsstore.GDSStore(f"http://127.0.0.1:{srv.port}/wrong-end/always", read_only=True)
    with pytest.raises(RangeMismatchError, match=LATE_END):
        store.get_ranges_sync("obj.bin", [RangeByteRequest(1000, 11_000)], prototype=default_buffer_prototype())
    assert _gets(srv) == [(1000, 10_999)]


# -- coalesced reads: no request larger than max_coalesced_bytes ------------------------------------------------


def test_coalesced_ranges_stay_within_max_coalesced_bytes(srv: FaultServer) -> None:
    """40 adjacent ranges of 10,000 bytes, joined while a request stays within 100,000 bytes: 4 requests of
    10 ranges each, as the server counts them, and every range's bytes right."""
    reqs = [RangeByteRequest(a, a + 10_000) for a in range(0, 400_000, 10_000)]
    store = gdsstore.GDSStore(f"http://127.0.0.1:{srv.port}", read_only=True)
    big = {"task_size": 8 << 20, "remote.max_range_size": 8 << 20}  # nothing else cuts the requests
    with gdsstore.config.set(big):
        got = store.get_ranges_sync(
            "obj.bin", reqs, prototype=default_buffer_prototype(), max_gap_bytes=1 << 20, max_coalesced_bytes=100_000
        )
    assert sorted(_gets(srv)) == [(a, a + 99_999) for a in range(0, 400_000, 100_000)]
    assert {i: b.to_bytes() for i, b in got if b is not None} == {
        i: DATA[r.start : r.end] for i, r in enumerate(reqs)
    }


def test_one_range_larger_than_the_bound_is_one_request(srv: FaultServer) -> None:
    """The bound joins ranges; it never cuts one (a range larger than it is read alone, whole)."""
    reqs = [RangeByteRequest(0, 150_000), RangeByteRequest(150_000, 160_000), RangeByteRequest(160_000, 170_000)]
    store = gdsstore.GDSStore(f"http://127.0.0.1:{srv.port}", read_only=True)
    with gdsstore.config.set({"task_size": 8 << 20, "remote.max_range_size": 8 << 20}):
        got = store.get_ranges_sync(
            "obj.bin", reqs, prototype=default_buffer_prototype(), max_gap_bytes=1 << 20, max_coalesced_bytes=100_000
        )
    assert sorted(_gets(srv)) == [(0, 149_999), (150_000, 169_999)]
    assert {i: b.to_bytes() for i, b in got if b is not None} == {
        i: DATA[r.start : r.end] for i, r in enumerate(reqs)
    }
