"""gdsstore on dask workers: settings and the GPU configuration on every worker, restarts included.

``client.run(gdsstore.enable_gpu)`` reaches only the workers alive at that moment. A worker plugin is
set up on every worker, those that join later and those restarted (``client.restart()``, a nanny
bringing a dead worker back) included::

    from distributed import Client
    from gdsstore.dask import GDSStorePlugin

    client = Client(cluster)
    client.register_plugin(GDSStorePlugin({"num_threads": 8}, gpu=True))

The open-on-client rule: a zarr array carries the codec pipeline chosen when it was *opened*. An array
opened on the client under zarr's defaults keeps zarr's pipeline on the workers, whatever the workers'
configuration. Open arrays with :func:`open_array` (gdsstore's pipeline and codecs, no GPU needed on the
client); the plugin's ``gpu=True`` then makes the workers read them into device buffers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gdsstore._optional import require

require("distributed", purpose="gdsstore.dask")
from distributed import WorkerPlugin  # noqa: E402

__all__ = ["GDSStorePlugin", "open_array"]


def _known_keys(table: Mapping[str, Any], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for key, value in table.items():
        keys.add(prefix + key)
        if isinstance(value, Mapping):
            keys |= _known_keys(value, prefix + key + ".")
    return keys


def _check_settings(settings: Mapping[str, Any]) -> None:
    """Fail on the client, naming the key, rather than on every worker."""
    import gdsstore
    from gdsstore import policy
    from gdsstore._config import DEFAULTS

    unknown = sorted(set(settings) - _known_keys(DEFAULTS))
    if unknown:
        raise ValueError(f"GDSStorePlugin(settings=...): unknown gdsstore settings {unknown}; "
                         f"known: {sorted(_known_keys(DEFAULTS))}")
    with gdsstore.config.set(dict(settings)):
        policy.settings()  # raises ValueError naming the first bad value


class GDSStorePlugin(WorkerPlugin):  # type: ignore[misc]
    """Apply gdsstore settings, and optionally zarr's GPU configuration, on every dask worker.

    ``setup`` runs on each worker when the plugin is registered, when a worker joins later and when a
    worker is restarted, so every worker that runs a task has the configuration. Registering it again with
    other settings replaces it: the new settings are applied on every worker.

    Args:
        settings: gdsstore settings (keys of :data:`gdsstore.config`, e.g. ``{"num_threads": 8,
            "remote.concurrency": 64}``); checked on the client when the plugin is made.
        gpu: switch zarr to gdsstore's pipeline and codecs on each worker (``gdsstore.enable_gpu``).
        buffers: with ``gpu``, also zarr's buffers on the GPU (``enable_gpu(buffers=True)``, the default);
            ``False`` keeps host buffers (the pipeline and codecs only: workers without a GPU).

    Raises:
        ValueError: an unknown setting, or a value gdsstore rejects (the message names it).

    Examples:
        >>> GDSStorePlugin({"num_threads": 4}, gpu=True, buffers=False).settings
        {'num_threads': 4}
    """

    name = "gdsstore"
    # Not idempotent: distributed then replaces a plugin registered again under the same name (and runs the
    # new one's setup on every worker) instead of keeping the first one, whatever its settings.
    idempotent = False

    def __init__(self, settings: Mapping[str, Any] | None = None, *, gpu: bool = False,
                 buffers: bool = True) -> None:
        self.settings = dict(settings or {})
        self.gpu = gpu
        self.buffers = buffers
        _check_settings(self.settings)

    def __repr__(self) -> str:
        return f"GDSStorePlugin({self.settings!r}, gpu={self.gpu}, buffers={self.buffers})"

    def setup(self, worker: Any) -> None:
        """Apply the settings and the GPU configuration in this worker's process (for its lifetime).

        Raises:
            gdsstore.errors.MissingOptionalDependencyError: ``gpu`` and ``buffers`` on a worker
                without CuPy; gdsstore.errors.GPUUnavailableError: without a CUDA device.
        """
        import gdsstore

        # Not a context manager: both configurations stay applied for the life of the worker process.
        gdsstore.config.set(self.settings)
        if self.gpu:
            gdsstore.enable_gpu(buffers=self.buffers)


def open_array(store: Any, *, storage_options: Mapping[str, Any] | None = None, mode: str = "r",
               **kwargs: Any) -> Any:
    """``zarr.open_array`` under gdsstore's codec pipeline and codecs, for use on a dask client.

    The array keeps the pipeline it was opened with when dask ships it to the workers, so it reads
    through gdsstore there; its buffers follow each worker's configuration (GPU buffers where
    :class:`GDSStorePlugin` ran with ``gpu=True``). The client needs no GPU.

    Args:
        store: a local path, a URL (``s3://``, ``http(s)://``, ``webhdfs://``) or a zarr store.
        storage_options: options of :class:`gdsstore.GDSStore` for a path or URL.
        mode: zarr's open mode.
        **kwargs: passed to ``zarr.open_array`` (``path``, ``zarr_format``, ...).

    Returns:
        The ``zarr.Array``; give it to ``dask.array.from_zarr`` (with ``meta=cupy.empty(())`` when the
        workers read into GPU buffers).
    """
    import os

    import zarr

    from gdsstore.gpu.enable import config_for, register

    if isinstance(store, str | os.PathLike):
        from gdsstore.adapters.zarr_store import GDSStore

        store = GDSStore(os.fspath(store), read_only=mode == "r", storage_options=dict(storage_options or {}))
    register()
    with zarr.config.set(config_for(gpu=False)):
        return zarr.open_array(store, mode=mode, **kwargs)
