"""The native core (``gdsstore._core``) on its own: every check of every answer, against the fault server,
a gzip server, a slow server and moto, plus fork and the GIL. Skipped where the core is not built."""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from forked import run_forked
from servers.faults import FaultServer

from gdsstore.engine import native
from gdsstore.engine.landing import Landed
from gdsstore.engine.remote import core
from gdsstore.engine.remote.retry import STALE_RETRIES, RetryPolicy
from gdsstore.errors import RangeMismatchError, RangeNotSupportedError, RemoteIOError

from .conftest import payload, read_pieces

pytestmark = pytest.mark.skipif(not native.load(), reason=f"native core not built: {native.unavailable_reason()}")

DATA = payload(256 << 10, seed=7)
FILL = 0xA5
RETRY = RetryPolicy(max_attempts=4, retry_status=(503,), backoff_base=0.001, backoff_max=0.01)


@pytest.fixture
def srv(faults: FaultServer) -> FaultServer:
    faults.objects["obj.bin"] = DATA
    faults.objects["obj.bin.v2"] = payload(len(DATA), seed=8)
    faults.slow_seconds = 0.6
    return faults


def store_of(srv: FaultServer) -> Any:
    return core.http_store(f"http://127.0.0.1:{srv.port}/", connect_timeout=2.0)


def wave(srv: FaultServer, pieces: list[core.Piece], n: int, timeout: float = 5.0,
         if_match: str | None = None) -> tuple[np.ndarray, list[Any]]:
    buf = np.full(n, FILL, "u1")
    res = read_pieces(store_of(srv), "http://srv/", pieces, buf, if_match=if_match, retry=RETRY, concurrency=8,
                      timeout=timeout)
    return buf, res


def gets(srv: FaultServer, mode: str) -> int:
    return sum(1 for e in srv.log if e[0] == "GET" and e[1].startswith(f"/{mode}/"))


def untouched_or_right(buf: np.ndarray, ref: bytes) -> None:
    want = np.frombuffer(ref, "u1")[: buf.size]
    assert np.all((buf == FILL) | (buf == want))


def test_ranges_and_whole_objects_land_in_their_slots(srv: FaultServer) -> None:
    n = len(DATA)
    pieces = [
        ("ok/0/obj.bin", 0, None, n, 0, n),  # whole, size known
        ("ok/0/obj.bin", 0, None, None, n, n),  # whole, size unknown
        ("ok/0/obj.bin", 1000, 5000, 4000, 2 * n, 4000),  # a range
        ("ok/0/obj.bin", -300, None, None, 2 * n + 4096, 300),  # a suffix
        ("ok/0/obj.bin", n - 10, n + 90, None, 2 * n + 8192, 100),  # clamped at the end
    ]
    buf, res = wave(srv, pieces, 2 * n + 8192 + 100)
    assert [r.error for r in res] == [None] * 5
    assert [r.size for r in res] == [n, n, 4000, 300, 10]
    assert buf[:n].tobytes() == DATA and buf[n : 2 * n].tobytes() == DATA
    assert buf[2 * n : 2 * n + 4000].tobytes() == DATA[1000:5000]
    assert buf[2 * n + 4096 : 2 * n + 4396].tobytes() == DATA[-300:]
    assert buf[2 * n + 8192 : 2 * n + 8202].tobytes() == DATA[-10:]
    assert buf[2 * n + 8202 :].tolist() == [FILL] * 90  # nothing past what the server sent
    assert all(r.total == n and r.etag for r in res)


def test_missing_object_is_file_not_found(srv: FaultServer) -> None:
    _, res = wave(srv, [("ok/0/nope.bin", 0, None, None, 0, 100)], 100)
    assert isinstance(res[0].error, FileNotFoundError) and res[0].kind == "not_found"


