"""Optional dependencies: one place that imports them and, when one is missing, names the extra that
brings it.

Every lazy import of an optional package (CuPy, botocore, nvCOMP, ``cuda.bindings``, xarray, distributed)
goes through :func:`require`, so a user without it reads the ``pip install`` that brings it (from a clone:
gdsstore is not on PyPI) rather than a bare ``ModuleNotFoundError``::

    >>> from gdsstore._optional import install_hint
    >>> install_hint("s3")
    "pip install '.[s3]' in a clone of gdsstore (not on PyPI; docs/install.md)"
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gdsstore.errors import MissingOptionalDependencyError

__all__ = ["EXTRAS", "MissingOptionalDependencyError", "install_hint", "require"]

#: The extra that brings each optional top-level module (a CUDA module names both CUDA extras).
EXTRAS: dict[str, str] = {
    "cupy": "cuda13",
    "cuda.bindings": "cuda13",
    "nvidia.nvcomp": "cuda13",
    "botocore": "s3",
    "xarray": "xarray",
    "distributed": "dask",
    "dask": "dask",
}

# The CUDA extras differ only in the CUDA major version they bring: the hint names both.
_CUDA_EXTRAS = ("cuda13", "cuda12")


def install_hint(extra: str) -> str:
    """The ``pip install`` command that brings an extra, run in a clone (gdsstore is not on PyPI).

    Args:
        extra: an extra of the gdsstore package (``"s3"``, ``"cuda13"``, ...).

    Returns:
        The command, quoted for a POSIX shell; for a CUDA extra, both CUDA majors.

    Examples:
        >>> install_hint("cuda13")
        "pip install '.[cuda13]' (CUDA 13 driver) or '.[cuda12]' (CUDA 12) in a clone of gdsstore (not on PyPI; docs/install.md)"
    """
    where = "in a clone of gdsstore (not on PyPI; docs/install.md)"
    if extra in _CUDA_EXTRAS:
        return f"pip install '.[cuda13]' (CUDA 13 driver) or '.[cuda12]' (CUDA 12) {where}"
    return f"pip install '.[{extra}]' {where}"


def require(module: str, *, extra: str | None = None, purpose: str = "") -> ModuleType:
    """Import an optional module, or raise an error naming the extra that brings it.

    Args:
        module: the dotted module name (``"botocore.session"``, ``"cupy"``).
        extra: the gdsstore extra that installs it; by default looked up in :data:`EXTRAS` by the
            module's top-level package (``cuda.bindings.cufile`` → ``cuda.bindings``).
        purpose: what needs it, for the message (``"s3:// URLs"``).

    Returns:
        The imported module.

    Raises:
        MissingOptionalDependencyError: the module (or one it needs) is not installed.

    Examples:
        >>> require("json").__name__
        'json'
        >>> require("no_such_module_xyz", extra="s3", purpose="s3:// URLs")
        Traceback (most recent call last):
        ...
        gdsstore.errors.MissingOptionalDependencyError: s3:// URLs: no_such_module_xyz is not installed; pip install '.[s3]' in a clone of gdsstore (not on PyPI; docs/install.md)
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if extra is None:
            extra = _extra_of(module)
        missing = exc.name or module
        raise MissingOptionalDependencyError(
            f"{purpose or module}: {missing} is not installed; {install_hint(extra)}", name=module
        ) from exc


def _extra_of(module: str) -> str:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        extra = EXTRAS.get(".".join(parts[:n]))
        if extra is not None:
            return extra
    raise ValueError(f"require({module!r}): no gdsstore extra brings {module!r}; pass extra=")
