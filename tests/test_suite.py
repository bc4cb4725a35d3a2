"""The test command itself (scripts/test.sh): the whole suite on two pytest workers (no timed pass: tests count
events), and the native core compiled while pip downloads, its cargo checks run beside ruff, mypy and pytest and
waited for at the end (``tests/scripts/test_test_command.py`` runs the script: a failed check fails it)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST_SH = (ROOT / "scripts" / "test.sh").read_text()


def test_the_test_command_runs_the_suite_on_a_worker_per_core_and_one_more_with_no_timed_pass() -> None:
    test_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(r.startswith("pytest-xdist") for r in test_extra)
    assert re.search(r"^workers=\$\(\( \$\(nproc\) \+ 1 \)\)$", TEST_SH, flags=re.M)
    runs = re.findall(r"^\s*(?:exec )?pytest .*$", TEST_SH, flags=re.M)
    assert runs and all('-n "$workers" --dist loadfile' in r for r in runs), runs
    assert "serial" not in "".join(runs)  # tests count events; timings live in benchmarks/


def test_the_native_core_compiles_while_pip_downloads_and_is_checked_beside_pytest() -> None:
    bootstrap_sh = (ROOT / "scripts" / "bootstrap.sh").read_text()
    assert re.search(r"^bash scripts/build_core.sh --build-only .*&$", bootstrap_sh, flags=re.M)  # in the background
    # fmt, clippy, unit tests, at the lowest priority: on the CPU pytest leaves idle
    checks = re.search(r"^nice -n 19 bash scripts/build_core.sh .*&$", TEST_SH, flags=re.M)
    assert checks is not None
    bootstrap = TEST_SH.index("bash scripts/bootstrap.sh")
    loads = TEST_SH.index("native.load() is not None")
    first_pytest = re.search(r"^\s*pytest ", TEST_SH, flags=re.M)
    assert first_pytest is not None
    waited = TEST_SH.index("\ncore_checks\n")  # after pytest: the checks' status is the command's too
    assert bootstrap < checks.start() < loads < first_pytest.start() < waited
    assert 'wait "$core_pid"' in TEST_SH