def test_forbidden_is_permission_error_without_retries(srv: FaultServer) -> None:
    # "forbidden" answers HEAD with 403; GETs of a missing name are 404, so ask the object that exists.
    srv.objects["secret.bin"] = b"x" * 10
    _, res = wave(srv, [("forbidden/always/secret.bin", 0, 10, 10, 0, 10)], 10)
    assert res[0].error is not None and res[0].attempts == 1 and gets(srv, "forbidden") == 1
    assert not isinstance(res[0].error, RemoteIOError) or "failed after" not in str(res[0].error)


def test_ignored_range_never_lands(srv: FaultServer) -> None:
    buf, res = wave(srv, [("ignore-range/always/obj.bin", 100, 200, 100, 0, 4096)], 4096)
    assert isinstance(res[0].error, RangeNotSupportedError)
    assert res[0].attempts == 1 and gets(srv, "ignore-range") == 1  # not retried: it would fail the same
    assert buf.tolist() == [FILL] * 4096


@pytest.mark.parametrize("mode", ["wrong-range", "short-range"])
def test_mismatched_ranges_are_refused(srv: FaultServer, mode: str) -> None:
    buf, res = wave(srv, [(f"{mode}/always/obj.bin", 1000, 2000, 1000, 0, 1000)], 1000)
    assert isinstance(res[0].error, RangeMismatchError), res[0].error
    assert res[0].size < 1000
    untouched_or_right(buf, DATA[1000:2000])


@pytest.mark.parametrize("mode", ["503", "reset", "truncate", "slow"])
def test_transient_faults_recover(srv: FaultServer, mode: str) -> None:
    n = len(DATA)
    buf, res = wave(srv, [(f"{mode}/2/obj.bin", 0, n, n, 0, n)], n, timeout=0.3)
    assert res[0].error is None, res[0].error
    assert buf.tobytes() == DATA
    assert gets(srv, mode) == 3


@pytest.mark.parametrize("mode", ["503", "reset", "truncate", "slow"])
def test_transient_faults_give_up_after_max_attempts(srv: FaultServer, mode: str) -> None:
    n = len(DATA)
    buf, res = wave(srv, [(f"{mode}/always/obj.bin", 0, n, n, 0, n)], n, timeout=0.3)
    assert isinstance(res[0].error, RemoteIOError)
    assert "failed after 4 attempt(s) (remote.max_attempts=4)" in str(res[0].error)
    assert gets(srv, mode) == 4
    untouched_or_right(buf, DATA)


def test_requests_lost_to_stale_connections_are_sent_again_at_once(srv: FaultServer) -> None:
    """A server closes each kept-alive connection as the next request arrives on it: every read still lands,
    though no failure may be retried (``max_attempts=1``), and each costs one request more, not a pause."""
    n, store = len(DATA), store_of(srv)
    once = RetryPolicy(max_attempts=1, retry_status=(), backoff_base=60.0, backoff_max=60.0)
    for i in range(10):
        buf = np.full(n, FILL, "u1")
        (res,) = read_pieces(store, "http://srv/", [("drop-reused/always/obj.bin", 0, n, n, 0, n)], buf,
                                retry=once, concurrency=1, timeout=5.0)
        assert res.error is None, (i, res.error)
        assert buf.tobytes() == DATA
    assert gets(srv, "drop-reused") == 1 + 2 * 9  # the first on a fresh connection, then one dropped per read


def test_a_server_that_drops_every_request_ends_after_a_bounded_number(srv: FaultServer) -> None:
    n = len(DATA)
    buf, res = wave(srv, [("drop/always/obj.bin", 0, n, n, 0, n)], n)
    assert isinstance(res[0].error, RemoteIOError)
    assert "failed after 4 attempt(s) (remote.max_attempts=4)" in str(res[0].error)
    assert gets(srv, "drop") == STALE_RETRIES + 4
    untouched_or_right(buf, DATA)


