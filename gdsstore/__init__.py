"""gdsstore: chunked array data between storage and GPU memory, with proof of the path it took.

Public API (a contract; see ``docs/``):

- :data:`config` — settings (donfig), env ``GDSSTORE_<KEY>``.
- :func:`open` — local paths and URLs, reads/writes into host or device buffers.
- :func:`trace` — which route each operation took, and why.
- :func:`doctor` — environment report (``gdsstore doctor``).
- :class:`GDSStore` — a Zarr v3 store; :func:`enable_pipeline` — zarr's reads and writes as batches
  through gdsstore's pipeline (host buffers); :func:`enable_gpu` — the same on GPU buffers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gdsstore._config import config
    from gdsstore._version import __version__
    from gdsstore.adapters.zarr_store import GDSStore, enable_pipeline
    from gdsstore.doctor import doctor
    from gdsstore.engine import open
    from gdsstore.errors import (
        ArchiveChangedError,
        ChunkDecodeError,
        CuFileRequiredError,
        GDSStoreError,
        GPUUnavailableError,
        MissingOptionalDependencyError,
        RangeMismatchError,
        RemoteIOError,
        SettingError,
    )
    from gdsstore.gpu.enable import enable_gpu
    from gdsstore.trace import Trace, trace

__all__ = [
    "ArchiveChangedError",
    "ChunkDecodeError",
    "CuFileRequiredError",
    "GDSStore",
    "GDSStoreError",
    "GPUUnavailableError",
    "MissingOptionalDependencyError",
    "RangeMismatchError",
    "RemoteIOError",
    "SettingError",
    "Trace",
    "__version__",
    "config",
    "doctor",
    "enable_gpu",
    "enable_pipeline",
    "open",
    "trace",
]

# Imported on first use, the exceptions and the version too. zarr imports this package for its
# codec-pipeline and codec entry points (gdsstore.gpu.*), in every environment where gdsstore is
# installed: the settings (donfig + yaml), the doctor, the engine and the GPU pieces load only when a
# name here is used.
# ``trace`` and ``doctor`` are modules made callable, so `gdsstore.trace()`/`gdsstore.doctor()` work
# whether the name or the submodule was imported first.
_LAZY = {
    "__version__": ("gdsstore._version", "__version__"),
    **{name: ("gdsstore.errors", name) for name in (
        "ArchiveChangedError", "ChunkDecodeError", "CuFileRequiredError", "GDSStoreError", "GPUUnavailableError", "MissingOptionalDependencyError",
        "RangeMismatchError", "RemoteIOError", "SettingError")},
    "config": ("gdsstore._config", "config"),
    "doctor": ("gdsstore.doctor", None),
    "open": ("gdsstore.engine", "open"),
    "trace": ("gdsstore.trace", None),
    "Trace": ("gdsstore.trace", "Trace"),
    "GDSStore": ("gdsstore.adapters.zarr_store", "GDSStore"),
    "enable_gpu": ("gdsstore.gpu.enable", "enable_gpu"),
    "enable_pipeline": ("gdsstore.adapters.zarr_store", "enable_pipeline"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = importlib.import_module(module)
        if attr is not None:
            value = getattr(value, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gdsstore' has no attribute {name!r}")
