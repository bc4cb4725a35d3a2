"""``gdsstore doctor`` says whether the native core (``gdsstore._core``, built into the wheel) is installed, its version and where,
and what that changes."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from gdsstore.doctor import doctor, format_report


def test_report_names_the_installed_core() -> None:
    spec = importlib.util.find_spec("gdsstore._core")
    if spec is None:
        pytest.skip("gdsstore._core is not built here (`pip install -e .` builds it)")
    core = doctor(probe=False)["native_core"]
    assert core["installed"] is True
    assert core["version"] == importlib.metadata.version("gdsstore")
    assert core["location"] == os.path.dirname(spec.origin or "")
    text = format_report(doctor(probe=False))
    assert f"native core: gdsstore._core {core['version']} at {core['location']}" in text
    assert "what it changes: every HTTP(S) and S3 request goes through it" in text


def _doctor_without_core(*args: str) -> subprocess.CompletedProcess[str]:
    # The child cannot import gdsstore._core (None in sys.modules makes the import fail), as where it is not built.
    code = ("import sys; sys.modules['gdsstore._core'] = None\n"
            f"from gdsstore.cli import main; sys.exit(main(['doctor', '--no-probe', *{list(args)!r}]))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_report_without_the_core_says_so_and_what_it_changes() -> None:
    out = _doctor_without_core()
    assert out.returncode == 0, out.stderr  # the doctor reports it, local I/O still works
    assert "native core: not installed (" in out.stdout and "pip install" in out.stdout
    assert "what it changes: HTTP(S) and S3 cannot be read or written" in out.stdout
    report = json.loads(_doctor_without_core("--json").stdout)
    assert report["native_core"]["installed"] is False and report["native_core"]["reason"]
