"""moto's S3 server in a subprocess on a free loopback port."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from typing import Any

from .net import free_port, stop_process, wait_port

__all__ = ["MotoServer", "bucket_state", "new_bucket"]

# Fake credentials: moto accepts any; tests assert these never leak into messages or the trace.
ACCESS_KEY = "AKIAGDSSTORETESTKEY0"
SECRET_KEY = "gdsstore/test+secret/key/DoNotLeak0123456789"


class MotoServer:
    """``python -m moto.server`` on ``127.0.0.1:<port>``; :meth:`close` stops it."""

    def __init__(self) -> None:
        self.port = free_port()
        env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )
        try:
            wait_port(self.port, timeout=30, proc=self._proc)
        except BaseException:
            self.close()
            raise
        self.endpoint_url = f"http://127.0.0.1:{self.port}"

    @property
    def storage_options(self) -> dict[str, str]:
        return {"endpoint_url": self.endpoint_url, "key": ACCESS_KEY, "secret": SECRET_KEY}

    def reset(self) -> None:
        """Drop every bucket (moto's reset API)."""
        req = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        urllib.request.urlopen(req, timeout=10).close()

    def close(self) -> None:
        stop_process(self._proc)


def new_bucket(server: MotoServer, prefix: str, objects: dict[str, bytes]) -> tuple[Any, str]:
    """A new bucket ``<prefix>-<random>`` on ``server`` holding ``objects``: a botocore client and its name
    (no reset: other tests of the session keep their buckets)."""
    import uuid

    import botocore.session

    client = botocore.session.Session().create_client(
        "s3", region_name="us-east-1", endpoint_url=server.endpoint_url,
        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
    )
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name)
    for key, body in objects.items():
        client.put_object(Bucket=name, Key=key, Body=body)
    return client, name


def bucket_state(client: Any, name: str, key: str) -> tuple[bytes, list[Any]]:
    """What a reader finds at ``key`` and the multipart uploads left open in the bucket (none after a
    finished or aborted upload)."""
    body = client.get_object(Bucket=name, Key=key)["Body"].read()
    return body, client.list_multipart_uploads(Bucket=name).get("Uploads", [])
