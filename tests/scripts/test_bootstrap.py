"""``scripts/bootstrap.sh``: one install shared by ``scripts/demo.sh`` and ``scripts/test.sh``.

The real script runs on a copy of the repository's layout whose ``.venv/bin/python`` is this interpreter
except for ``-m pip`` and ``-m uv``, which only log their arguments: what is under test is the decision to
install and what, not the installers (and nothing is ever installed anywhere).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "scripts" / "bootstrap.sh").write_text((ROOT / "scripts" / "bootstrap.sh").read_text())
    (repo / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    # the core's crate (its sources are part of the stamp) and a build script that only says it ran
    (repo / "native" / "src").mkdir(parents=True)
    for name in ("Cargo.toml", "Cargo.lock", "src/lib.rs"):
        (repo / "native" / name).write_text((ROOT / "native" / name).read_text())
    (repo / "scripts" / "build_core.sh").write_text('echo "$*" >> "$(dirname "$0")/../build_core.log"\n')
    (repo / ".venv" / "bin").mkdir(parents=True)
    python = repo / ".venv" / "bin" / "python"  # a Python >= 3.12, so the script creates no venv
    python.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = -m ] && { [ "$2" = pip ] || [ "$2" = uv ]; }; then\n'
        '  tool=$2; shift 2; echo "$tool $*" >> "$(dirname "$0")/../../pip.log"\n'
        '  [ "$tool" = uv ] && exit "${FAKE_UV_STATUS:-${FAKE_PIP_STATUS:-0}}"; exit "${FAKE_PIP_STATUS:-0}"\n'
        "fi\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    return repo


def _installs(calls: list[str]) -> list[str]:
    """The editable installs in the installers' log, each as ``.[extras]``: pip's ``install -e .[extras]``, or
    uv's dependencies (``-r pyproject.toml --extra ...``) followed by the package (``--no-deps -e .``)."""
    out, deps = [], ""
    for c in calls:
        words = c.split()
        if "-r" in words:
            deps = ",".join(words[i + 1] for i, w in enumerate(words) if w == "--extra")
        elif "-e" in words:
            target = words[-1]
            out.append(target if target != "." or not deps else f".[{deps}]")
    return out


