"""A WebHDFS namenode + datanode pair that stores files in a directory.

It speaks the parts of Hadoop's REST API that gdsstore uses, with Hadoop's JSON shapes:
GETFILESTATUS, LISTSTATUS, MKDIRS, DELETE, OPEN (307 to the datanode, which serves
``offset``/``length``) and CREATE (307, or ``200 {"Location": ...}`` with ``noredirect=true``; the data
goes to the datanode). With ``user`` set, every request must carry ``user.name=<user>`` or
``delegation=<token>``; errors are ``RemoteException`` JSON bodies.

Faults (:meth:`WebHDFSServer.fail`): the next ``count`` requests of one operation at the namenode or the
datanode misbehave:

- ``503``: ``503`` with a ``RetriableException`` body (a busy or failing-over node);
- ``reset``: the datanode sends the headers and half the body, then resets the connection (RST);
- ``short``: the datanode declares the whole ``Content-Length``, sends half of it and closes cleanly.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

__all__ = ["WebHDFSServer"]

_PREFIX = "/webhdfs/v1"


def _status(path: str, suffix: str) -> dict[str, Any]:
    st = os.stat(path)
    is_dir = os.path.isdir(path)
    return {
        "accessTime": int(st.st_atime * 1000),
        "blockSize": 134217728,
        "childrenNum": len(os.listdir(path)) if is_dir else 0,
        "fileId": st.st_ino,
        "group": "supergroup",
        "length": 0 if is_dir else st.st_size,
        "modificationTime": int(st.st_mtime * 1000),
        "owner": "hdfs",
        "pathSuffix": suffix,
        "permission": "755" if is_dir else "644",
        "replication": 0 if is_dir else 1,
        "storagePolicy": 0,
        "type": "DIRECTORY" if is_dir else "FILE",
    }


class _Base(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    srv: WebHDFSServer
    node = "namenode"
    data: bytes = b""
    fault: str | None = None

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, doc: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, exception: str, message: str) -> None:
        self._json(status, {"RemoteException": {"exception": exception, "javaClassName": f"org.apache.{exception}",
                                                "message": message}})

    def _setup(self) -> tuple[str, str, dict[str, str]] | None:
        """Parse, log and authenticate; returns (op, hdfs path, params) or None after an error reply."""
        parts = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self.srv.log.append((self.command, self.server.server_address[1], self.path))
        if not parts.path.startswith(_PREFIX):
            self._error(404, "IllegalArgumentException", f"not a WebHDFS path: {parts.path}")
            return None
        hpath = "/" + unquote(parts.path[len(_PREFIX):]).strip("/")
        if self.srv.user is not None:
            token = q.get("delegation")
            if token is not None:
                if token != self.srv.token:
                    self._error(403, "SecurityException", "Failed to obtain user group information: invalid token")
                    return None
            elif q.get("user.name") != self.srv.user:
                self._error(401, "SecurityException", "Failed to obtain user group information")
                return None
        return q.get("op", "").upper(), hpath, q

    def _local(self, hpath: str) -> str:
        full = os.path.normpath(os.path.join(self.srv.root, hpath.lstrip("/")))
        if not (full == self.srv.root or full.startswith(self.srv.root + os.sep)):
            raise PermissionError(hpath)
        return full

    def _route(self, table: dict[str, Callable[[str, dict[str, str]], None]]) -> None:
        """Authenticate, read the body, and run the handler of the request's ``op``."""
        got = self._setup()
        if got is None:
            return
        op, hpath, q = got
        n = int(self.headers.get("Content-Length") or 0)
        self.data = self.rfile.read(n) if n else b""  # drained even where unused: keep-alive stays sane
        fn = table.get(op)
        if fn is None:
            self._error(400, "IllegalArgumentException", f'Invalid value for webhdfs parameter "op": {op}')
            return
        self.fault = self.srv.take_fault(self.node, op)
        if self.fault == "503":
            self._error(503, "RetriableException", "the namenode is busy; retry")
            return
        fn(hpath, q)

    def _broken_body(self, data: bytes) -> None:
        """Half of ``data`` under its whole Content-Length, then a clean close (``short``) or a reset."""
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        if self.fault == "reset":  # SO_LINGER 0: close sends RST
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True


