"""This checkout's entry points for an environment that lacks them.

A checkout used without ``pip install`` (the GPU machine runs from PYTHONPATH), or a venv installed from an
older pyproject.toml, does not have gdsstore's entry points: xarray would not know ``engine="gdsstore"``
and zarr would not know the codec names. :func:`expose_missing_entry_points` writes the missing ones into a
``*.dist-info`` folder on ``sys.path`` and ``PYTHONPATH`` (subprocesses and notebook kernels see it too),
so the tests and docs run as they do where gdsstore is installed. Called from ``tests/conftest.py``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_exposed: str | None = None


def declared_entry_points() -> dict[str, dict[str, str]]:
    """The entry points pyproject.toml declares: group → name → ``module:attr``."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {group: dict(eps) for group, eps in project["entry-points"].items()}


def missing_entry_points() -> dict[str, dict[str, str]]:
    """The declared entry points the environment does not have (same name and value)."""
    installed = entry_points()
    missing: dict[str, dict[str, str]] = {}
    for group, eps in declared_entry_points().items():
        have = {(e.name, e.value) for e in installed.select(group=group)}
        left = {n: v for n, v in eps.items() if (n, v) not in have}
        if left:
            missing[group] = left
    return missing


def expose_missing_entry_points() -> str | None:
    """Put the missing entry points on ``sys.path`` and ``PYTHONPATH``; return the folder (None: none missing)."""
    global _exposed
    missing = missing_entry_points()
    if _exposed is not None or not missing:
        return _exposed
    root = tempfile.mkdtemp(prefix="gdsstore-entry-points-")
    info = Path(root, "gdsstore_checkout_entry_points-0.0.dist-info")
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gdsstore-checkout-entry-points\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in eps.items()) + "\n"
        for group, eps in missing.items()))
    sys.path.append(root)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), root) if p)
    _exposed = root
    return root


def remove_exposed_entry_points() -> None:
    """Undo :func:`expose_missing_entry_points` (end of the test session)."""
    global _exposed
    if _exposed is None:
        return
    if _exposed in sys.path:
        sys.path.remove(_exposed)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != _exposed]
    os.environ["PYTHONPATH"] = os.pathsep.join(parts)
    shutil.rmtree(_exposed, ignore_errors=True)
    _exposed = None
