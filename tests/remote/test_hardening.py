"""Issue 16's failures, one test each, against servers that misbehave exactly that way, through the native
core (the one HTTP(S) transport): an object replaced mid-read by a server that ignores If-Match, a response
queued after a correct body, a redirect on ranged GETs only, a stalled body, a whole-object get that stalls,
CR/LF in headers, the connections kept."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest
from servers.faults import FaultServer

import gdsstore
from gdsstore.engine.backend import backend_for
from gdsstore.engine.remote import RangeMismatchError, RemoteIOError
from gdsstore.engine.remote.keys import key_to_url_path
from gdsstore.engine.remote.retry import retry_after

from .conftest import payload

DATA = payload(512 << 10, seed=21)
NEW = payload(512 << 10, seed=22)
BIG = payload(4 << 20, seed=23)
FILL = 0xA5


@pytest.fixture
def srv(faults: FaultServer) -> FaultServer:
    faults.objects["obj.bin"] = DATA
    faults.objects["obj.bin.v2"] = NEW
    faults.objects["big.bin"] = BIG
    return faults


@pytest.fixture
def other_server() -> Iterator[FaultServer]:
    """A second server: another origin (same host, another port)."""
    s = FaultServer()
    try:
        yield s
    finally:
        s.close()


def gets(srv: FaultServer, mode: str) -> int:
    return sum(1 for e in srv.log if e[0] == "GET" and e[1].startswith(f"/{mode}/"))


@pytest.mark.parametrize("mode", ["replaced", "replaced-412"])
def test_object_replaced_mid_read_fails_and_never_mixes(srv: FaultServer, mode: str) -> None:
    # The object changes after 3 GETs; "replaced" ignores If-Match but reports the new ETag.
    with gdsstore.config.set({"remote.concurrency": 1}):
        with gdsstore.open(srv.url("obj.bin", mode, 3)) as f:
            buf = np.full(f.size, FILL, "u1")
            with pytest.raises(RangeMismatchError, match="changed while it was being read"):
                f.read(buf)
    old = np.frombuffer(DATA, "u1")
    assert np.all((buf == FILL) | (buf == old))  # old bytes or untouched, never the new version's
    assert buf[: 2 * (64 << 10)].tobytes() == DATA[: 2 * (64 << 10)]  # the ranges before the change


def test_whole_object_get_of_a_replaced_object_fails(srv: FaultServer) -> None:
    backend = backend_for(f"http://127.0.0.1:{srv.port}/replaced/1")
    with pytest.raises(RangeMismatchError):
        backend.get("obj.bin", bytearray)


def test_a_response_queued_after_a_body_is_never_data(srv: FaultServer) -> None:
    # After each correct body the server queues a well-formed 206 for the next range (wrong bytes,
    # right Content-Range and ETag): taking it for the next answer would land 0xEE bytes.
    with gdsstore.config.set({"remote.concurrency": 1}):
        with gdsstore.open(srv.url("obj.bin", "queue-extra", "always")) as f:
            buf = np.full(f.size, FILL, "u1")
            assert f.read(buf) == len(DATA)
    assert buf.tobytes() == DATA
    # every range was asked (after the GET that tells the size), none taken unasked
    assert gets(srv, "queue-extra") == 1 + len(DATA) // (64 << 10)


def test_ranged_gets_follow_redirects(srv: FaultServer) -> None:
    # HEAD answers 200, every GET answers 302 (e.g. a CDN that redirects data requests only).
    with gdsstore.open(srv.url("obj.bin", "get-redirect", "always")) as f:
        buf = np.full(f.size, FILL, "u1")
        assert f.read(buf) == len(DATA)
    assert buf.tobytes() == DATA


def test_redirected_ranges_never_carry_credentials_to_another_origin(
    srv: FaultServer, other_server: FaultServer
) -> None:
    other_server.objects["obj.bin"] = DATA
    srv.redirect_base = f"http://127.0.0.1:{other_server.port}"
    secret = {"Authorization": "Bearer gdsstore-DoNotLeak-42", "Cookie": "session=DoNotLeak-43"}
    with gdsstore.open(srv.url("obj.bin", "get-redirect", "always"), headers=secret) as f:
        buf = np.full(f.size, FILL, "u1")
        assert f.read(buf) == len(DATA)
    assert buf.tobytes() == DATA
    assert other_server.log, "the ranges went to the redirect target"
    for _, _, _, headers in other_server.log:
        assert not {k.lower() for k in headers} & {"authorization", "cookie"}
    assert any("authorization" in {k.lower() for k in h} for m, _, _, h in srv.log if m == "GET")  # to its own origin


@pytest.mark.parametrize("name", ["obj.bin", "big.bin"])  # 64 KiB ranges; one 2 MiB range
def test_a_stalled_attempt_times_out_after_remote_timeout(srv: FaultServer, name: str) -> None:
    # Headers and half the body arrive, then silence for longer than the test runs: the attempt ends on the
    # idle timeout (the error says so), not when the server gives up (that would be a broken body).
    srv.slow_seconds = 60.0
    settings = {"remote.timeout": 1.0, "remote.max_attempts": 1,
                "task_size": 2 << 20, "remote.max_range_size": 2 << 20, "remote.concurrency": 1}
    with gdsstore.config.set(settings), gdsstore.open(srv.url(name, "stall", "always")) as f:
        buf = np.full(f.size, FILL, "u1")
        with pytest.raises(RemoteIOError, match=r"failed after 1 attempt.*(no body bytes for 1 ?(s|000 ?ms)|(?i:timed? ?out))"):
            f.read(buf, 2 << 20 if name == "big.bin" else None)
    assert gets(srv, "stall") == 2  # the GET that tells the size (its body not taken), the stalled range


def test_a_stalled_whole_object_get_makes_at_most_max_attempts(srv: FaultServer) -> None:
    srv.slow_seconds = 2.0
    backend = backend_for(f"http://127.0.0.1:{srv.port}/stall/always")
    settings = {"remote.timeout": 0.3, "remote.max_attempts": 2, "task_size": 1 << 20}
    with gdsstore.config.set(settings), pytest.raises(RemoteIOError, match=r"failed after 2 attempt"):
        backend.get("obj.bin", bytearray)
    assert gets(srv, "stall") == 2  # it made 3 with max_attempts=2


def test_retry_after_parsing() -> None:
    assert retry_after({"Retry-After": "7"}) == 7.0
    assert retry_after({}) is None and retry_after({"Retry-After": "soon"}) is None
    assert retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # a date in the past


@pytest.mark.parametrize("value", ["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\x00b"])
def test_cr_lf_in_header_values_is_refused(srv: FaultServer, value: str) -> None:
    with pytest.raises(ValueError, match="CR, LF or NUL"):
        gdsstore.open(srv.url("obj.bin"), headers={"X-Token": value})
    with pytest.raises(ValueError, match="CR, LF or NUL"):
        backend_for(f"http://127.0.0.1:{srv.port}/", {"headers": {"X-Token": value}})
    with pytest.raises(ValueError, match="CR, LF or NUL"):  # WebHDFS: when the backend is made, not per request
        backend_for(f"webhdfs://127.0.0.1:{srv.port}/", {"headers": {"X-Token": value}})
    assert srv.log == []  # nothing was sent


def test_key_encoding_rule() -> None:
    assert key_to_url_path("a b/c#1?v=%/é", "t") == "a%20b/c%231%3Fv%3D%25/%C3%A9"
    for bad in ["%2e%2e/secret.bin", "..%2fsecret.bin", "%2E%2E%2Fsecret.bin", ".%2e/secret.bin", "a/%2e/b",
                "a%2f%2fb", "%2fetc", "..", "a/../b"]:
        with pytest.raises(ValueError, match="invalid key"):
            key_to_url_path(bad, "t")


def _sockets_to(port: int) -> int:
    """This process's TCP connections to ``127.0.0.1:port`` (any state but LISTEN)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    n = 0
    with open("/proc/net/tcp") as fh:
        for line in fh.readlines()[1:]:
            cols = line.split()
            if int(cols[2].split(":")[1], 16) == port and cols[9] in inodes:
                n += 1
    return n


