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
    access_log off;
    sendfile on;
    tcp_nopush on;
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

    def __init__(self, root: str, workers: int = 2) -> None:
        binary = nginx_binary()
        if binary is None:
            raise FileNotFoundError("nginx is not installed (apt-get install nginx-light)")
        self.root = root
        self.port = free_port()
        self._tmp = tempfile.mkdtemp(prefix="nginx-")
        # As root, workers would drop to "nobody", who cannot read a private temp dir.
        user = "user root;" if os.geteuid() == 0 else ""
        conf = os.path.join(self._tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(_CONF.format(user=user, workers=workers, tmp=self._tmp, port=self.port, root=root))
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
