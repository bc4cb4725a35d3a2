"""The WebHDFS transport: Hadoop's REST API over the pooled HTTP client.

Reads are ``op=OPEN&offset=&length=`` on the namenode, which redirects (307) to a datanode that
streams exactly ``length`` bytes (an HttpFS gateway answers with the data directly; both work).
Writes are the two-step ``op=CREATE`` (namenode names the datanode, the data goes there).
``swebhdfs://`` is the same over HTTPS; without a port, 9870 (webhdfs) or 9871 (swebhdfs).

Storage options:

- ``user``: sent as ``user.name`` (simple authentication),
- ``delegation``: a delegation token (sent as ``delegation=``; never shown),
- ``headers``, ``verify``, ``cert``: as for HTTP(S).
"""

from __future__ import annotations

import json
import posixpath
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine.backend import Backend, ObjectInfo, check_key
from gdsstore.engine.buffers import as_io_buffer
from gdsstore.engine.remote.keys import check_remote_key
from gdsstore.engine.remote.pooled_http import (
    HTTPBody,
    HTTPClient,
    drop,
    get_client,
    raise_for_status,
)
from gdsstore.engine.remote.reader import (
    Body,
    FirstRange,
    NoBody,
    RangeRequest,
    check_length_response,
)
from gdsstore.engine.remote.redact import Scrubber
from gdsstore.engine.remote.retry import RemoteIOError, RetryPolicy
from gdsstore.engine.remote.wave import WaveReads

__all__ = ["WebHDFSBackend", "WebHDFSClient", "WebHDFSSource"]

_OPTION_NAMES = frozenset({"user", "delegation", "headers", "verify", "cert"})
_EXCEPTIONS: dict[str, type[OSError]] = {
    "FileNotFoundException": FileNotFoundError,
    "FileAlreadyExistsException": FileExistsError,
    "AccessControlException": PermissionError,
    "SecurityException": PermissionError,
    "AuthenticationException": PermissionError,
}


class WebHDFSClient:
    """The namenode of one ``webhdfs://host:port`` and the credentials to talk to it."""

    def __init__(self, url: str, options: Mapping[str, Any]) -> None:
        unknown = sorted(set(options) - _OPTION_NAMES)
        if unknown:
            raise TypeError(f"WebHDFS: unknown storage options {unknown}; known: {sorted(_OPTION_NAMES)}")
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("webhdfs", "swebhdfs") or not parts.hostname:
            raise ValueError(f"WebHDFS: not a webhdfs://host:port/path URL: {url!r}")
        if parts.username or parts.password or parts.query:
            raise ValueError("WebHDFS: pass user=/delegation= storage options, not credentials in the URL")
        self.scheme = scheme
        self.https = scheme == "swebhdfs"
        port = parts.port or (9871 if self.https else 9870)
        self.authority = f"{parts.hostname}:{port}"
        self.base = f"{'https' if self.https else 'http'}://{self.authority}/webhdfs/v1"
        self.user: str | None = options.get("user")
        self.delegation: str | None = options.get("delegation")
        self.headers = dict(options.get("headers") or {})
        self.scrub = Scrubber([self.delegation or "", *[str(v) for v in self.headers.values()]])
        self.http: HTTPClient = get_client(options.get("verify", True), options.get("cert"))

    def display(self, path: str) -> str:
        return f"{self.scheme}://{self.authority}{path}"

    def op_url(self, path: str, op: str, **params: Any) -> str:
        q: dict[str, Any] = {"op": op, **params}
        if self.delegation:
            q["delegation"] = self.delegation  # the token implies the user
        elif self.user:
            q["user.name"] = self.user
        return f"{self.base}{quote(path, safe='/')}?{urlencode(q)}"

    def request(self, method: str, path: str, op: str, *, body: Any = None, ok: tuple[int, ...] = (200,),
                **params: Any) -> Any:
        """One namenode call; returns the unread response (status in ``ok`` or a 307) or raises."""
        what = f"{op} {self.display(path)}"
        resp = self.http.request(method, self.op_url(path, op, **params), headers=self.headers,
                                 body=body, scrub=self.scrub)
        if resp.status in ok or resp.status == 307:
            return resp
        raise_hdfs(resp, what)
        raise AssertionError("unreachable")

    def json(self, method: str, path: str, op: str, **params: Any) -> Any:
        """A namenode call answered with JSON, retried under the remote retry policy."""

        def attempt() -> Any:
            resp = self.request(method, path, op, **params)
            try:
                return json.loads(resp.read(decode_content=False) or b"null")
            finally:
                resp.release_conn()

        return RetryPolicy.from_settings().call(attempt, f"{op} {self.display(path)}")

    def status(self, path: str) -> dict[str, Any]:
        return dict(self.json("GET", path, "GETFILESTATUS")["FileStatus"])

    def redirect(self, resp: Any, what: str) -> str:
        """The datanode URL of a 307 (or of a ``noredirect=true`` JSON answer)."""
        if resp.status == 307:
            loc = resp.headers.get("Location")
            drop(resp)
        else:
            try:
                loc = json.loads(resp.read(decode_content=False)).get("Location")
            except ValueError:
                loc = None
            resp.release_conn()
        if not loc:
            raise RemoteIOError(f"{what}: the namenode named no datanode (no Location)")
        self.scrub.add_url(loc)
        return str(loc)