def test_retry_asks_only_for_what_is_missing(srv: FaultServer) -> None:
    n = len(DATA)
    buf, res = wave(srv, [("truncate/1/obj.bin", 0, n, n, 0, n)], n)
    assert res[0].error is None and buf.tobytes() == DATA
    ranges = [e[2] for e in srv.log if e[0] == "GET"]
    assert ranges[0] == f"bytes=0-{n - 1}"
    assert ranges[1] == f"bytes={n // 2}-{n - 1}"


def test_retry_of_one_piece_of_a_table_lands_the_rest_in_its_slot(srv: FaultServer) -> None:
    # The second piece's body breaks half way: only it is asked again, for its second half, into the rest of
    # its own slot (not the first piece's, not the slot's start).
    n = len(DATA)
    buf, res = wave(srv, [("ok/0/obj.bin", 0, 1000, 1000, 0, 1000), ("truncate/1/obj.bin", 0, n, n, 1024, n)],
                    1024 + n)
    assert [r.error for r in res] == [None, None] and [r.size for r in res] == [1000, n]
    assert buf[:1000].tobytes() == DATA[:1000] and buf[1024:].tobytes() == DATA
    assert gets(srv, "ok") == 1
    assert [e[2] for e in srv.log if e[0] == "GET" and e[1].startswith("/truncate/")] == [
        f"bytes=0-{n - 1}", f"bytes={n // 2}-{n - 1}"]


