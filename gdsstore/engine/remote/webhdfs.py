"""The WebHDFS transport: Hadoop's REST API over urllib3 (object_store has no WebHDFS).

Reads are ``op=OPEN&offset=&length=``, through the datanode the namenode redirects to (an HttpFS gateway
answers itself); :class:`WebHDFSClient` answers a wave's table as the native core does. Writes are the two-step
``op=CREATE``. Storage options (``user``, ``delegation``, ``headers``, ``verify``, ``cert``): docs/remote.md.
"""

from __future__ import annotations

import http.client
import json
import os
import posixpath
import time
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine.backend import ObjectInfo, check_key
from gdsstore.engine.buffers import as_io_buffer
from gdsstore.engine.pool import map_all
from gdsstore.engine.remote import core
from gdsstore.engine.remote.keys import check_header_values, check_remote_key
from gdsstore.engine.remote.redact import redact_url, remember, remember_url, scrub_text
from gdsstore.engine.remote.retry import RetryPolicy, is_transient, retry_after, status_error
from gdsstore.engine.remote.wave import WaveReads
from gdsstore.engine.remote.writer import check_remote_mode, host_bytes
from gdsstore.errors import RangeMismatchError, RemoteIOError, TransientError

__all__ = ["WebHDFSBackend", "WebHDFSClient", "WebHDFSSource"]

_OPTION_NAMES = frozenset({"user", "delegation", "headers", "verify", "cert"})
_EXCEPTIONS: dict[str, type[OSError]] = {
    "FileNotFoundException": FileNotFoundError,
    "FileAlreadyExistsException": FileExistsError,
    "AccessControlException": PermissionError,
    "SecurityException": PermissionError,
    "AuthenticationException": PermissionError,
}
#: A piece's answer: bytes landed, the object's size (-1: unknown), and its failure (as in ``core.Failed``) or None.
Row = tuple[int, int, tuple[str | BaseException, int, str] | None]
#: urllib3 pools by (process, TLS settings, ``remote.concurrency``): a forked child makes its own.
_pools: dict[tuple[Any, ...], Any] = {}


def _pool(verify: bool | str, cert: str | tuple[str, str] | None) -> Any:
    """This process's ``PoolManager`` for these TLS settings (verified by default; ``verify`` a CA bundle path)."""
    import urllib3

    concurrency = policy.settings().remote_concurrency
    key = (os.getpid(), verify, cert, concurrency)
    if key not in _pools:
        # Twice the workers: a worker may hold a connection while its next request starts.
        kw: dict[str, Any] = {"num_pools": 32, "maxsize": 2 * concurrency, "block": False, "retries": False,
                              "cert_reqs": "CERT_NONE" if verify is False else "CERT_REQUIRED"}
        if verify is False:
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        elif isinstance(verify, str):
            kw["ca_certs"] = verify
        kw["cert_file"], kw["key_file"] = cert if isinstance(cert, tuple) else (cert, None)
        _pools.setdefault(key, urllib3.PoolManager(**kw))
    return _pools[key]


def drop(resp: Any) -> None:
    """Close a response we will not read to the end, so its connection is not reused half-read."""
    resp.close()
    resp.release_conn()