def raise_hdfs(resp: Any, what: str) -> None:
    """Map a WebHDFS error (``RemoteException`` JSON) to builtin exceptions; else HTTP-status mapping."""
    status = int(resp.status)
    if status < 400:
        return
    exc_name = ""
    if status not in (404,):
        try:
            data = resp.read(65536, decode_content=False)
            exc_name = str(json.loads(data).get("RemoteException", {}).get("exception", ""))
        except Exception:
            exc_name = ""
        if exc_name in _EXCEPTIONS:
            drop(resp)
            raise _EXCEPTIONS[exc_name](f"{what}: HTTP {status} ({exc_name})")
    raise_for_status(resp, what)


class WebHDFSSource:
    """One HDFS file: GETFILESTATUS for the size, OPEN with offset/length through the datanode."""

    route = "webhdfs"

    def __init__(self, client: WebHDFSClient, path: str) -> None:
        self._c = client
        self.path = path
        self.scheme = client.scheme
        self.url = client.display(path)

    def __repr__(self) -> str:
        return f"WebHDFSSource({self.url!r})"

    def stat(self) -> int:
        st = self._c.status(self.path)
        if st.get("type") == "DIRECTORY":
            raise IsADirectoryError(f"WebHDFS: {self.url} is a directory, not a file")
        return int(st["length"])

    def version(self) -> tuple[Any, Any, Any]:
        """``(fileId, length, modificationTime)`` now: HDFS has no ETag, and OPEN no If-Match."""
        st = self._c.status(self.path)
        return st.get("fileId"), st.get("length"), st.get("modificationTime")

    def _open(self, req: RangeRequest, what: str) -> Any:
        resp = self._c.request("GET", self.path, "OPEN", offset=req.offset, length=req.nbytes)
        if resp.status == 307:
            loc = self._c.redirect(resp, what)
            resp = self._c.http.request("GET", loc, headers=self._c.headers, scrub=self._c.scrub)
            if resp.status != 200:
                raise_hdfs(resp, what)
        return resp

    def open_range(self, req: RangeRequest, size: int) -> Body:
        what = f"OPEN {self.url} offset={req.offset} length={req.nbytes}"
        resp = self._open(req, what)
        try:
            check_length_response(resp.status, resp.headers, req.nbytes, what)
        except BaseException:
            drop(resp)
            raise
        return HTTPBody(resp, req.nbytes, what)

    def open_first(self, nbytes: int, offset: int = 0) -> FirstRange:
        what = f"OPEN {self.url} offset={offset} length={nbytes}"
        if offset:
            # HDFS refuses an offset past the end (403 IOException) where HTTP says 416: size it first.
            return self._sized_first(nbytes, offset)
        resp = self._open(RangeRequest(offset, nbytes), what)
        length = resp.headers.get("Content-Length")
        if resp.status != 200 or length is None or not length.isdigit() or int(length) > nbytes:
            drop(resp)
            if resp.status != 200:
                raise RemoteIOError(f"{what}: unexpected status {resp.status}")
            # No usable length (chunked answer): learn the size first, then read the range.
            return self._sized_first(nbytes, offset)
        n = int(length)
        # A short answer ends the file; a full one may have more after it (size unknown).
        return FirstRange(HTTPBody(resp, n, what), n, offset + n if n < nbytes else None)


    def _sized_first(self, nbytes: int, offset: int) -> FirstRange:
        """The first range after a GETFILESTATUS: clamped to the file, empty past its end."""
        size = self.stat()
        n = max(0, min(nbytes, size - offset))
        body = self.open_range(RangeRequest(offset, n), size) if n else NoBody()
        return FirstRange(body, n, size)


