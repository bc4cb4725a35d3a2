"""``gdsstore.config.set`` refuses a bad value at once, naming the key, and leaves the config as it was.

Before, the value was kept and the first operation failed, naming an environment variable nobody set.
"""

from __future__ import annotations

import os

import pytest

import gdsstore
from gdsstore import policy
from gdsstore.errors import SettingError


@pytest.mark.parametrize(
    ("call", "key", "bad"),
    [
        (lambda: gdsstore.config.set({"num_threads": "many"}), "num_threads", "many"),
        (lambda: gdsstore.config.set({"remote.timeout": -1}), "remote.timeout", -1),
        (lambda: gdsstore.config.set({"remote": {"max_attempts": 0}}), "remote.max_attempts", 0),
        (lambda: gdsstore.config.set(remote__concurrency=0), "remote.concurrency", 0),
        (lambda: gdsstore.config.set(compat_mode="maybe"), "compat_mode", "maybe"),
    ],
)
def test_set_refuses_a_bad_value_naming_the_key(call, key: str, bad: object) -> None:  # type: ignore[no-untyped-def]
    before = policy.settings()
    with pytest.raises(SettingError) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(f"gdsstore.config.set(): setting {key!r} must be") and msg.endswith(repr(bad))
    assert "GDSSTORE_" not in msg  # no environment variable was involved
    assert policy.settings() == before  # nothing was applied
    assert gdsstore.config.get(key) != bad


def test_set_with_good_values_applies_and_undoes() -> None:
    default = gdsstore.config.get("remote.timeout")
    with gdsstore.config.set({"remote.timeout": 5, "num_threads": 3}):
        assert policy.settings().remote_timeout == 5.0 and policy.settings().num_threads == 3
    assert gdsstore.config.get("remote.timeout") == default


def test_a_bad_value_read_from_the_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(os.environ, "GDSSTORE_NUM_THREADS", "0")
    gdsstore.config.refresh()
    try:
        with pytest.raises(SettingError, match=r"'num_threads' \(environment variable GDSSTORE_NUM_THREADS\)"):
            policy.settings()
    finally:
        monkeypatch.delitem(os.environ, "GDSSTORE_NUM_THREADS")
        gdsstore.config.refresh()
    policy.settings()