class WebHDFSClient(core.PiecesStore):
    """The namenode of one ``webhdfs://host:port`` and the credentials to talk to it."""

    def __init__(self, url: str, options: Mapping[str, Any]) -> None:
        unknown = sorted(set(options) - _OPTION_NAMES)
        if unknown:
            raise TypeError(f"WebHDFS: unknown storage options {unknown}; known: {sorted(_OPTION_NAMES)}")
        parts = urlsplit(url)
        self.scheme = parts.scheme.lower()
        if self.scheme not in ("webhdfs", "swebhdfs") or not parts.hostname:
            raise ValueError(f"WebHDFS: not a webhdfs://host:port/path URL: {url!r}")
        if parts.username or parts.password or parts.query:
            raise ValueError("WebHDFS: pass user=/delegation= storage options, not credentials in the URL")
        https = self.scheme == "swebhdfs"
        self.authority = f"{parts.hostname}:{parts.port or (9871 if https else 9870)}"
        self.base = f"{'https' if https else 'http'}://{self.authority}/webhdfs/v1"
        self.user: str | None = options.get("user")
        self.delegation: str | None = options.get("delegation")
        self.headers = dict(options.get("headers") or {})
        check_header_values(self.headers, "WebHDFS")
        remember(self.delegation, *[str(v) for v in self.headers.values()])
        self._tls: tuple[bool | str, Any] = (options.get("verify", True), options.get("cert"))
        #: The files of this namenode as the waves see them (paths are absolute HDFS paths).
        self.root = core.CoreRoot(lambda: self, self.display(""))

    def display(self, path: str) -> str:
        return f"{self.scheme}://{self.authority}{path}"

    def send(self, method: str, url: str, headers: Mapping[str, str], body: Any = None) -> Any:
        """Send one request (no redirects, no retries: callers decide); returns the unread response.
        Connection failures and timeouts become :class:`TransientError` with a scrubbed message."""
        import urllib3

        s = policy.settings()
        try:
            return _pool(*self._tls).request(
                method, url, headers=dict(headers), body=body, preload_content=False, redirect=False, retries=False,
                timeout=urllib3.Timeout(connect=s.remote_connect_timeout, read=s.remote_timeout), decode_content=False,
            )
        except Exception as exc:
            text = scrub_text(f"{type(exc).__name__}: {exc}")
            raise (TransientError if is_transient(exc) else RemoteIOError)(f"{method} {redact_url(url)}: {text}") from None

    def request(self, method: str, path: str, op: str, **params: Any) -> Any:
        """One namenode call; returns the unread response (a 200 or a 307) or raises."""
        q: dict[str, Any] = {"op": op, **params}
        if self.delegation:
            q["delegation"] = self.delegation  # the token implies the user
        elif self.user:
            q["user.name"] = self.user
        resp = self.send(method, f"{self.base}{quote(path, safe='/')}?{urlencode(q)}", self.headers)
        if resp.status not in (200, 307):
            raise_hdfs(resp, f"{op} {self.display(path)}")
        return resp

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

    def size(self, path: str) -> int:
        """The size of the file at ``path`` (``IsADirectoryError`` for a directory)."""
        st = self.status(path)
        if st.get("type") == "DIRECTORY":
            raise IsADirectoryError(f"WebHDFS: {self.display(path)} is a directory, not a file")
        return int(st["length"])

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
        remember_url(loc)
        return str(loc)

    def read_table(self, table: core.PieceTable, buffer: Any, got: Any, total: Any, *, concurrency: int,
                   timeout: float) -> core.Answer:
        """Each piece through OPEN (:meth:`_piece`), ``concurrency`` (at most ``PYTHON_WAVE_MAX``) at a time;
        ``timeout``: ``remote.timeout``'s, as :meth:`send` takes it."""
        n = len(table.paths)
        rows = map_all(lambda i: self._piece(table.row(i), buffer), range(n), min(concurrency, policy.PYTHON_WAVE_MAX))
        got[:], total[:] = [r[0] for r in rows], [r[1] for r in rows]
        return [None] * n, None, [(i, *r[2]) for i, r in enumerate(rows) if r[2] is not None]

    def _piece(self, p: core.Piece, buffer: Any) -> Row:
        """One piece, answered as the core answers it. HDFS refuses an offset past the end (403) where HTTP says
        416, so a suffix or an offset that may lie there asks the size first; a whole object is asked with one
        byte more than its room, which tells whether it fits."""
        path, start, end, expect, slot, cap = p
        landed = [0]
        total = -1
        try:
            if start < 0 or (start > 0 and expect is None):
                total = self.size(path)
                start = max(0, total + start) if start < 0 else min(start, total)
            stop = end if end is not None else total if total >= 0 else None
            view = memoryview(buffer)[slot : slot + cap]
            ask = cap + 1 if stop is None else max(0, (min(stop, total) if total >= 0 else stop) - start)
            n = ask if stop is not None and ask > cap else self._read(path, start, ask, view, landed) if ask else 0
            if n > cap:  # more than its room: its size, and too large (or not the size expected)
                total = total if total >= 0 else self.size(path)
                kind = "too_large" if expect is None else "length"
                return 0, total, (kind, 0, f"{total - start} bytes from {start}, room for {cap}")
            total = start + n if n < ask else total  # a short answer ends the file
            if expect is not None and n != expect:
                return 0, total, ("length", 0, f"{n} bytes, not the {expect} expected")
            return n, total, None
        except Exception as exc:  # handed back as the core hands back its failures
            return landed[0], total, (exc, 0, "")

    def _read(self, path: str, offset: int, length: int, view: memoryview, landed: list[int]) -> int:
        """OPEN ``length`` bytes at ``offset`` (through the datanode) into ``view`` with http.client's ``readinto``
        (in place): returns the bytes the answer holds (more than ``len(view)``: none is read); ``landed[0]``
        counts the bytes landed so far. A broken body is a :class:`TransientError`."""
        what = f"OPEN {self.display(path)} offset={offset} length={length}"
        resp = self.request("GET", path, "OPEN", offset=offset, length=length)
        if resp.status == 307:
            resp = self.send("GET", self.redirect(resp, what), self.headers)
        done = False
        try:
            raise_hdfs(resp, what)
            raw = resp.headers.get("Content-Length")
            declared = int(raw) if raw is not None and raw.isdigit() else None
            encoding = (resp.headers.get("Content-Encoding") or "identity").strip().lower()
            if resp.status != 200 or encoding not in ("identity", "") or (declared or 0) > length:
                raise RangeMismatchError(f"{what}: status {resp.status}, Content-Encoding {encoding!r}, Content-Length "
                                         f"{raw} for a {length}-byte request (identity asked)")
            if declared is not None and declared > len(view):
                return declared
            body = view[: declared if declared is not None else len(view)]
            fp = getattr(resp, "_fp", None)  # http.client's response: no urllib3 layer in the loop
            fp = fp if isinstance(fp, http.client.HTTPResponse) else resp
            try:
                while landed[0] < len(body) and (k := fp.readinto(body[landed[0] :])):
                    landed[0] += k
            except (http.client.IncompleteRead, OSError) as exc:
                raise TransientError(f"{what}: body read failed after {landed[0]} bytes: {type(exc).__name__}") from None
            n = landed[0]
            if declared is not None and n < declared:
                raise TransientError(f"{what}: body ended after {n} of {declared} bytes")
            if declared is None and n == len(view) and resp.read(1, decode_content=False):
                return n + 1  # an answer of unknown length longer than the room
            done = True
            return n
        finally:
            if done:
                resp.release_conn()
            else:
                drop(resp)  # a connection left half-read is never reused


