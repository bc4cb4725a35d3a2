"""Packaging: the built wheel installs into a fresh venv without extras (``pip check`` clean, ``import
gdsstore`` works, its entry points resolve), and each CUDA extra resolves to exactly one CuPy, alone and
beside ``zarr[gpu]`` (``pip install --dry-run --report``). Needs the package index (PyPI or a mirror)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .conftest import REPO
from .test_zarr_entry_points import SELECT_BY_NAME

pytestmark = pytest.mark.slow


def _run(*cmd: str, cwd: str | None = None, timeout: float = 180, extra_env: dict[str, str] | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | (extra_env or {})
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    if proc.returncode != 0 and "Could not find a version" in proc.stderr + proc.stdout:
        pytest.skip(f"the package index is unreachable here: {proc.stderr[-300:]}")
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # built from a copy of what the wheel is made of (the Python sources and the core's crate), compiled in
    # the tree's cargo target directory, where the set-up already compiled the core's dependencies
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "gdsstore", src / "gdsstore", ignore=shutil.ignore_patterns("__pycache__", "_core.*.so"))
    shutil.copytree(REPO / "native", src / "native", ignore=shutil.ignore_patterns("target"))
    _run(sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(out), timeout=600,
         extra_env={"CARGO_TARGET_DIR": str(REPO / "native" / "target")})
    (whl,) = out.glob("gdsstore-*.whl")
    return whl


def test_wheel_installs_into_a_fresh_venv_without_extras(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", str(venv))  # this pip drives it (--python): faster
    py = str(venv / "bin" / "python")
    _run(sys.executable, "-m", "pip", "--python", py, "install", "-q", str(wheel))
    _run(sys.executable, "-m", "pip", "--python", py, "check")
    out = _run(py, "-c", "import gdsstore, sys; print(gdsstore.__file__); "
                         "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'botocore', 'xarray')))",
               cwd=str(tmp_path))
    assert str(venv) in out.splitlines()[0] and out.splitlines()[1] == "[]"
    # the installed entry points select gdsstore's codecs by name, without enable_gpu()
    got = json.loads(_run(py, "-W", "error", "-c", SELECT_BY_NAME.replace("sys.argv[1]", repr(str(tmp_path / "a.zarr"))),
                          cwd=str(tmp_path)).splitlines()[-1])
    assert got == {"codec": "gdsstore.gpu.codecs.ZstdCodec", "equal": True}


def test_required_dependencies_are_imported_and_bounded() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d.split(">")[0].split("<")[0].split("=")[0].strip() for d in deps}
    assert names == {"zarr", "fsspec", "numpy", "donfig", "urllib3", "tqdm"}
    assert "urllib3>=2,<3" in deps  # its http.client response is read: a major release may change it
    source = "\n".join(p.read_text() for p in (REPO / "gdsstore").rglob("*.py"))
    for name in names:
        assert f"import {name}" in source or f"from {name}" in source, f"{name} is required but never imported"


def _cupys(requirements: list[str]) -> list[str]:
    report = json.loads(_run(sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q",
                             "--report", "-", *requirements))
    return sorted(item["metadata"]["name"] for item in report["install"]
                  if item["metadata"]["name"].lower().startswith("cupy"))


def test_each_cuda_extra_resolves_to_one_cupy(wheel: Path) -> None:
    url = wheel.resolve().as_uri()
    cases = {
        "cuda12": [f"gdsstore[cuda12] @ {url}"],
        "cuda13": [f"gdsstore[cuda13] @ {url}"],
        "cuda12 + zarr[gpu]": [f"gdsstore[cuda12] @ {url}", "zarr[gpu]"],
        "gpu + zarr[gpu]": [f"gdsstore[gpu] @ {url}", "zarr[gpu]"],  # the command of issue 17
        "cuda13 + zarr[gpu]": [f"gdsstore[cuda13] @ {url}", "zarr[gpu]"],
    }
    with ThreadPoolExecutor(3) as pool:
        got = dict(zip(cases, pool.map(_cupys, cases.values())))
    assert got["cuda12"] == got["cuda12 + zarr[gpu]"] == got["gpu + zarr[gpu]"] == ["cupy-cuda12x"]
    assert got["cuda13"] == ["cupy-cuda13x"]
    # zarr's `gpu` extra pins cupy-cuda12x, so no gdsstore metadata can avoid a second CuPy beside
    # gdsstore[cuda13]: docs/install.md says to use plain `zarr` there. This fails when zarr changes that.
    assert got["cuda13 + zarr[gpu]"] == ["cupy-cuda12x", "cupy-cuda13x"]
