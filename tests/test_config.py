"""gdsstore._config: one table of settings; bad values rejected when read, naming the variable; typos warned."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings
from dataclasses import fields
from pathlib import Path

import pytest

import gdsstore
from gdsstore import _config, policy
from gdsstore.errors import SettingError

PAGE = Path(__file__).resolve().parents[1] / "docs" / "settings.md"


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GDSSTORE_")}
    return subprocess.run(
        [sys.executable, "-W", "always", "-c", code], env={**clean, **env}, capture_output=True, text=True, timeout=120
    )


def test_docs_table_is_the_code_table() -> None:
    text = PAGE.read_text()
    block = text.split("<!-- settings-table:start", 1)[1].split("\n", 1)[1].split("<!-- settings-table:end -->")[0]
    assert block.strip() == _config.settings_table(), "docs/settings.md's table differs from gdsstore._config"


def test_defaults_settings_and_rows_come_from_one_table() -> None:
    keys = [row.key for row in _config.ROWS]
    assert [f.name for f in fields(_config.Settings)] == [k.replace(".", "_") for k in keys]
    flat = dict(_config._flat(_config.DEFAULTS))
    assert list(flat) == keys
    s = policy.settings()
    for row in _config.ROWS:
        assert gdsstore.config.get(row.key) == row.default
        assert getattr(s, row.key.replace(".", "_")) == row.check(row, row.default)
        assert row.doc and "TODO" not in row.doc


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("remote.timeout", math.inf),
        ("remote.timeout", "inf"),
        ("remote.connect_timeout", float("nan")),
        ("remote.backoff_base", "nan"),
        ("remote.backoff_max", -math.inf),
        ("remote.timeout", 1e300),
        ("cufile_probe_timeout", "1e9"),
        ("num_threads", 100000),
        ("cufile_stats_level", 4),
        ("remote.retry_status", "[500,"),
        ("remote.retry_status", {"a": 1}),
        ("remote.retry_status", [500, "x"]),
        ("remote.retry_status", [99]),
        ("remote.retry_status", [True]),
    ],
)
def test_non_finite_out_of_range_and_malformed_values_are_rejected(key: str, bad: object) -> None:
    with pytest.raises(SettingError) as info, gdsstore.config.set({key: bad}):  # refused by set itself
        policy.settings()
    msg = str(info.value)
    assert repr(key) in msg and repr(bad) in msg
    assert isinstance(info.value, ValueError)


def test_retry_status_written_as_text() -> None:
    row = next(r for r in _config.ROWS if r.key == "remote.retry_status")
    assert row.check(row, "500, 503") == (500, 503)
    assert row.check(row, "[500, 503]") == (500, 503)
    with pytest.raises(SettingError, match=r"such as \[500, 503\] or 500,503, got '\[500,'"):
        row.check(row, "[500,")


@pytest.mark.parametrize(
    ("env", "value"),
    [
        ("GDSSTORE_REMOTE__TIMEOUT", "inf"),
        ("GDSSTORE_REMOTE__CONNECT_TIMEOUT", "inf"),
        ("GDSSTORE_REMOTE__BACKOFF_BASE", "nan"),
        ("GDSSTORE_REMOTE__BACKOFF_MAX", "nan"),
        ("GDSSTORE_REMOTE__RETRY_STATUS", "{'a': 1}"),
        ("GDSSTORE_REMOTE__RETRY_STATUS", "[500,"),
        ("GDSSTORE_NUM_THREADS", "{1, 2}"),
    ],
)
def test_a_bad_environment_variable_never_breaks_the_import_and_is_named_when_read(env: str, value: str) -> None:
    code = "import gdsstore\nfrom gdsstore import policy\ntry:\n    policy.settings()\nexcept ValueError as e:\n    print(e)"
    out = _run(code, **{env: value})
    assert out.returncode == 0, out.stderr  # import gdsstore never fails because of one setting
    assert env in out.stdout and value in out.stdout


def test_a_misspelled_environment_variable_is_warned_about_once_naming_the_closest() -> None:
    code = "import gdsstore\ngdsstore.config.refresh()\ngdsstore.config.refresh()"
    out = _run(code, GDSSTORE_NUM_THREAD="4", GDSSTORE_REMOTE__TIMOUT="3")
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("'GDSSTORE_NUM_THREAD'") == 1
    assert "did you mean GDSSTORE_NUM_THREADS?" in out.stderr
    assert "did you mean GDSSTORE_REMOTE__TIMEOUT?" in out.stderr


def test_a_misspelled_config_key_is_warned_about_once_naming_the_closest() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(2):
            with gdsstore.config.set({"remote.max_attempt": 3}):
                policy.settings()
            policy.settings()
    msgs = [str(w.message) for w in seen if "remote.max_attempt'" in str(w.message)]
    assert msgs == ["gdsstore: unknown config key 'remote.max_attempt' ignored; did you mean remote.max_attempts?"]


def test_settings_env_vars_still_parse_as_literals() -> None:
    out = _run(
        "from gdsstore import policy; s = policy.settings(); print(s.remote_retry_status, s.num_threads, s.fsync)",
        GDSSTORE_REMOTE__RETRY_STATUS="[500, 503]",
        GDSSTORE_NUM_THREADS="3",
        GDSSTORE_FSYNC="true",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["(500,", "503)", "3", "True"]
    assert "unknown" not in out.stderr


def test_thread_defaults_follow_the_cpu_affinity() -> None:
    """dask-cuda pins each worker to some cores: the defaults count those, not os.cpu_count()."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no sched_setaffinity on this platform")
    code = (
        "import os; os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
        "from gdsstore import policy; s = policy.settings(); print(s.num_threads, s.remote_concurrency)"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1"]
