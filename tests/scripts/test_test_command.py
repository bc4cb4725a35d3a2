"""``scripts/test.sh``, the test command: what the tools it starts find in their environment.

The real scripts (test.sh, and lint.sh, which the set-up runs) run on a copy of the repository's layout whose set-up,
core build and tools (ruff, mypy, lint-imports, pytest, python) only log what they found: what is under test is the command's sequence and
environment, not the tools (nothing is installed or built).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("ruff", "mypy", "lint-imports", "pytest", "python")


def _logging_tool(path: Path, log: Path) -> None:
    """An executable that appends its name and whether Python may write bytecode under it to ``log``."""
    path.write_text(f'#!/bin/sh\necho "$(basename "$0") ${{PYTHONDONTWRITEBYTECODE:-writes}}" >> "{log}"\n')
    path.chmod(0o755)


def _repo(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the layout test.sh runs in, and the directory of stand-ins for the system's tools."""
    repo, bin_dir, log = tmp_path / "repo", tmp_path / "bin", tmp_path / "tools.log"
    (repo / "scripts").mkdir(parents=True)
    for name in ("test.sh", "lint.sh"):
        (repo / "scripts" / name).write_text((ROOT / "scripts" / name).read_text())
    (repo / ".venv" / "bin").mkdir(parents=True)
    for name in ("bootstrap.sh", "build_core.sh"):
        _logging_tool(repo / "scripts" / name, log)
    with (repo / "scripts" / "bootstrap.sh").open("a") as fh:  # then the command it is given after --
        fh.write('[ "${1:-}" != -- ] || { shift; exec "$@"; }\n')
    for name in TOOLS:
        _logging_tool(repo / ".venv" / "bin" / name, log)
    bin_dir.mkdir()
    for name in ("nginx", "chromium", "chromedriver", "apt-get"):  # present: nothing is installed
        _logging_tool(bin_dir / name, log)
    return repo, bin_dir


def test_every_step_writes_bytecode_whatever_the_callers_environment(tmp_path: Path) -> None:
    repo, bin_dir = _repo(tmp_path)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(
        ["bash", str(repo / "scripts" / "test.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    ran = (tmp_path / "tools.log").read_text().splitlines()
    assert sorted(line.split()[0] for line in ran) == sorted(["bootstrap.sh", "build_core.sh", *TOOLS]), ran
    assert all(line.endswith(" writes") for line in ran), ran


def test_the_cores_checks_run_beside_pytest_and_a_failed_check_fails_the_command(tmp_path: Path) -> None:
    """pytest starts while the core's checks (``build_core.sh --checks-only``, in the background) finish, and a
    check that fails still fails the command, after pytest, with the checks' output shown."""
    repo, bin_dir = _repo(tmp_path)
    log = tmp_path / "tools.log"
    (repo / "scripts" / "build_core.sh").write_text(
        f'#!/bin/sh\n[ "$1" = --checks-only ] || exit 0\necho "clippy: an error"\necho "build_core.sh" >> "{log}"\nexit 3\n'
    )
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    out = subprocess.run(
        ["bash", str(repo / "scripts" / "test.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 3, out.stderr
    assert "pytest" in log.read_text().split()  # the suite ran although a check failed
    assert "clippy: an error" in out.stdout and "the native core's checks failed" in out.stderr
