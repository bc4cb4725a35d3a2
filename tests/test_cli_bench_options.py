"""``gdsstore bench s3://...`` can be given the endpoint and keys (``--endpoint-url``, ``--storage-option``),
and its error without credentials says how."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def _bench(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    # No AWS_* variables and an empty home (no ~/.aws): only what the command line gives reaches botocore.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(home), AWS_CONFIG_FILE=str(home / "none"), AWS_SHARED_CREDENTIALS_FILE=str(home / "none"),
               AWS_EC2_METADATA_DISABLED="true")
    return subprocess.run([sys.executable, "-m", "gdsstore.cli", "bench", *args], capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.fixture
def s3_object(moto: Any) -> str:
    import botocore.session

    s3 = botocore.session.get_session().create_client(
        "s3", endpoint_url=moto.endpoint_url, region_name="us-east-1",
        aws_access_key_id=moto.storage_options["key"], aws_secret_access_key=moto.storage_options["secret"])
    s3.create_bucket(Bucket="bench-options")
    s3.put_object(Bucket="bench-options", Key="x.bin", Body=os.urandom(1 << 20))
    return "s3://bench-options/x.bin"


def test_bench_s3_with_endpoint_and_keys(moto: Any, s3_object: str, tmp_path: Path) -> None:
    opts = moto.storage_options
    out = _bench(s3_object, "--repeat", "1", "--host", "--json", "--endpoint-url", moto.endpoint_url,
                 "--storage-option", f"key={opts['key']}", "-o", f"secret={opts['secret']}", home=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    ours = [r for r in rows if r["name"].startswith("gdsstore")]
    assert ours and all(r["nbytes"] == 1 << 20 for r in ours), rows


def test_bench_s3_without_keys_says_how_to_give_them(moto: Any, s3_object: str, tmp_path: Path) -> None:
    out = _bench(s3_object, "--repeat", "1", "--host", "--endpoint-url", moto.endpoint_url, home=tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    line = out.stderr.strip().splitlines()[-1]
    assert "gdsstore bench: error: cannot read the URL" in line
    assert "--storage-option key=" in line and "AWS_ACCESS_KEY_ID" in line


def test_storage_option_needs_key_equals_value(tmp_path: Path) -> None:
    out = _bench("s3://b/x", "--storage-option", "novalue", home=tmp_path)
    assert out.returncode == 2 and "expected KEY=VALUE" in out.stderr
    f = tmp_path / "f.bin"
    f.write_bytes(b"x" * 4096)
    out = _bench(str(f), "--endpoint-url", "http://127.0.0.1:1", home=tmp_path)
    assert out.returncode == 2 and "apply to URLs" in out.stderr
