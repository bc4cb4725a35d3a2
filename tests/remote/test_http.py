"""The HTTP(S) transport against real loopback servers: our fault-injecting server and nginx."""

from __future__ import annotations

import os

import numpy as np
import pytest
from servers.faults import FaultServer
from servers.nginx import NginxServer

import gdsstore
from gdsstore.engine.backend import Backend, backend_for
from gdsstore.engine.ranges import ByteRange
from gdsstore.engine.remote import RemoteIOError

from .conftest import payload

DATA = payload(1 << 20, seed=1)


@pytest.fixture
def srv(faults: FaultServer) -> FaultServer:
    faults.objects["obj.bin"] = DATA
    faults.objects["empty.bin"] = b""
    return faults


def gets(srv: FaultServer) -> list[tuple[str, str, str | None, dict[str, str]]]:
    return [e for e in srv.log if e[0] == "GET"]


def test_whole_read_into_numpy_and_bytearray(srv: FaultServer) -> None:
    with gdsstore.open(srv.url("obj.bin")) as f:
        assert f.size == len(DATA)
        a = np.empty(f.size, "u1")
        assert f.read(a) == len(DATA)
        assert a.tobytes() == DATA
        b = bytearray(5000)
        assert f.pread(b, offset=777).result() == 5000
        assert bytes(b) == DATA[777:5777]
    # Split into task_size (64 KiB) ranges, each a separate request.
    ranges = {e[2] for e in gets(srv)}
    assert f"bytes=0-{(64 << 10) - 1}" in ranges and len(ranges) >= 16


def test_read_clamps_at_end_and_size_argument(srv: FaultServer) -> None:
    with gdsstore.open(srv.url("obj.bin")) as f:
        buf = bytearray(100)
        assert f.read(buf, offset=len(DATA) - 30) == 30
        assert bytes(buf[:30]) == DATA[-30:]
        assert f.read(buf, offset=len(DATA) + 5) == 0
        assert f.read(buf, size=10, offset=3) == 10 and bytes(buf[:10]) == DATA[3:13]
        with pytest.raises(ValueError, match="buffer too small"):
            f.read(buf, size=101)
        with pytest.raises(ValueError, match="offset"):
            f.read(buf, offset=-1)
        with pytest.raises(TypeError, match="read-only"):
            f.read(b"immutable")
        with pytest.raises(PermissionError, match="read-only"):
            f.write(buf)
    with pytest.raises(ValueError, match="closed"):
        f.read(buf)


def test_empty_object(srv: FaultServer) -> None:
    with gdsstore.open(srv.url("empty.bin")) as f:
        assert f.size == 0
        assert f.read(bytearray(10)) == 0
    with gdsstore.open(srv.url("empty.bin", "nohead", "always")) as f:
        assert f.size == 0  # GET bytes=0-0 → 416 "bytes */0"


def test_size_is_one_get_without_head(srv: FaultServer) -> None:
    # A server that answers no HEAD: the size comes from a GET whose body is not taken (no Range: a server
    # without Range support answers it too).
    with gdsstore.open(srv.url("obj.bin", "nohead", "always")) as f:
        assert f.size == len(DATA)
    assert [e[:3] for e in srv.log] == [("GET", "/nohead/always/obj.bin", None)]


def test_presigned_url_skips_head(srv: FaultServer) -> None:
    url = srv.url("obj.bin") + "?X-Amz-Signature=SIGNATURE0123456789&X-Amz-Credential=AKIAX%2Fscope"
    with gdsstore.trace() as t, gdsstore.open(url) as f:
        buf = bytearray(f.size)
        f.read(buf)
    assert bytes(buf) == DATA
    assert [e for e in srv.log if e[0] == "HEAD"] == []
    for text in (repr(f), str(t), repr(t.events)):
        assert "SIGNATURE0123456789" not in text and "AKIAX" not in text