def raise_hdfs(resp: Any, what: str) -> None:
    """Map an error answer (status >= 400) to gdsstore's exceptions: by Hadoop's exception (``RemoteException``
    JSON) where the body names one, else by its status (:func:`~gdsstore.engine.remote.retry.status_error`)."""
    status = int(resp.status)
    if status < 400:
        return
    try:
        name = str(json.loads(resp.read(65536, decode_content=False)).get("RemoteException", {}).get("exception", ""))
    except Exception:
        name = ""
    drop(resp)
    label = f"{what}: HTTP {status}" + (f" ({name})" if name else "")
    if name in _EXCEPTIONS:
        raise _EXCEPTIONS[name](label)
    raise status_error(status, label, retry_after=retry_after(resp.headers))


class WebHDFSSource(core.CoreSource):
    """One HDFS file: GETFILESTATUS for the size, OPEN with offset/length through the datanode."""

    def __init__(self, client: WebHDFSClient, path: str) -> None:
        super().__init__(client.root, path, client.display(path), route="webhdfs", scheme=client.scheme)
        self._client = client

    def stat(self) -> int:
        return self._client.size(self.path)

    def version(self) -> Hashable:
        """``(fileId, length, modificationTime)`` now: HDFS has no ETag, and OPEN no If-Match."""
        st = self._client.status(self.path)
        return st.get("fileId"), st.get("length"), st.get("modificationTime")