def test_resumed_piece_of_a_replaced_object_fails(srv: FaultServer) -> None:
    # The first body breaks half way; the retry gets the replacement (another ETag): never spliced.
    n = len(DATA)
    srv.objects["both.bin"] = DATA
    srv.objects["both.bin.v2"] = payload(n, seed=9)
    srv.objects["half.bin"] = DATA
    # "truncate" then "replaced" cannot be combined on one path; check the rule on the merge itself.
    out = core.TableResult(np.array([n // 2]), np.array([n]), ['"v1"'], None, {})
    err = core._merge(out, 0, 10, n, '"v2"', None)
    assert err is not None and err[1] == "changed" and out.size[0] == n // 2


@pytest.mark.parametrize("mode", ["replaced", "replaced-412"])
def test_if_match_keeps_another_version_out_of_the_slot(srv: FaultServer, mode: str) -> None:
    # The object is replaced after the first GET; the second asks If-Match with the first's ETag. "replaced"
    # ignores If-Match (the core compares the answer's ETag before its body lands), "replaced-412" answers 412.
    n = 1000
    buf, res = wave(srv, [(f"{mode}/1/obj.bin", 0, n, n, 0, n)], n)
    assert res[0].error is None and res[0].etag
    assert buf.tobytes() == DATA[:n]
    buf, res = wave(srv, [(f"{mode}/1/obj.bin", n, 2 * n, n, 0, n)], n, if_match=res[0].etag)
    assert res[0].kind == "changed" and isinstance(res[0].error, RangeMismatchError)
    assert "changed while it was being read" in str(res[0].error)
    assert buf.tolist() == [FILL] * n


def test_if_match_of_the_same_version_lands(srv: FaultServer) -> None:
    first = wave(srv, [("ok/0/obj.bin", 0, 10, 10, 0, 10)], 10)[1][0]
    buf, res = wave(srv, [("ok/0/obj.bin", 10, 20, 10, 0, 10)], 10, if_match=first.etag)
    assert res[0].error is None and buf.tobytes() == DATA[10:20]


def test_opened_file_reads_through_the_core(srv: FaultServer) -> None:
    import gdsstore

    url = f"http://127.0.0.1:{srv.port}/ok/0/obj.bin"
    with gdsstore.config.set({"task_size": 64 << 10}), gdsstore.trace() as t, gdsstore.open(url) as f:
        buf = np.full(f.size, FILL, "u1")
        assert f.read(buf) == len(DATA)
    assert buf.tobytes() == DATA
    (reason,) = [r for op, _, r in t.by_reason() if op == "read"]
    assert reason.startswith("native core") and "host buffer" in reason


def test_chunked_answer_is_refused(srv: FaultServer) -> None:
    # object_store needs a Content-Length to check a range's length: an answer without one fails its item.
    _, res = wave(srv, [("chunked/always/obj.bin", 0, 1000, 1000, 0, 1000)], 1000)
    assert res[0].kind == "unsupported"


def test_slot_too_small_is_handed_back(srv: FaultServer) -> None:
    buf, res = wave(srv, [("ok/0/obj.bin", 0, None, None, 0, 1000)], 1000)
    assert res[0].kind == "too_large" and res[0].total == len(DATA)
    assert buf.tolist() == [FILL] * 1000


def test_wrong_size_of_a_known_object_fails(srv: FaultServer) -> None:
    n = len(DATA)
    buf, res = wave(srv, [("ok/0/obj.bin", 0, None, n + 1, 0, n + 1)], n + 1)
    assert isinstance(res[0].error, RemoteIOError) and res[0].kind == "length"
    assert buf.tolist() == [FILL] * (n + 1)


def test_bad_slots_and_buffers_are_refused(srv: FaultServer) -> None:
    mod = pytest.importorskip("gdsstore._core")
    st = store_of(srv)
    buf = np.zeros(100, "u1")

    def table(*rows: core.Piece) -> core.PieceTable:
        return core.PieceTable.of(list(rows))

    def counts(n: int) -> list[np.ndarray]:
        return [np.zeros(n, np.int64), np.zeros(n, np.int64)]

    with pytest.raises(ValueError, match="overlaps"):
        mod.read_table(st, table(("ok/0/obj.bin", 0, 60, None, 0, 60), ("ok/0/obj.bin", 0, 60, None, 40, 60)), buf,
                       *counts(2))
    with pytest.raises(ValueError, match="outside the buffer"):
        mod.read_table(st, table(("ok/0/obj.bin", 0, 60, None, 50, 60)), buf, *counts(1))
    ro = np.zeros(100, "u1")
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        mod.read_table(st, table(("ok/0/obj.bin", 0, 60, None, 0, 60)), ro, *counts(1))

class _Gzip(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = gzip.compress(DATA)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


class _Slow(BaseHTTPRequestHandler):
    """Answers every GET after 50 ms, counting the requests in flight."""

    protocol_version = "HTTP/1.1"
    lock = threading.Lock()
    now = 0
    peak = 0

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        cls = type(self)
        with cls.lock:
            cls.now += 1
            cls.peak = max(cls.peak, cls.now)
        time.sleep(0.05)
        with cls.lock:
            cls.now -= 1
        body = self.body()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self) -> bytes:
        return b"0123456789abcdef"


class _SlowLarge(_Slow):
    """Answers every GET after 50 ms with 1 MiB: the object's name repeated (a request of its own lane)."""

    def body(self) -> bytes:
        return _large_body(self.path.lstrip("/"))


def _large_body(name: str) -> bytes:
    unit = name.encode().ljust(16, b".")
    return unit * ((1 << 20) // len(unit))


@pytest.fixture
def http_server(request: pytest.FixtureRequest) -> Iterator[int]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), request.param)
    srv.daemon_threads = True
    srv.request_queue_size = 512
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("http_server", [_Gzip], indirect=True)
def test_encoded_body_is_refused(http_server: int) -> None:
    st = core.http_store(f"http://127.0.0.1:{http_server}/", connect_timeout=2.0)
    buf = np.full(len(DATA), FILL, "u1")
    res = read_pieces(st, "x", [("a.bin", 0, None, None, 0, len(DATA))], buf, retry=RETRY,
                         concurrency=4, timeout=5.0)
    assert res[0].kind == "encoding" and isinstance(res[0].error, RemoteIOError)
    assert buf.tolist() == [FILL] * len(DATA)


@pytest.mark.parametrize("http_server", [_Slow], indirect=True)
# n: enough rounds for the connection ramp (it starts at 2) to reach the wave's concurrency, four times over
# (each request holds the server 50 ms: 1,024 at 4 at once would wait 13 s for what 128 show)
@pytest.mark.parametrize(("concurrency", "n"), [(4, 128), (64, 1024)])
def test_requests_in_flight_follow_concurrency(http_server: int, concurrency: int, n: int) -> None:
    _Slow.peak = 0
    st = core.http_store(f"http://127.0.0.1:{http_server}/", connect_timeout=2.0)
    pieces = [(f"o{i}", 0, None, 16, 64 * i, 16) for i in range(n)]
    buf = np.zeros(64 * n, "u1")
    res = read_pieces(st, "x", pieces, buf, retry=RETRY, concurrency=concurrency, timeout=10.0)
    assert all(r.error is None for r in res)
    # the server counts the requests it holds at once (each 50 ms): never more than asked, and many where allowed
    assert _Slow.peak <= concurrency
    assert _Slow.peak >= min(concurrency, 32)


@pytest.mark.parametrize("http_server", [_SlowLarge], indirect=True)
def test_large_requests_in_flight_follow_concurrency_and_land_whole(http_server: int) -> None:
    """Requests of 1 MiB and more run in lanes of their own: still at most `concurrency` at once, all of them
    in flight when they may be, each body in its slot."""
    _SlowLarge.peak = 0
    st = core.http_store(f"http://127.0.0.1:{http_server}/", connect_timeout=2.0)
    names = [f"big{i:02d}" for i in range(24)]  # enough for the ramp (from 2, one more per answer) to reach 4
    size = len(_large_body(names[0]))
    pieces = [(name, 0, None, size, i * size, size) for i, name in enumerate(names)]
    buf = np.zeros(size * len(names), "u1")
    res = read_pieces(st, "x", pieces, buf, retry=RETRY, concurrency=4, timeout=10.0)
    assert all(r.error is None and r.size == size for r in res)
    assert 3 <= _SlowLarge.peak <= 4  # at most `concurrency`, and really in flight together
    for i, name in enumerate(names):
        assert buf[i * size : (i + 1) * size].tobytes() == _large_body(name), f"slot {i} holds other bytes"


@pytest.mark.parametrize("http_server", [_Slow], indirect=True)
def test_gil_is_released_during_the_wave(http_server: int) -> None:
    st = core.http_store(f"http://127.0.0.1:{http_server}/", connect_timeout=2.0)
    pieces = [(f"o{i}", 0, None, 16, 64 * i, 16) for i in range(8)]
    buf = np.zeros(64 * 8, "u1")
    t = threading.Thread(target=read_pieces, args=(st, "x", pieces, buf),
                         kwargs={"retry": RETRY, "concurrency": 1, "timeout": 10.0})
    t.start()
    spins = 0
    while t.is_alive():  # 8 x 50 ms in the core: Python keeps running meanwhile
        spins += 1
        time.sleep(0)
    assert spins > 1000


def test_wave_in_a_forked_child(srv: FaultServer) -> None:
    n = len(DATA)
    _, res = wave(srv, [("ok/0/obj.bin", 0, None, n, 0, n)], n)  # the runtime exists before fork
    assert res[0].error is None

    def child() -> int:
        b2, r2 = wave(srv, [("ok/0/obj.bin", 0, None, n, 0, n)], n)
        return 0 if r2[0].error is None and b2.tobytes() == DATA else 2

    code = run_forked(child, timeout=30)
    if code is None:
        pytest.fail("the forked child's wave hung")
    assert code == 0


def test_s3_wave_signed_in_headers(s3: dict[str, Any]) -> None:
    client = s3["client"]
    objs = {f"k/{i}.bin": payload(1000 + i, seed=i) for i in range(20)}
    for k, v in objs.items():
        client.put_object(Bucket="test-bucket", Key=k, Body=v)
    opts = {"aws_endpoint": s3["endpoint_url"], "aws_region": "us-east-1", "aws_bucket": "test-bucket",
            "aws_access_key_id": s3["key"], "aws_secret_access_key": s3["secret"]}
    st = core.s3_store(opts, connect_timeout=2.0)
    pieces = [(k, 0, None, None, 4096 * i, 4096) for i, k in enumerate(objs)]
    pieces.append(("k/3.bin", 10, 20, 10, 4096 * 20, 10))
    buf = np.zeros(4096 * 21, "u1")
    res = read_pieces(st, "s3://test-bucket/", pieces, buf, retry=RETRY, concurrency=8, timeout=10.0)
    assert [r.error for r in res] == [None] * 21
    for i, v in enumerate(objs.values()):
        assert buf[4096 * i : 4096 * i + res[i].size].tobytes() == v
    assert buf[4096 * 20 : 4096 * 20 + 10].tobytes() == objs["k/3.bin"][10:20]


def test_s3_wrong_credentials_are_permission_error_at_once(moto_auth: str) -> None:
    secret = "WRONG-secret-DoNotLeak-42"
    opts = {"aws_endpoint": moto_auth, "aws_region": "us-east-1", "aws_bucket": "test-bucket",
            "aws_access_key_id": "AKIAWRONGKEY", "aws_secret_access_key": secret}
    st = core.s3_store(opts, connect_timeout=2.0)
    buf = np.zeros(16, "u1")
    res = read_pieces(st, "s3://test-bucket/", [("a.bin", 0, None, None, 0, 16)], buf, retry=RETRY,
                         concurrency=1, timeout=10.0)
    assert isinstance(res[0].error, PermissionError) and res[0].attempts == 1
    assert secret not in str(res[0].error)


def test_s3_missing_key_is_file_not_found(s3: dict[str, Any]) -> None:
    opts = {"aws_endpoint": s3["endpoint_url"], "aws_region": "us-east-1", "aws_bucket": "test-bucket",
            "aws_access_key_id": s3["key"], "aws_secret_access_key": s3["secret"]}
    buf = np.zeros(16, "u1")
    res = read_pieces(core.s3_store(opts, connect_timeout=2.0), "s3://test-bucket/",
                         [("nope.bin", 0, None, None, 0, 16)], buf, retry=RETRY, concurrency=1, timeout=10.0)
    assert isinstance(res[0].error, FileNotFoundError)


def test_closed_port_fails_after_attempts() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    st = core.http_store(f"http://127.0.0.1:{port}/", connect_timeout=1.0)
    buf = np.zeros(16, "u1")
    res = read_pieces(st, "x", [("a", 0, None, None, 0, 16)], buf, retry=RETRY, concurrency=1,
                         timeout=2.0)
    assert isinstance(res[0].error, RemoteIOError) and "failed after 4 attempt(s)" in str(res[0].error)
    assert res[0].kind in ("connect", "io")


@pytest.mark.parametrize("threads", [1, 3])
def test_split_bytes_copies_every_item(threads: int) -> None:
    from gdsstore import _core as gdsstore_core

    buf = np.frombuffer(payload(1 << 20, seed=3), "u1")
    offs, sizes = [0, 10, 5000, 1 << 19, 0], [10, 4990, 0, 1 << 19, -1]
    got = gdsstore_core.split_bytes(buf, offs, sizes, threads=threads)
    assert got[:4] == [buf[o : o + n].tobytes() for o, n in zip(offs[:4], sizes[:4])]
    assert got[4] is None and all(type(g) is bytes for g in got[:4])
    with pytest.raises(ValueError, match="outside the buffer"):
        gdsstore_core.split_bytes(buf, [len(buf) - 1], [2])
    # Without the core, the wave's one-by-one copies give the same.
    assert Landed(buf, np.array(offs), np.array(sizes)).all_bytes() == got