class WebHDFSBackend(WaveReads, Backend):
    """Files under ``webhdfs://host:port/path``; keys are paths relative to it."""

    route = "webhdfs"

    def __init__(self, root: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self._client = WebHDFSClient(root, dict(storage_options or {}))
        path = urlsplit(root).path or "/"
        self._root = "/" + path.strip("/") if path.strip("/") else ""

    @property
    def url(self) -> str:
        return self._client.display(self._root or "/")

    def _path(self, key: str, where: str) -> str:
        check_remote_key(key, where)  # the path is percent-encoded whole by op_url
        key = key.rstrip("/")
        return f"{self._root}/{key}" if key else (self._root or "/")

    def source(self, key: str, where: str) -> WebHDFSSource:
        """The range source of ``key`` (one file)."""
        return WebHDFSSource(self._client, self._path(key, where))

    def open(self, key: str, mode: str = "rb") -> Any:
        from gdsstore.engine.remote.reader import RemoteFile
        from gdsstore.engine.remote.writer import RemoteWriteFile, check_remote_mode

        where = "WebHDFSBackend.open()"
        path = self._path(key, where)
        if check_remote_mode(mode, where) == "rb":
            return RemoteFile(WebHDFSSource(self._client, path))
        return RemoteWriteFile(self._client.display(path), lambda data, dev: webhdfs_upload(self._client, path, data, device=dev))

    def info(self, key: str) -> ObjectInfo:
        st = self._client.status(self._path(key, "WebHDFSBackend.info()"))
        mtime = st.get("modificationTime")
        if st.get("type") == "DIRECTORY":
            return ObjectInfo(key, 0, "directory", mtime / 1000 if mtime else None)
        return ObjectInfo(key, int(st.get("length", 0)), "file", mtime / 1000 if mtime else None)

    def put(self, key: str, buf: Any, *, exclusive: bool = False) -> None:
        webhdfs_upload(self._client, self._path(key, "WebHDFSBackend.put()"), buf, overwrite=not exclusive)

    def delete(self, key: str) -> None:
        self._client.json("DELETE", self._path(key, "WebHDFSBackend.delete()"), "DELETE", recursive="false")

    def delete_prefix(self, prefix: str) -> None:
        path = self._path(prefix, "WebHDFSBackend.delete_prefix()")
        if (prefix.endswith("/") or self._is_dir(path)) and path != (self._root or "/"):
            self._client.json("DELETE", path, "DELETE", recursive="true")
            return
        super().delete_prefix(prefix)

    def mkdir(self, key: str) -> None:
        self._client.json("PUT", self._path(key, "WebHDFSBackend.mkdir()"), "MKDIRS")

    def _is_dir(self, path: str) -> bool:
        try:
            return self._client.status(path).get("type") == "DIRECTORY"
        except FileNotFoundError:
            return False

    def _children(self, path: str) -> list[dict[str, Any]]:
        try:
            doc = self._client.json("GET", path, "LISTSTATUS")
        except FileNotFoundError:
            return []
        return list(doc.get("FileStatuses", {}).get("FileStatus", []))

    def list(self, prefix: str = "") -> Iterator[str]:
        if prefix:
            check_key(prefix, "WebHDFSBackend.list()")
        # Walk from the deepest directory the prefix names; keep keys that start with the prefix.
        start = posixpath.dirname(prefix) if not prefix.endswith("/") else prefix.rstrip("/")
        stack = [start]
        while stack:
            rel = stack.pop()
            for st in self._children(f"{self._root}/{rel}" if rel else (self._root or "/")):
                child = f"{rel}/{st['pathSuffix']}" if rel else st["pathSuffix"]
                if st.get("type") == "DIRECTORY":
                    if child.startswith(prefix) or prefix.startswith(child + "/"):
                        stack.append(child)
                elif child.startswith(prefix):
                    yield child

    def list_dir(self, prefix: str = "") -> Iterator[str]:
        if prefix:
            check_key(prefix, "WebHDFSBackend.list_dir()")
        rel = prefix.rstrip("/")
        for st in self._children(f"{self._root}/{rel}" if rel else (self._root or "/")):
            yield st["pathSuffix"]


def webhdfs_upload(
    client: WebHDFSClient, path: str, buf: Any, *, overwrite: bool = True, device: int | None = None
) -> None:
    """Write ``buf`` (host or device) to ``path``: CREATE on the namenode, the data to the datanode it names.

    ``device``: the CUDA device the bytes came from when ``buf`` is already a host copy (for the trace).
    """
    from gdsstore.engine.remote.writer import host_bytes

    b = as_io_buffer(buf, writable=False, where="WebHDFS.put()")
    data = bytes(host_bytes(b))
    device = b.device if device is None else device
    d = policy.decide_remote(scheme=client.scheme, device=device is not None, op="write", nbytes=len(data))
    what = f"CREATE {client.display(path)}"
    t0 = time.perf_counter()

    def attempt() -> None:
        resp = client.request("PUT", path, "CREATE", overwrite=str(overwrite).lower(), noredirect="true")
        loc = client.redirect(resp, what)
        put = client.http.request("PUT", loc, headers={**client.headers, "Content-Type": "application/octet-stream"},
                                  body=data, scrub=client.scrub)
        try:
            if put.status not in (200, 201):
                raise_hdfs(put, what)
        finally:
            put.release_conn()

    RetryPolicy.from_settings().call(attempt, what)
    _trace.record("write", d.route, d.reason, len(data), time.perf_counter() - t0, client.display(path), device)