class WebHDFSBackend(WaveReads):
    """Files under ``webhdfs://host:port/path``; keys are paths relative to it."""

    route = "webhdfs"

    def __init__(self, root: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self._client = WebHDFSClient(root, dict(storage_options or {}))
        path = urlsplit(root).path.strip("/")
        self._root = "/" + path if path else ""
        self.core = self._client.root

    @property
    def url(self) -> str:
        return self._client.display(self._root or "/")

    def core_path(self, key: str, where: str) -> str:
        """The HDFS path of ``key`` (percent-encoded whole by :meth:`WebHDFSClient.request`)."""
        check_remote_key(key, where)
        return self._dir(key.rstrip("/"))

    def plain_object_paths(self, keys: Sequence[str]) -> list[str]:
        # docstring inherited
        return [self._dir(key.rstrip("/")) for key in keys]

    def _dir(self, rel: str) -> str:
        return f"{self._root}/{rel}" if rel else (self._root or "/")

    def source(self, key: str, where: str) -> WebHDFSSource:
        """The source of ``key`` (one file)."""
        return WebHDFSSource(self._client, self.core_path(key, where))

    def open(self, key: str, mode: str = "rb") -> Any:
        from gdsstore.engine.remote.reader import RemoteFile
        from gdsstore.engine.remote.writer import RemoteWriteFile

        where = "WebHDFSBackend.open()"
        path = self.core_path(key, where)
        if check_remote_mode(mode, where) == "rb":
            return RemoteFile(self.source(key, where))
        return RemoteWriteFile(self._client.display(path), lambda data, dev: webhdfs_upload(self._client, path, data, device=dev))

    def info(self, key: str) -> ObjectInfo:
        st = self._client.status(self.core_path(key, "WebHDFSBackend.info()"))
        mtime, is_dir = st.get("modificationTime"), st.get("type") == "DIRECTORY"
        return ObjectInfo(key, 0 if is_dir else int(st.get("length", 0)), "directory" if is_dir else "file",
                          mtime / 1000 if mtime else None)

    def put(self, key: str, buf: Any, *, exclusive: bool = False) -> None:
        webhdfs_upload(self._client, self.core_path(key, "WebHDFSBackend.put()"), buf, overwrite=not exclusive)

    def delete(self, key: str) -> None:
        self._client.json("DELETE", self.core_path(key, "WebHDFSBackend.delete()"), "DELETE", recursive="false")

    def delete_prefix(self, prefix: str) -> None:
        path = self.core_path(prefix, "WebHDFSBackend.delete_prefix()")
        if (prefix.endswith("/") or self._is_dir(path)) and path != (self._root or "/"):
            self._client.json("DELETE", path, "DELETE", recursive="true")
            return
        super().delete_prefix(prefix)

    def mkdir(self, key: str) -> None:
        self._client.json("PUT", self.core_path(key, "WebHDFSBackend.mkdir()"), "MKDIRS")

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
        stack = [posixpath.dirname(prefix) if not prefix.endswith("/") else prefix.rstrip("/")]
        while stack:
            rel = stack.pop()
            for st in self._children(self._dir(rel)):
                child = f"{rel}/{st['pathSuffix']}" if rel else st["pathSuffix"]
                if st.get("type") == "DIRECTORY":
                    if child.startswith(prefix) or prefix.startswith(child + "/"):
                        stack.append(child)
                elif child.startswith(prefix):
                    yield child

    def list_dir(self, prefix: str = "") -> Iterator[str]:
        if prefix:
            check_key(prefix, "WebHDFSBackend.list_dir()")
        for st in self._children(self._dir(prefix.rstrip("/"))):
            yield st["pathSuffix"]


def webhdfs_upload(client: WebHDFSClient, path: str, buf: Any, *, overwrite: bool = True,
                   device: int | None = None) -> None:
    """Write ``buf`` (host or device) to ``path``: CREATE on the namenode, the data to the datanode it names.
    ``device``: the CUDA device the bytes came from when ``buf`` is already a host copy (for the trace)."""
    b = as_io_buffer(buf, writable=False, where="WebHDFS.put()")
    data = bytes(host_bytes(b))
    device = b.device if device is None else device
    d = policy.decide_remote(scheme=client.scheme, device=device is not None, op="write", nbytes=len(data))
    what = f"CREATE {client.display(path)}"
    t0 = time.perf_counter()

    def attempt() -> None:
        resp = client.request("PUT", path, "CREATE", overwrite=str(overwrite).lower(), noredirect="true")
        put = client.send("PUT", client.redirect(resp, what), {**client.headers, "Content-Type": "application/octet-stream"}, data)
        try:
            if put.status not in (200, 201):
                raise_hdfs(put, what)
        finally:
            put.release_conn()

    RetryPolicy.from_settings().call(attempt, what)
    _trace.record("write", d.route, d.reason, len(data), time.perf_counter() - t0, client.display(path), device)
