"""Every install line the docs show gets one CUDA major, and every install hint works from a clone.

Issue 26: ``pip install ".[gpu,cufile]"`` was ``ResolutionImpossible`` (CUDA 13 cuda-bindings beside CUDA
12's), ``".[gpu,s3,nvcomp]"`` brought nvCOMP for CUDA 12 *and* 13, and hints said ``pip install
'gdsstore[s3]'`` although gdsstore is not on PyPI. The fast tests expand each line's extras from
pyproject.toml; the ``network`` one has pip resolve them (``pip install --dry-run --report``), as a user's
pip would, and reads the CUDA major of what it would install.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]


def doc_files() -> list[Path]:
    """The pages a user reads: the README, the docs and the notebooks' index (not the built site)."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "notebooks").glob("*.md"))]
    return [p for p in pages if "_build" not in p.parts]


# A gdsstore target of `pip install`: the clone (`.`), a built wheel, or `gdsstore[...] @ git+URL`.
_TARGET = re.compile(r"""(?:^|[\s"'])(\.|\S*gdsstore-\S*?\.whl|gdsstore)(?:\[([\w,-]*)\])?(\s*@\s*\S+)?(?=$|[\s"')])""")
_OTHER = re.compile(r"""(?:^|[\s"'])((?!gdsstore\b)[A-Za-z][\w.-]*\[[\w,-]+\])""")  # zarr[gpu]


def install_lines() -> list[tuple[str, str]]:
    """(``file:line``, the command after ``pip install``) for every install line of :func:`doc_files`."""
    out = []
    for page in doc_files():
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for tail in re.findall(r"pip install ([^`\n#]*)", line):
                if tail.strip():
                    out.append((f"{page.relative_to(REPO)}:{n}", tail.strip()))
    return out


def combinations() -> dict[str, tuple[frozenset[str], tuple[str, ...]]]:
    """Each documented install: ``where`` → (gdsstore's extras, other requirements on the line). A line
    naming gdsstore twice (``'.[cuda13]' ... or '.[cuda12]'``) offers two installs."""
    found: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {}
    for where, tail in install_lines():
        others = tuple(sorted(_OTHER.findall(tail)))
        for i, m in enumerate(_TARGET.finditer(tail)):
            extras = frozenset(e for e in (m.group(2) or "").split(",") if e)
            found[f"{where}#{i}: pip install {tail}"] = (extras, others)
    test_extras = re.search(r"GDSSTORE_EXTRAS:-([\w,-]+)", (REPO / "scripts" / "test.sh").read_text())
    assert test_extras, "scripts/test.sh names its default extras"
    found["scripts/test.sh (its default extras)"] = (frozenset(test_extras.group(1).split(",")), ())
    return found


def expand(extras: frozenset[str]) -> set[str]:
    """The requirements an install of gdsstore with ``extras`` brings, its own extras followed."""
    reqs: set[str] = set(PYPROJECT["project"]["dependencies"])
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        assert extra in EXTRAS, f"extra {extra!r} is documented but pyproject.toml has none"
        seen.add(extra)
        for req in EXTRAS[extra]:
            own = re.fullmatch(r"gdsstore\[([\w,-]+)\]", req)
            if own:
                todo += [e for e in own.group(1).split(",") if e not in seen]
            else:
                reqs.add(req.split(";")[0].strip())
    return reqs


def cuda_major(name: str, version: str = "") -> int | None:
    """The CUDA major of a package (by its name, or cuda-bindings by its version or lower bound); None
    for a package that is not CUDA's. NVIDIA's CUDA 13 wheels dropped the ``-cuNN`` suffix."""
    name = name.lower().replace("_", "-")
    if m := re.fullmatch(r"cupy-cuda(\d+)x", name):
        return int(m.group(1))
    if m := re.fullmatch(r"(?:nvidia|cuda)-[\w-]+-cu(\d+)", name):
        return int(m.group(1))
    if name == "cuda-bindings":
        m = re.search(r"(\d+)", version)
        return int(m.group(1)) if m else None
    if name in ("nvidia-cufile", "nvidia-nvcomp", "nvidia-libnvcomp"):
        return 13
    return None


def _split(req: str) -> tuple[str, str]:
    m = re.match(r"([A-Za-z0-9][\w.-]*)(\[[^\]]*\])?\s*(.*)", req)
    assert m, req
    return m.group(1), m.group(3)


def static_majors(extras: frozenset[str], others: tuple[str, ...]) -> set[int]:
    reqs = expand(extras)
    if "zarr[gpu]" in others:
        reqs.add("cupy-cuda12x")  # zarr's own gpu extra (the network test checks it)
    majors = {cuda_major(*_split(r)) for r in reqs}
    return {m for m in majors if m is not None}


def test_the_docs_show_the_lines_of_the_issue() -> None:
    extras = {e for e, _ in combinations().values()}
    for line in ({"gpu", "s3"}, {"gpu"}, {"cuda13"}, {"s3"}, set(), {"test", "docs", "s3", "cufile"}):
        assert frozenset(line) in extras, f"no documented `pip install` with extras {sorted(line)}"