def test_redirects_are_followed(srv: FaultServer) -> None:
    with gdsstore.open(srv.url("obj.bin", "redirect", "always")) as f:
        buf = bytearray(f.size)
        f.read(buf)
    assert bytes(buf) == DATA
    asked = [e for e in srv.log if e[1].startswith("/redirect/")]
    assert asked and len(srv.log) == 2 * len(asked)  # every request answered by the redirect's target
    assert repr(f) == f"RemoteFile({srv.url('obj.bin', 'redirect', 'always')!r}, mode='rb')"


def test_custom_headers_sent_and_never_shown(srv: FaultServer) -> None:
    secret = "Bearer top-secret-token-value-42"
    with gdsstore.trace() as t, gdsstore.open(srv.url("obj.bin"), headers={"Authorization": secret}) as f:
        f.read(bytearray(1000))
    sent = [{k.lower(): v for k, v in e[3].items()} for e in srv.log]
    assert sent and all(h.get("authorization") == secret and h.get("accept-encoding") == "identity" for h in sent)
    assert secret not in repr(f) and secret not in str(t)


def test_trace_records_route_reason_and_redacted_url(srv: FaultServer) -> None:
    with gdsstore.trace() as t, gdsstore.open(srv.url("obj.bin") + "?sig=abcdefgh12345") as f:
        f.read(np.empty(f.size, "u1"))
    (ev,) = t.events
    assert ev.op == "read" and ev.route == "http" and ev.nbytes == len(DATA) and ev.device is None
    assert "host buffer" in ev.reason and "ranges of 64 KiB," in ev.reason
    assert "abcdefgh12345" not in ev.path and ev.path.startswith(srv.url("obj.bin"))
    assert t.totals["http"]["bytes"] == len(DATA)


def test_object_replaced_during_read_is_detected(srv: FaultServer) -> None:
    srv.objects["changing.bin"] = DATA
    with gdsstore.open(srv.url("changing.bin")) as f:
        srv.objects["changing.bin"] = DATA[::-1]
        buf = np.zeros(len(DATA), "u1")
        with pytest.raises(RemoteIOError, match="changed while it was being read"):
            f.read(buf)


def test_connections_are_pooled(srv: FaultServer) -> None:
    with gdsstore.config.set({"remote.concurrency": 2}), gdsstore.open(srv.url("obj.bin")) as f:
        f.read(bytearray(f.size))
        f.read(bytearray(f.size))
    # 1 GET for the size (its body not taken) + 32 ranged GETs over keep-alive connections: far fewer
    # connections than requests.
    assert len(gets(srv)) == 33
    assert len(srv.peers) <= 4, srv.peers


def test_errors_missing_forbidden_bad_url(srv: FaultServer) -> None:
    with pytest.raises(FileNotFoundError, match="404"):
        gdsstore.open(srv.url("nope.bin"))
    with pytest.raises(PermissionError, match="403"):
        gdsstore.open(srv.url("obj.bin", "forbidden", "always"))
    with pytest.raises(ValueError, match="not a remote URL"):
        gdsstore.open("http://")
    with pytest.raises(ValueError, match="unsupported URL scheme"):
        gdsstore.open("ftp://host/x")
    with pytest.raises(ValueError, match="mode"):
        gdsstore.open(srv.url("obj.bin"), "r+b")
    with pytest.raises(PermissionError, match="read-only"):
        gdsstore.open(srv.url("obj.bin"), "wb")
    with pytest.raises(TypeError, match="unknown storage options"):
        gdsstore.open(srv.url("obj.bin"), endpoint="x")


# -- nginx ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def www(nginx: NginxServer) -> NginxServer:
    with open(os.path.join(nginx.root, "big.bin"), "wb") as f:
        f.write(DATA)
    os.makedirs(os.path.join(nginx.root, "d"), exist_ok=True)
    with open(os.path.join(nginx.root, "d", "small.bin"), "wb") as f:
        f.write(DATA[:1000])
    return nginx


def test_nginx_reads(www: NginxServer) -> None:
    with gdsstore.open(www.url("big.bin")) as f:
        assert f.size == len(DATA)
        buf = np.empty(f.size, "u1")
        assert f.read(buf) == len(DATA) and buf.tobytes() == DATA
        part = bytearray(300_000)
        assert f.read(part, offset=123_456) == 300_000 and bytes(part) == DATA[123_456:423_456]


