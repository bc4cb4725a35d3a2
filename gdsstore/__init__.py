"""gdsstore: chunked array data between storage and GPU memory, with proof of the path it took.

Public API (a contract; see ``docs/``):

- :data:`config` — settings (donfig), env ``GDSSTORE_<KEY>``.
- :func:`open` — local paths and URLs, reads/writes into host or device buffers.
- :func:`trace` — which route each operation took, and why.
- :func:`doctor` — environment report (``gdsstore doctor``).
- :class:`GDSStore` — a Zarr v3 store; :func:`enable_gpu` — zarr on GPU buffers through gdsstore.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gdsstore._config import config
from gdsstore._version import __version__

# doctor is imported eagerly (it needs only the stdlib): a later `import gdsstore.doctor` must not
# replace the function with the module.
from gdsstore.doctor import doctor
from gdsstore.engine import open
from gdsstore.errors import (
    CuFileRequiredError,
    GDSStoreError,
    RangeMismatchError,
    RemoteIOError,
    SettingError,
)
from gdsstore.trace import Trace

if TYPE_CHECKING:
    from gdsstore.adapters.zarr_store import GDSStore
    from gdsstore.gpu.enable import enable_gpu
    from gdsstore.trace import trace
else:
    # gdsstore.trace is the module itself, made callable (see gdsstore/trace.py), so both
    # `gdsstore.trace()` and `gdsstore.trace.record(...)` work whatever the import order.
    from gdsstore import trace


__all__ = [
    "CuFileRequiredError",
    "GDSStore",
    "GDSStoreError",
    "RangeMismatchError",
    "RemoteIOError",
    "SettingError",
    "Trace",
    "__version__",
    "config",
    "doctor",
    "enable_gpu",
    "open",
    "trace",
]

# Imported on first use: zarr, the doctor and the GPU pieces are not needed by engine-only users.
_LAZY = {
    "GDSStore": ("gdsstore.adapters.zarr_store", "GDSStore"),
    "enable_gpu": ("gdsstore.gpu.enable", "enable_gpu"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gdsstore' has no attribute {name!r}")
