"""Registering ``gdsstore.dask.GDSStorePlugin`` again with other settings applies them on the workers.

(distributed skips a plugin registered again under its name when the plugin says it is idempotent.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

distributed = pytest.importorskip("distributed")

import gdsstore  # noqa: E402
from gdsstore.dask import GDSStorePlugin  # noqa: E402


def _threads() -> Any:
    import gdsstore

    return gdsstore.config.get("num_threads")


@pytest.fixture
def client() -> Iterator[Any]:
    # Workers in this process (fast to start); the plugin's settings apply to the process's config, which
    # the test puts back.
    saved = gdsstore.config.get("num_threads")
    try:
        with distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=1, dashboard_address=None,
                                      worker_dashboard_address=None) as cluster, distributed.Client(cluster) as c:
            yield c
    finally:
        gdsstore.config.set({"num_threads": saved})


def test_registering_again_with_other_settings_applies_them(client: Any) -> None:
    client.register_plugin(GDSStorePlugin({"num_threads": 3}))
    assert set(client.run(_threads).values()) == {3}
    client.register_plugin(GDSStorePlugin({"num_threads": 5}))
    assert set(client.run(_threads).values()) == {5}
    client.register_plugin(GDSStorePlugin({"num_threads": 5}))  # the same again: harmless
    assert set(client.run(_threads).values()) == {5}
