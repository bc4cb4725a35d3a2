"""Range splitting, the retry policy and redaction, without a server. (The native
core checks the HTTP(S) and S3 answers: tests/remote/test_range_checks.py and test_faults.py, at a server.)"""

from __future__ import annotations

import pytest

import gdsstore
from gdsstore.engine.remote.reader import (
    RangeNotSupportedError,
    RangeRequest,
    split_ranges,
)
from gdsstore.engine.remote.redact import redact_url, remember, remember_url, scrub_text
from gdsstore.engine.remote.retry import (
    STALE_RETRIES,
    RemoteIOError,
    RetryPolicy,
    TransientError,
    is_transient,
)
from gdsstore.errors import StaleConnectionError


def test_split_ranges_cover_exactly() -> None:
    rs = split_ranges(100, 1000, 300)
    assert [(r.offset, r.nbytes) for r in rs] == [(100, 300), (400, 300), (700, 300), (1000, 100)]
    assert split_ranges(5, 0, 10) == []
    with pytest.raises(ValueError, match="task_size"):
        split_ranges(0, 10, 0)


def test_range_header_is_inclusive() -> None:
    assert RangeRequest(10, 5).header == "bytes=10-14"


def test_retry_policy_retries_transient_then_gives_up() -> None:
    p = RetryPolicy(max_attempts=3, retry_status=(503,), backoff_base=0.0, backoff_max=0.0)
    calls: list[int] = []

    def always() -> None:
        calls.append(1)
        raise TransientError("503")

    with pytest.raises(RemoteIOError, match=r"failed after 3 attempt\(s\) \(remote.max_attempts=3\)"):
        p.call(always, "GET x")
    assert len(calls) == 3


def test_retry_policy_does_not_retry_permanent_errors() -> None:
    p = RetryPolicy(max_attempts=5, retry_status=(503,), backoff_base=0.0, backoff_max=0.0)
    calls: list[int] = []

    def missing() -> None:
        calls.append(1)
        raise FileNotFoundError("gone")

    with pytest.raises(FileNotFoundError):
        p.call(missing, "GET x")
    assert calls == [1]


def test_retry_policy_call_resends_a_request_lost_to_a_stale_connection() -> None:
    # One retry loop for waves and single calls (HEAD, LIST, WebHDFS): a kept-alive connection the server
    # closed costs no attempt, up to STALE_RETRIES in a row; then it counts as any transient failure.
    p = RetryPolicy(max_attempts=1, retry_status=(), backoff_base=0.0, backoff_max=0.0)
    calls: list[int] = []

    def stale_then_ok() -> str:
        calls.append(1)
        if len(calls) <= STALE_RETRIES:
            raise StaleConnectionError("connection closed before message completed")
        return "ok"

    assert p.call(stale_then_ok, "HEAD x") == "ok" and len(calls) == STALE_RETRIES + 1

    def always_stale() -> None:
        calls.append(1)
        raise StaleConnectionError("connection closed before message completed")

    calls.clear()
    with pytest.raises(RemoteIOError, match=r"failed after 1 attempt\(s\)"):
        p.call(always_stale, "HEAD x")
    assert len(calls) == STALE_RETRIES + 1


def test_backoff_is_exponential_capped_and_jittered() -> None:
    p = RetryPolicy(max_attempts=10, retry_status=(), backoff_base=0.1, backoff_max=0.5)
    for attempt, cap in ((1, 0.1), (2, 0.2), (3, 0.4), (4, 0.5), (9, 0.5)):
        draws = [p.delay(attempt) for _ in range(200)]
        assert all(0.0 <= d <= cap for d in draws)
        assert len(set(draws)) > 100  # jittered, not a fixed wait
    assert RetryPolicy(3, (), 0.0, 0.0).delay(2) == 0.0  # no backoff asked: no wait


def test_policy_from_settings_follows_config() -> None:
    with gdsstore.config.set({"remote.max_attempts": 7, "remote.retry_status": "500, 503"}):
        p = RetryPolicy.from_settings()
    assert p.max_attempts == 7 and p.retry_status == (500, 503)
    with pytest.raises(ValueError, match=r"remote\.max_attempts"), gdsstore.config.set({"remote.max_attempts": 0}):
        RetryPolicy.from_settings()


def test_transient_classification() -> None:
    assert is_transient(ConnectionResetError())
    assert is_transient(TimeoutError())
    assert is_transient(TransientError("x"))
    assert not is_transient(FileNotFoundError())
    assert not is_transient(PermissionError())
    assert not is_transient(RangeNotSupportedError("x"))


def test_redact_url_and_scrubber() -> None:
    url = "https://user:pw@h/b/k?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=deadbeef&op=OPEN&delegation=TOKEN123"
    red = redact_url(url)
    for secret in ("pw", "AKIA", "deadbeef", "TOKEN123"):
        assert secret not in red
    assert "op=OPEN" in red and red.startswith("https://h/b/k?")
    remember("s3cr3t-value")
    remember_url(url)
    out = scrub_text(f"error for {url} with s3cr3t-value and AKIA/1")
    for secret in ("s3cr3t-value", "deadbeef", "TOKEN123", "AKIA%2F1", "AKIA/1"):
        assert secret not in out
