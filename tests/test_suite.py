"""The test command itself (scripts/test.sh): two pytest workers, the timed tests alone after them, and the
native core built where the tree has its build script (issue 26: 20 minutes of pytest on the 2-core machine)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from conftest import TIMED

ROOT = Path(__file__).resolve().parents[1]
TEST_SH = (ROOT / "scripts" / "test.sh").read_text()


def test_timed_tests_exist() -> None:
    for nodeid in TIMED:
        path, name = nodeid.split("::")
        assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), flags=re.M), f"{nodeid} is no test"


def test_the_test_command_runs_two_workers_then_the_timed_tests_alone() -> None:
    test_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(r.startswith("pytest-xdist") for r in test_extra)
    runs = re.findall(r"^\s*(?:exec )?pytest .*$", TEST_SH, flags=re.M)
    assert any("-n auto --dist loadfile" in r and '-m "not serial"' in r for r in runs), runs
    assert any("-m serial" in r and "-n" not in r for r in runs), runs


def test_the_native_core_compiles_beside_bootstrap_and_is_installed_before_ruff() -> None:
    compile_only = TEST_SH.index("bash scripts/build_core.sh --compile-only")
    bootstrap = TEST_SH.index("bash scripts/bootstrap.sh")
    waited = TEST_SH.index('wait "$core_pid"')
    install = re.search(r"^\s*bash scripts/build_core.sh$", TEST_SH, flags=re.M)
    ruff = TEST_SH.index("ruff check")
    assert install is not None
    assert compile_only < bootstrap < waited < install.start() < ruff
    assert re.search(r"build_core.sh --compile-only .*&$", TEST_SH, flags=re.M)  # in the background
    assert "[ -f scripts/build_core.sh ]" in TEST_SH  # only where the tree has it