class _NameNode(_Base):
    def do_GET(self) -> None:
        self._route({"GETFILESTATUS": self._getfilestatus, "LISTSTATUS": self._liststatus, "OPEN": self._open})

    def do_PUT(self) -> None:
        self._route({"MKDIRS": self._mkdirs, "CREATE": self._create})

    def do_DELETE(self) -> None:
        self._route({"DELETE": self._delete})

    def _existing(self, hpath: str) -> str | None:
        local = self._local(hpath)
        if not os.path.exists(local):
            self._error(404, "FileNotFoundException", f"File does not exist: {hpath}")
            return None
        return local

    def _getfilestatus(self, hpath: str, q: dict[str, str]) -> None:
        local = self._existing(hpath)
        if local is not None:
            self._json(200, {"FileStatus": _status(local, "")})

    def _liststatus(self, hpath: str, q: dict[str, str]) -> None:
        local = self._existing(hpath)
        if local is None:
            return
        if os.path.isdir(local):
            items = [_status(os.path.join(local, n), n) for n in sorted(os.listdir(local)) if not n.startswith(".tmp-")]
        else:
            items = [_status(local, "")]
        self._json(200, {"FileStatuses": {"FileStatus": items}})

    def _open(self, hpath: str, q: dict[str, str]) -> None:
        local = self._existing(hpath)
        if local is None:
            return
        if os.path.isdir(local):
            self._error(404, "FileNotFoundException", f"Path is not a file: {hpath}")
            return
        self._redirect(hpath, q, "OPEN")

    def _mkdirs(self, hpath: str, q: dict[str, str]) -> None:
        local = self._local(hpath)
        if os.path.isfile(local):
            self._error(403, "FileAlreadyExistsException", f"Parent path is not a directory: {hpath}")
            return
        os.makedirs(local, exist_ok=True)
        self._json(200, {"boolean": True})

    def _create(self, hpath: str, q: dict[str, str]) -> None:
        if os.path.exists(self._local(hpath)) and q.get("overwrite", "false") != "true":
            self._error(403, "FileAlreadyExistsException", f"{hpath} for client already exists")
            return
        if q.get("noredirect") == "true":
            self._json(200, {"Location": self._datanode_url(hpath, q, "CREATE")})
        else:
            self._redirect(hpath, q, "CREATE")

    def _delete(self, hpath: str, q: dict[str, str]) -> None:
        local = self._local(hpath)
        if not os.path.exists(local) or local == self.srv.root:
            self._json(200, {"boolean": False})
            return
        if os.path.isdir(local):
            if os.listdir(local) and q.get("recursive") != "true":
                self._error(403, "PathIsNotEmptyDirectoryException", f"`{hpath} is non empty': Directory is not empty")
                return
            shutil.rmtree(local)
        else:
            os.remove(local)
        self._json(200, {"boolean": True})

    def _datanode_url(self, hpath: str, q: dict[str, str], op: str) -> str:
        params = {k: v for k, v in q.items() if k not in ("op", "noredirect")}
        params["op"] = op
        params["namenoderpcaddress"] = "localhost:8020"
        return f"http://127.0.0.1:{self.srv.datanode_port}{_PREFIX}{quote(hpath)}?{urlencode(params)}"

    def _redirect(self, hpath: str, q: dict[str, str], op: str) -> None:
        self.send_response(307)
        self.send_header("Location", self._datanode_url(hpath, q, op))
        self.send_header("Content-Length", "0")
        self.end_headers()


class _DataNode(_Base):
    node = "datanode"

    def do_GET(self) -> None:
        self._route({"OPEN": self._open})

    def do_PUT(self) -> None:
        self._route({"CREATE": self._create})

    def _open(self, hpath: str, q: dict[str, str]) -> None:
        local = self._local(hpath)
        if not os.path.isfile(local):
            self._error(404, "FileNotFoundException", f"File does not exist: {hpath}")
            return
        size = os.path.getsize(local)
        offset = int(q.get("offset", 0))
        length = int(q["length"]) if "length" in q else size - offset
        if offset > size:
            self._error(403, "IOException", f"Offset={offset} out of the range [0, {size})")
            return
        length = max(0, min(length, size - offset))
        with open(local, "rb") as f:
            f.seek(offset)
            data = f.read(length)
        if self.fault in ("reset", "short"):
            self._broken_body(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _create(self, hpath: str, q: dict[str, str]) -> None:
        local = self._local(hpath)
        if os.path.exists(local) and q.get("overwrite", "false") != "true":
            self._error(403, "FileAlreadyExistsException", f"{hpath} for client already exists")
            return
        os.makedirs(os.path.dirname(local), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(local), prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(self.data)
        os.replace(tmp, local)  # readers see the old or the new file, never a half-written one
        self.send_response(201)
        self.send_header("Location", f"hdfs://localhost:8020{quote(hpath)}")
        self.send_header("Content-Length", "0")
        self.end_headers()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up are not news


class WebHDFSServer:
    """Namenode and datanode on two loopback ports, files under ``root`` (a temp dir by default)."""

    def __init__(self, root: str | None = None, *, user: str | None = None, token: str | None = None) -> None:
        self._own = root is None
        self.root = os.path.realpath(root or tempfile.mkdtemp(prefix="webhdfs-"))
        self.user = user
        self.token = token
        self.log: list[tuple[str, int, str]] = []
        self._faults: dict[tuple[str, str], tuple[str, int]] = {}  # (node, op) -> (mode, requests left; -1: all)
        self._lock = threading.Lock()
        nn = type("NameNode", (_NameNode,), {"srv": self})
        dn = type("DataNode", (_DataNode,), {"srv": self})
        self._nn = _QuietServer(("127.0.0.1", 0), nn)
        self._dn = _QuietServer(("127.0.0.1", 0), dn)
        self._nn.daemon_threads = self._dn.daemon_threads = True
        self.port = int(self._nn.server_address[1])
        self.datanode_port = int(self._dn.server_address[1])
        self._threads = [
            threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
            for s in (self._nn, self._dn)
        ]
        for t in self._threads:
            t.start()
        self.started = time.time()

    def url(self, path: str = "/") -> str:
        return f"webhdfs://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def fail(self, node: str, op: str, mode: str, count: int = -1) -> None:
        """Make the next ``count`` requests of ``op`` (``"OPEN"``, ...) at ``node`` (``"namenode"`` or
        ``"datanode"``) misbehave as ``mode`` (see the module docstring); ``count`` -1: every one."""
        if node not in ("namenode", "datanode") or mode not in ("503", "reset", "short"):
            raise ValueError(f"WebHDFSServer.fail(): no fault {mode!r} at {node!r}")
        with self._lock:
            self._faults[(node, op.upper())] = (mode, count)

    def take_fault(self, node: str, op: str) -> str | None:
        """The fault of this request, if one is due (counts it)."""
        with self._lock:
            mode, left = self._faults.get((node, op), (None, 0))
            if mode is None or left == 0:
                return None
            self._faults[(node, op)] = (mode, left - 1 if left > 0 else left)
            return mode

    def reset_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def close(self) -> None:
        for s in (self._nn, self._dn):
            s.shutdown()
            s.server_close()
        for t in self._threads:
            t.join(5)
        if self._own:
            shutil.rmtree(self.root, ignore_errors=True)