def test_pooled_connections_plateau_at_the_pool_size(srv: FaultServer) -> None:
    """3,000 ranged reads from many threads against a server that closes some connections: the
    descriptors stop at the documented bound (the native core's idle pool: remote.wave_concurrency per
    store), where they once grew with every thread that ever made a request."""
    import concurrent.futures

    from zarr.abc.store import RangeByteRequest
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    settings = {"num_threads": 2, "remote.concurrency": 2, "remote.wave_concurrency": 4}
    bound = settings["remote.wave_concurrency"]  # the core's idle pool, per store (one for this server)
    url = srv.url("big.bin", "close-some")
    store = gdsstore.GDSStore(url.rsplit("/", 1)[0] + "/")
    rng = np.random.default_rng(5)
    offsets = rng.integers(0, len(BIG) - 70000, 3000).tolist()

    def read(i: int) -> bool:
        off = offsets[i]
        if i % 2:
            with gdsstore.open(url) as f:
                buf = np.empty(65536, "u1")
                return f.read(buf, 65536, off) == 65536 and buf.tobytes() == BIG[off : off + 65536]
        got = sync(store.get("big.bin", default_buffer_prototype(), byte_range=RangeByteRequest(off, off + 1000)))
        return got is not None and got.to_bytes() == BIG[off : off + 1000]

    before = _sockets_to(srv.port)  # kept by clients of other settings, from earlier tests
    counts = []
    with gdsstore.config.set(settings), concurrent.futures.ThreadPoolExecutor(12) as users:
        for part in range(3):
            assert all(users.map(read, range(part * 1000, (part + 1) * 1000)))
            counts.append(_sockets_to(srv.port))
        assert max(counts) - before <= bound, (before, counts)
