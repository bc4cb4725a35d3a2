"""Temporary credentials: when botocore refreshes them, the next read through the native core is signed with
the new ones. moto checks every signature against its IAM users' keys (after the first few calls, which set
those users up), so a request signed with a deleted key is refused."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from servers.net import free_port, stop_process, wait_port

import gdsstore

from .conftest import payload

#: moto's calls without a signature check: create the user, its policy, its first key, the bucket.
_SETUP_CALLS = 4
DATA = payload(300_000, seed=21)


@pytest.fixture(scope="module")
def iam_moto() -> Iterator[tuple[str, dict[str, Any]]]:
    """A moto server with a user allowed everything and one access key of it (botocore client options with
    it); signatures checked after setup."""
    import botocore.session

    port = free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(_SETUP_CALLS)}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_port(port, timeout=30, proc=proc)
        sess = botocore.session.Session()
        kw: dict[str, Any] = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": "setup",
                              "aws_secret_access_key": "setup"}
        iam = sess.create_client("iam", **kw)
        iam.create_user(UserName="reader")
        iam.put_user_policy(UserName="reader", PolicyName="all", PolicyDocument=(
            '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}'))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        sess.create_client("s3", **kw).create_bucket(Bucket="refresh")
        yield url, {**kw, "aws_access_key_id": key["AccessKeyId"], "aws_secret_access_key": key["SecretAccessKey"]}
    finally:
        stop_process(proc)


def _refreshing_session(current: dict[str, str]) -> Any:
    """A botocore session whose credentials are refreshed on every use (they expire within botocore's
    advisory window) to whatever ``current`` holds then, as an assumed role's are near their end."""
    import botocore.session
    from botocore.credentials import RefreshableCredentials

    def fetch() -> dict[str, str]:
        end = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=12)
        return {"access_key": current["key"], "secret_key": current["secret"], "token": "",
                "expiry_time": end.isoformat()}

    sess = botocore.session.Session()
    sess._credentials = RefreshableCredentials.create_from_metadata(fetch(), fetch, "test")
    return sess


def _new_key(iam: Any) -> dict[str, str]:
    k = iam.create_access_key(UserName="reader")["AccessKey"]
    return {"key": k["AccessKeyId"], "secret": k["SecretAccessKey"]}


def test_core_reads_sign_with_refreshed_credentials(iam_moto: tuple[str, dict[str, Any]]) -> None:
    import botocore.exceptions
    import botocore.session

    route = "core"
    url, admin = iam_moto
    kw: dict[str, Any] = {"endpoint_url": url, "region_name": "us-east-1"}
    iam = botocore.session.Session().create_client("iam", **admin)
    botocore.session.Session().create_client("s3", **admin).put_object(Bucket="refresh", Key=f"{route}.bin", Body=DATA)
    first = _new_key(iam)
    current = dict(first)
    opts = {"session": _refreshing_session(current), **kw}
    cfg = {"task_size": 64 << 10}
    with gdsstore.config.set(cfg), gdsstore.trace() as t:
        for _ in range(2):  # the first key, then (it deleted) a second: each read signs with the key of its time
            with gdsstore.open(f"s3://refresh/{route}.bin", **opts) as f:
                buf = np.zeros(f.size, "u1")
                assert f.read(buf) == len(DATA)
            assert buf.tobytes() == DATA
            if current["key"] == first["key"]:
                iam.delete_access_key(UserName="reader", AccessKeyId=first["key"])
                current.update(_new_key(iam))
    iam.delete_access_key(UserName="reader", AccessKeyId=current["key"])
    reasons = [r for op, _, r in t.by_reason() if op == "read"]
    assert reasons and all(r.startswith("native core") for r in reasons), reasons
    # The deleted key is refused: the second read did not pass by being unchecked.
    bad = botocore.session.Session().create_client(
        "s3", aws_access_key_id=first["key"], aws_secret_access_key=first["secret"], **kw)
    with pytest.raises(botocore.exceptions.ClientError, match=r"InvalidAccessKeyId|Forbidden|403|AccessDenied"):
        bad.get_object(Bucket="refresh", Key=f"{route}.bin")


def test_core_options_carry_the_refreshed_credentials() -> None:
    from gdsstore.engine.remote.s3 import S3Client

    current = {"key": "AKIAFIRSTKEY", "secret": "first-secret"}
    c = S3Client({"session": _refreshing_session(current), "endpoint_url": "http://127.0.0.1:9", "region_name": "us-east-1"})
    assert c.core_options("bucket")["aws_access_key_id"] == "AKIAFIRSTKEY"
    current.update(key="AKIASECONDKEY", secret="second-secret")
    o = c.core_options("bucket")  # credentials 12 minutes from their end: botocore refreshes them
    assert o["aws_access_key_id"] == "AKIASECONDKEY" and o["aws_secret_access_key"] == "second-secret"
