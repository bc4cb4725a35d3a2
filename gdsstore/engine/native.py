"""The one loader of the native core, ``gdsstore._core`` (Rust over ``object_store``, built into the wheel
from ``native/``): imported once per process, on first use.

The core is part of the package: ``pip install gdsstore`` (or ``pip install -e .`` in a clone) builds it.
Where it cannot be imported (a build without the extension, a broken install), :func:`load` returns None
and :func:`unavailable_reason` says why in a short phrase (the trace shows it; ``gdsstore doctor`` shows
the import error and the fix).

Examples:
    >>> from gdsstore.engine import native
    >>> native.load() is None or hasattr(native.load(), "read_table")
    True
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType

__all__ = ["MODULE", "load", "unavailable_reason"]

#: The extension's import name (``[tool.maturin] module-name`` in pyproject.toml).
MODULE = "gdsstore._core"

_lock = threading.Lock()
_module: ModuleType | None = None
_reason: str | None = None


def load() -> ModuleType | None:
    """The native core module, or None where it cannot be imported (the reason: :func:`unavailable_reason`)."""
    global _module, _reason
    if _module is not None or _reason is not None:
        return _module
    with _lock:
        if _module is None and _reason is None:
            try:
                mod = importlib.import_module(MODULE)
            except ImportError as exc:
                _reason = (f"{MODULE} not installed" if exc.name == MODULE
                           else f"{MODULE} failed to import ({type(exc).__name__})")
            else:
                _module = mod
    return _module


def unavailable_reason() -> str | None:
    """Why :func:`load` returns None (None when the core loads)."""
    load()
    return _reason