def _bootstrap(
    repo: Path, extras: str, status: int = 0, uv_status: int | None = None, command: tuple[str, ...] = (),
    exit_status: int | None = None,
) -> list[str]:
    """Run the script asking for ``extras`` (``command`` given after ``--``), the installers exiting with ``status``
    (uv: ``uv_status``); the editable installs it made (``uv`` or ``pip``). It exits with ``exit_status``
    (default ``status``)."""
    log = repo / "pip.log"
    log.unlink(missing_ok=True)
    env = {
        **os.environ,
        "GDSSTORE_EXTRAS": extras,
        "FAKE_PIP_STATUS": str(status),
        **({"FAKE_UV_STATUS": str(uv_status)} if uv_status is not None else {}),
    }
    out = subprocess.run(
        ["bash", str(repo / "scripts" / "bootstrap.sh"), *(["--", *command] if command else [])],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == (status if exit_status is None else exit_status), out.stderr
    return _installs(log.read_text().splitlines() if log.exists() else [])


def test_demo_and_tests_in_turn_install_once(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    assert _bootstrap(repo, "") == ["."]  # the demo on a fresh clone
    assert _bootstrap(repo, "") == []
    assert _bootstrap(repo, "test,docs,s3,cufile") == [".[cufile,docs,s3,test]"]  # then the tests
    for _ in range(2):  # alternating: nothing more to install
        assert _bootstrap(repo, "") == []
        assert _bootstrap(repo, "test,docs,s3,cufile") == []
    assert _bootstrap(repo, " s3, test ") == []  # a subset, spelled loosely
    assert _bootstrap(repo, "nvcomp") == [".[cufile,docs,nvcomp,s3,test]"]  # extras accumulate
    assert (repo / ".venv" / ".gdsstore-stamp").read_text().split()[2] == "cufile,docs,nvcomp,s3,test"


def test_uv_installs_and_pip_takes_over_where_it_cannot(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    assert _bootstrap(repo, "test") == [".[test]"]
    assert (repo / "pip.log").read_text().splitlines()[-1].startswith("uv pip install")
    assert _bootstrap(repo, "s3", uv_status=1) == [".[s3,test]"]  # uv failed (its dependencies), then pip
    assert (repo / "pip.log").read_text().splitlines()[-1].startswith("pip install")
    assert _bootstrap(repo, "s3") == []  # installed: the stamp says so


def test_changed_pyproject_reinstalls_everything_installed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    assert _bootstrap(repo, "test") == [".[test]"]
    with (repo / "pyproject.toml").open("a") as fh:
        fh.write("\n# a new dependency\n")
    assert _bootstrap(repo, "") == [".[test]"]
    assert _bootstrap(repo, "test") == []


def test_old_stamp_or_failed_install_counts_as_nothing(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    stamp = repo / ".venv" / ".gdsstore-stamp"
    stamp.write_text("extras=[test,docs,s3,cufile] 78a611ef3bc1\n")  # the format before v2
    assert _bootstrap(repo, "docs") == [".[docs]"]
    assert _bootstrap(repo, "s3", status=1) == []  # pip fails: the script stops (exit status 1)
    assert stamp.read_text().split()[2] == "docs"  # and the stamp still says only what was installed
    assert _bootstrap(repo, "s3") == [".[docs,s3]"]


def test_one_cuda_major_per_venv(tmp_path: Path) -> None:
    """Issue 26: the test command adds `cufile` to whatever was installed; it takes the major of the CUDA
    extras already there (the short names are CUDA 12's), and extras of both majors are refused."""
    repo = _repo(tmp_path)
    assert _bootstrap(repo, "cuda13") == [".[cuda13]"]
    assert _bootstrap(repo, "test,docs,s3,cufile") == [".[cuda13,cufile-cu13,docs,s3,test]"]
    assert _bootstrap(repo, "test,docs,s3,cufile") == []
    assert _bootstrap(repo, "gpu,nvcomp") == [".[cuda13,cufile-cu13,docs,nvcomp-cu13,s3,test]"]
    out = subprocess.run(
        ["bash", str(repo / "scripts" / "bootstrap.sh")],
        env={**os.environ, "GDSSTORE_EXTRAS": "cuda12"}, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 2 and "extras of two CUDA majors" in out.stderr, out
    other = _repo(tmp_path / "other")  # the short names alone: all CUDA 12's, as pyproject.toml has them
    assert _bootstrap(other, "gpu") == [".[gpu]"]
    assert _bootstrap(other, "test,docs,s3,cufile") == [".[cufile,docs,gpu,s3,test]"]
    assert _bootstrap(other, "cuda12") == [".[cuda12,cufile-cu12,docs,s3,test]"]


def test_changed_core_sources_reinstall(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    assert _bootstrap(repo, "test") == [".[test]"]
    assert _bootstrap(repo, "test") == []
    with (repo / "native" / "src" / "lib.rs").open("a") as fh:
        fh.write("\n// a change to the core\n")
    assert _bootstrap(repo, "test") == [".[test]"]  # an editable install builds the extension again
    assert (repo / "build_core.log").read_text().split() == ["--build-only", "--build-only"]


def test_a_command_runs_between_the_dependencies_and_the_package(tmp_path: Path) -> None:
    """``bootstrap.sh -- CMD`` (the test command's linters): CMD runs once the dependencies are installed, while the
    core compiles, and before the package is; alone where nothing is to install; its exit status is the script's."""
    repo = _repo(tmp_path)
    log = repo / "pip.log"
    ok, fails = (("sh", "-c", f'echo "command" >> {log}; exit {n}') for n in (0, 5))
    assert _bootstrap(repo, "test", command=ok) == [".[test]"]
    calls = log.read_text().splitlines()
    assert [c.split()[0] for c in calls[-3:]] == ["uv", "command", "uv"], calls
    assert "-r" in calls[-3].split() and "-e" in calls[-1].split()  # after the dependencies, before the package
    assert _bootstrap(repo, "test", command=ok) == []
    assert log.read_text().split() == ["command"]  # installed: the command alone
    assert _bootstrap(repo, "test", command=fails, exit_status=5) == []
    assert _bootstrap(repo, "s3", command=fails, exit_status=5) == [".[s3,test]"]  # a failed command: installed
    assert _bootstrap(repo, "s3") == []  # and the stamp says so


def test_the_package_builds_in_the_venv_beside_its_dependencies(tmp_path: Path) -> None:
    """uv installs pyproject.toml's build requirements with the dependencies, and the package without a build
    environment of its own: maturin then builds with .venv's Python, as the core's compile beside it did (in an
    environment of its own it compiled pyo3 and the crate again)."""
    repo = _repo(tmp_path)
    assert _bootstrap(repo, "test") == [".[test]"]
    deps, package = (c.split() for c in (repo / "pip.log").read_text().splitlines()[-2:])
    assert "-r" in deps and any(w.startswith("maturin>=") for w in deps), deps
    assert "--no-build-isolation" in package and package[-2:] == ["-e", "."], package