@pytest.mark.parametrize("where", sorted(combinations()))
def test_each_documented_install_names_one_cuda_major(where: str) -> None:
    extras, others = combinations()[where]
    majors = static_majors(extras, others)
    assert len(majors) <= 1, f"{where}: brings CUDA {sorted(majors)} ({sorted(expand(extras))})"


def test_the_short_extras_share_a_major_with_zarr_gpu() -> None:
    # `gpu`, `cufile`, `nvcomp` combine with each other and with zarr's gpu extra (cupy-cuda12x).
    assert static_majors(frozenset({"gpu", "cufile", "nvcomp"}), ("zarr[gpu]",)) == {12}
    for major in (12, 13):
        assert static_majors(frozenset({f"cuda{major}", f"cufile-cu{major}", f"nvcomp-cu{major}"}), ()) == {major}


# -- install hints -----------------------------------------------------------------------------------

# Hints in files of other owners, quoted by the docs: reported in issue 26, to go when they change.
KNOWN_PYPI_HINTS = {
    "gdsstore/engine/cuda.py", "gdsstore/gpu/nvcomp.py", "gdsstore/gpu/enable.py",
    "gdsstore/adapters/fsspec/filesystem.py", "docs/gpu-pipeline.md",
}
# `pip install gdsstore[x]` or `'gdsstore[x]'` with no `@ git+URL`: pip would look for gdsstore on PyPI.
_PYPI_HINT = re.compile(r"""pip install ['"]?gdsstore\[[\w,-]*\](?!\s*@)""")


def test_install_hints_name_what_works_from_a_clone() -> None:
    from gdsstore._optional import install_hint

    for extra in ("s3", "xarray", "cuda13"):
        hint = install_hint(extra)
        assert "clone" in hint and "gdsstore[" not in hint, hint
    assert "'.[cuda13]'" in install_hint("cuda13") and "'.[cuda12]'" in install_hint("cuda13")
    files = [*doc_files(), *(REPO / "gdsstore").rglob("*.py")]
    offenders = {str(p.relative_to(REPO)) for p in files if _PYPI_HINT.search(p.read_text())}
    assert offenders <= KNOWN_PYPI_HINTS, sorted(offenders - KNOWN_PYPI_HINTS)


# -- pip's own resolution ----------------------------------------------------------------------------


def _index_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        return False
    return True


def _resolve(requirements: tuple[str, ...]) -> list[tuple[str, str]]:
    """What ``pip install`` of ``requirements`` would install into an empty environment (name, version)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q", "--report", "-"]
    out = subprocess.run([*cmd, *requirements], capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert out.returncode == 0, f"pip install {' '.join(requirements)}:\n{out.stderr[-3000:]}"
    return [(i["metadata"]["name"], i["metadata"]["version"]) for i in json.loads(out.stdout)["install"]]


@pytest.mark.network
def test_pip_resolves_each_documented_install_to_one_cuda_major() -> None:
    if not _index_reachable():
        pytest.skip("the package index (pypi.org) is unreachable here")
    # Only the CUDA-bearing requirements of each line (the rest resolve in .venv every run), each set once,
    # and the clone itself with every short extra, as the README's line installs it.
    sets: dict[tuple[str, ...], str] = {(".[gpu,cufile,nvcomp,s3]",): "the clone"}
    for where, (extras, others) in combinations().items():
        cuda = tuple(sorted({r for r in expand(extras) if cuda_major(*_split(r)) is not None} | set(others)))
        if any(cuda_major(*_split(r)) for r in cuda):
            sets.setdefault(cuda, where)
    with ThreadPoolExecutor(4) as pool:
        resolved = dict(zip(sets, pool.map(_resolve, sets)))
    for reqs, installs in resolved.items():
        majors = {m for m in (cuda_major(n, v) for n, v in installs) if m is not None}
        assert len(majors) == 1, f"{sets[reqs]}: pip installs CUDA {sorted(majors)}: {sorted(installs)}"


def test_the_core_is_built_into_the_package() -> None:
    """One package: maturin builds gdsstore with its native core as ``gdsstore._core`` (issue 36), the name
    the loader imports and the Rust module registers; the stub lies beside it, and no second wheel is made."""
    from gdsstore.engine import native

    assert PYPROJECT["build-system"]["build-backend"] == "maturin"
    maturin = PYPROJECT["tool"]["maturin"]
    assert maturin["module-name"] == native.MODULE == "gdsstore._core"
    assert (REPO / maturin["manifest-path"]).is_file() and not (REPO / "native" / "pyproject.toml").exists()
    assert '#[pyo3(name = "_core")]' in (REPO / "native" / "src" / "lib.rs").read_text()
    assert (REPO / "gdsstore" / "_core.pyi").is_file() and (REPO / "gdsstore" / "py.typed").is_file()
    mod = native.load()
    if mod is None:
        pytest.skip(f"the core is not built here: {native.unavailable_reason()}")
    assert Path(mod.__file__ or "").parent == REPO / "gdsstore" or "site-packages" in (mod.__file__ or "")
