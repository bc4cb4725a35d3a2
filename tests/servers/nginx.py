"""nginx serving a directory, from a generated config (daemon off, pid and logs in a temp dir)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from .net import free_port, stop_process, wait_port

__all__ = ["NginxServer", "nginx_binary"]


def nginx_binary() -> str | None:
    """The nginx executable, or None (tests then skip, saying so)."""
    for cand in (shutil.which("nginx"), "/usr/sbin/nginx", "/usr/local/sbin/nginx"):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


_CONF = """\
{user}
worker_processes {workers};
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format requests '$request_method $uri $http_range $status';
    access_log {access_log};
    sendfile on;
    tcp_nopush {nopush};
    keepalive_requests 100000;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    types {{ application/octet-stream bin; }}
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        location / {{ }}
    }}
}}
"""


class NginxServer:
    """nginx serving ``root`` read-only on ``127.0.0.1:<port>``."""

    def __init__(self, root: str, workers: int = 2, *, tcp_nopush: bool = True, access_log: bool = False) -> None:
        """``tcp_nopush=False`` for benchmarks (on, each small ranged GET on loopback can stall ~40 ms);
        ``access_log``: every request is logged to :attr:`access_log` (method, URI, Range, status)."""
        binary = nginx_binary()
        if binary is None:
            raise FileNotFoundError("nginx is not installed (apt-get install nginx-light)")
        self.root = root
        self.port = free_port()
        self._tmp = tempfile.mkdtemp(prefix="nginx-")
        # As root, workers would drop to "nobody", who cannot read a private temp dir.
        user = "user root;" if os.geteuid() == 0 else ""
        conf = os.path.join(self._tmp, "nginx.conf")
        self.access_log = os.path.join(self._tmp, "access.log")
        log = f"{self.access_log} requests" if access_log else "off"
        with open(conf, "w") as f:
            f.write(_CONF.format(user=user, workers=workers, tmp=self._tmp, port=self.port, root=root,
                                 nopush="on" if tcp_nopush else "off", access_log=log))
        self._proc = subprocess.Popen(
            [binary, "-p", self._tmp, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            wait_port(self.port, timeout=15, proc=self._proc)
        except BaseException:
            self.close()
            raise

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def close(self) -> None:
        stop_process(self._proc)
        if self._proc.stderr:
            self._proc.stderr.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def requests(self) -> list[str]:
        """The logged requests so far (``"GET /a.bin bytes=0-99 206"``); needs ``access_log=True``."""
        if not os.path.exists(self.access_log):
            return []
        with open(self.access_log) as f:
            return [line.rstrip("\n") for line in f]
