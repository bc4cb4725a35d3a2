"""The remote retry policy, in one place: which failures are retried, how long to wait, when to stop.

Retried: timeouts, refused/reset/aborted connections, truncated bodies and responses whose status is
in ``remote.retry_status``. Not retried: anything that will fail the same way again (404, 403, a
server that ignores ``Range``, a bad URL). Waits grow exponentially from ``remote.backoff_base`` up
to ``remote.backoff_max`` with "full jitter" (a uniform draw in ``[0, cap]``), so many clients that
failed together do not retry together.

Examples:
    >>> from gdsstore.engine.remote.retry import RetryPolicy, TransientError
    >>> p = RetryPolicy(max_attempts=3, retry_status=(503,), backoff_base=0.0, backoff_max=0.0)
    >>> calls = []
    >>> def flaky() -> str:
    ...     calls.append(1)
    ...     if len(calls) < 3:
    ...         raise TransientError("503 Service Unavailable")
    ...     return "ok"
    >>> p.call(flaky, "GET x")
    'ok'
"""

from __future__ import annotations

import datetime
import email.utils
import logging
import random
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from gdsstore import policy
from gdsstore.errors import RemoteIOError, TransientError

__all__ = [
    "RemoteIOError", "RetryPolicy", "TransientError", "is_transient", "log_retry", "retry_after", "status_error",
]

log = logging.getLogger("gdsstore.remote")

T = TypeVar("T")


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure that a later attempt may not hit."""
    if isinstance(exc, TransientError):
        return True
    if isinstance(exc, socket.timeout | TimeoutError | ConnectionError):
        return True  # ConnectionError covers refused, reset, aborted and broken pipe
    try:
        import http.client

        import urllib3.exceptions as ue
    except ImportError:  # pragma: no cover - urllib3 is a dependency
        return False
    if isinstance(exc, http.client.IncompleteRead | http.client.RemoteDisconnected | http.client.BadStatusLine):
        return True
    if isinstance(exc, ue.SSLError):
        return False  # a certificate problem does not heal on its own
    return isinstance(exc, ue.TimeoutError | ue.ProtocolError | ue.NewConnectionError | ue.MaxRetryError)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date), or None."""
    raw = (headers.get("Retry-After") or "").strip()
    if not raw:
        return None
    if raw.isdigit():
        return float(raw)
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.datetime.now(datetime.UTC)).total_seconds())


def log_retry(what: str, attempt: int, exc: BaseException, wait: float, *, more: int = 0) -> None:
    """Say that an attempt failed and another follows: a WARNING at an operation's first retry (a stalled or
    failing server shows itself at once, not after every attempt ran out), DEBUG after that.

    Args:
        what: the operation (no secrets); attempt: the attempt that failed, from 1.
        exc: its failure; wait: seconds until the next attempt.
        more: other requests of the same call retried with it (a wave's).
    """
    level = logging.WARNING if attempt == 1 else logging.DEBUG
    if not log.isEnabledFor(level):
        return
    others = f" (and {more} more request(s) of this call)" if more else ""
    log.log(level, "%s%s: attempt %d failed (%s: %s); retrying in %.2f s (remote.max_attempts, remote.timeout)",
            what, others, attempt, type(exc).__name__, exc, wait)


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts, retryable statuses and backoff for one remote operation."""

    max_attempts: int
    retry_status: tuple[int, ...]
    backoff_base: float
    backoff_max: float

    @classmethod
    def from_settings(cls, s: policy.Settings | None = None) -> RetryPolicy:
        """The policy in force (``remote.*`` settings, validated by :func:`gdsstore.policy.settings`)."""
        s = s or policy.settings()
        return cls(s.remote_max_attempts, s.remote_retry_status, s.remote_backoff_base, s.remote_backoff_max)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1): full jitter, or
        the server's ``Retry-After`` when it asked for longer, never more than ``backoff_max``.

        Examples:
            >>> RetryPolicy(3, (503,), 0.0, 2.0).delay(1, retry_after=30.0)
            2.0
        """
        cap = min(self.backoff_max, self.backoff_base * (2 ** (attempt - 1)))
        wait = random.uniform(0.0, cap) if cap > 0 else 0.0
        if retry_after is not None and retry_after > wait:
            wait = min(retry_after, self.backoff_max)
        return wait

    def retryable_status(self, status: int) -> bool:
        return status in self.retry_status

    def call(self, fn: Callable[[], T], what: str) -> T:
        """Run ``fn`` (one attempt; a transient exception, :func:`is_transient`, asks for another) until it
        succeeds, fails permanently, or ``max_attempts`` are used up; ``what``: the operation for messages
        (no secrets).

        Raises:
            RemoteIOError: the last transient failure, once the attempts are used up.
            Exception: any non-transient exception of ``fn``, at once.
        """
        attempt = 1
        while True:
            try:
                return fn()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                if attempt >= self.max_attempts:
                    raise RemoteIOError(
                        f"{what}: failed after {attempt} attempt(s) (remote.max_attempts={self.max_attempts}): "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                wait = self.delay(attempt, getattr(exc, "retry_after", None))
                log_retry(what, attempt, exc, wait)
                time.sleep(wait)
                attempt += 1


def status_error(status: int, label: str, retry: RetryPolicy | None = None, retry_after: float | None = None) -> OSError:
    """An HTTP error status as gdsstore's exceptions, one mapping for every transport: 404 → FileNotFoundError,
    401/403 → PermissionError, a ``remote.retry_status`` code → TransientError (retried), anything else →
    RemoteIOError. ``label`` names the request and the status (no secrets)."""
    if status == 404:
        return FileNotFoundError(label)
    if status in (401, 403):
        return PermissionError(label)
    if (retry or RetryPolicy.from_settings()).retryable_status(status):
        return TransientError(label, retry_after=retry_after)
    return RemoteIOError(label)
