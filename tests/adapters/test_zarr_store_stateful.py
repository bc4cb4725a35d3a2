"""zarr's ``ZarrStoreStateMachine`` (``zarr.testing.stateful``) over ``GDSStore``: random sequences of
set/get/get_partial_values/delete/clear/exists/is_empty/getsize_prefix checked against a dict model,
on a local root and on S3 (a moto server on loopback), as zarr-python's
``tests/test_store/test_stateful.py`` runs it over its own stores."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test
from zarr.testing.stateful import MAX_BINARY_SIZE, ZarrStoreStateMachine
from zarr.testing.strategies import keys as zarr_keys

from gdsstore import GDSStore


class LocalStoreMachine(ZarrStoreStateMachine):  # type: ignore[misc]
    """The shared machine, minus what no file system can hold: a key that is also a "directory"
    of other keys ("a" and "a/b"). zarr skips its LocalStore here for that reason; we only skip
    those key pairs."""

    @rule(key=zarr_keys(), data=st.binary(min_size=0, max_size=MAX_BINARY_SIZE))
    def set(self, key: str, data: bytes) -> None:
        assume(not any(k.startswith(key + "/") or key.startswith(k + "/") for k in self.model))
        super().set(key, data)


_SETTINGS = settings(
    max_examples=40, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def test_state_machine_local(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    run_state_machine_as_test(lambda: LocalStoreMachine(GDSStore(root)), settings=_SETTINGS)


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[dict[str, str]]:
    pytest.importorskip("moto.server")
    from servers.moto_s3 import MotoServer

    srv = MotoServer()
    try:
        yield srv.storage_options
    finally:
        srv.close()


def test_state_machine_s3(moto_endpoint: dict[str, str]) -> None:
    import botocore.session

    bucket = f"stateful-{uuid.uuid4().hex[:8]}"
    botocore.session.get_session().create_client(
        "s3", region_name="us-east-1", endpoint_url=moto_endpoint["endpoint_url"],
        aws_access_key_id=moto_endpoint["key"], aws_secret_access_key=moto_endpoint["secret"],
    ).create_bucket(Bucket=bucket)
    store = GDSStore(f"s3://{bucket}/store", storage_options=moto_endpoint)
    # Object stores hold "a" and "a/b" side by side: the machine runs unchanged.
    run_state_machine_as_test(
        lambda: ZarrStoreStateMachine(store),
        settings=settings(max_examples=10, stateful_step_count=15, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow]),
    )