def test_nginx_backend_is_read_only(www: NginxServer) -> None:
    b = backend_for(www.url(""))
    assert b.writable is False and b.listable is False
    assert b.info("d/small.bin").size == 1000
    assert b.exists("d/small.bin") and not b.exists("d/none.bin")
    got = b.get("big.bin", bytearray, ByteRange("suffix", 10))
    assert bytes(got) == DATA[-10:]
    got = b.get("big.bin", bytearray, ByteRange("range", 5, 25))
    assert bytes(got) == DATA[5:25]
    with pytest.raises(PermissionError):
        b.put("x", b"1")
    with pytest.raises(PermissionError):
        b.delete("d/small.bin")
    with pytest.raises(NotImplementedError):
        list(b.list())
    with pytest.raises(ValueError, match="invalid key"):
        b.info("../etc/passwd")
    assert repr(b) == f"HTTPBackend({www.url('')[:-1]!r})"


# -- whole-object gets: one round trip for small objects ----------------------------------------------


def http_backend(srv: FaultServer, mode: str = "ok", count: int | str = 0) -> Backend:
    return backend_for(f"http://127.0.0.1:{srv.port}/{mode}/{count}")


def test_small_get_is_one_request(srv: FaultServer) -> None:
    srv.objects["small.bin"] = DATA[:1000]
    with gdsstore.trace() as t:
        got = http_backend(srv).get("small.bin", bytearray)
    assert bytes(got) == DATA[:1000]
    assert [(m, r) for m, _, r, _ in srv.log] == [("GET", None)]  # one GET of the whole object, no HEAD first
    (ev,) = t.events
    assert ev.route == "http" and ev.nbytes == 1000


def test_large_get_continues_with_ranges(srv: FaultServer) -> None:
    got = http_backend(srv).get("obj.bin", bytearray)
    assert bytes(got) == DATA
    # One GET of the whole object tells its size (its body not taken: larger than task_size), then 16 ranges.
    assert [e[0] for e in srv.log].count("HEAD") == 0 and len(gets(srv)) == 17


@pytest.mark.parametrize(("mode", "count"), [("reset", 2), ("truncate", 2), ("503", 3), ("ignore-range", "always")])
def test_get_with_faults_returns_right_bytes(srv: FaultServer, mode: str, count: int | str) -> None:
    # A server that ignores Range answers the whole object: exactly what a whole-object get wants.
    assert bytes(http_backend(srv, mode, count).get("obj.bin", bytearray)) == DATA


def test_get_empty_missing_forbidden(srv: FaultServer) -> None:
    assert bytes(http_backend(srv).get("empty.bin", bytearray)) == b""
    with pytest.raises(FileNotFoundError):
        http_backend(srv).get("nope.bin", bytearray)
    with pytest.raises(PermissionError):
        http_backend(srv, "forbidden", "always").get("obj.bin", bytearray)


# -- TLS ------------------------------------------------------------------------------------------------


def test_tls_is_verified_by_default(tls_server: FaultServer, tls_ca: str) -> None:
    tls_server.objects["tls.bin"] = DATA
    url = tls_server.url("tls.bin")
    with pytest.raises(RemoteIOError, match=r"(?i)certificate"):
        gdsstore.open(url)  # an unknown issuer: refused (one attempt: test_core_interrupts counts them)
    for opts in ({"verify": tls_ca}, {"verify": False}):
        with gdsstore.open(url, **opts) as f:
            buf = bytearray(f.size)
            f.read(buf)
        assert bytes(buf) == DATA


def test_a_client_certificate_is_refused_naming_why(srv: FaultServer) -> None:
    # The native core sends no TLS client certificate: cert= is refused, never ignored, and nothing is sent.
    with pytest.raises(TypeError, match=r"client certificates \(cert=\) are not supported.*drop cert="):
        gdsstore.open(srv.url("obj.bin"), cert=("/path/client.pem", "/path/client.key"))
    assert srv.log == []
