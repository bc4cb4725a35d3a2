"""Adapters: the Zarr v3 store (:class:`GDSStore`) and the fsspec filesystem, over the engine.

Imported lazily: the fsspec filesystem must not pull in zarr, and the zarr store not fsspec.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gdsstore.adapters.zarr_store import GDSStore

__all__ = ["GDSStore"]

_LAZY = {"GDSStore": "gdsstore.adapters.zarr_store"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gdsstore.adapters' has no attribute {name!r}")
