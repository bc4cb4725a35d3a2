"""The remote retry policy, in one place: which failures are retried, how long to wait (exponential backoff,
full jitter), when to stop, what is logged. What is retried and why: docs/remote.md ("Interrupts, stalls and
what is retried")."""

from __future__ import annotations

import datetime
import email.utils
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from gdsstore import policy
from gdsstore.errors import RemoteIOError, StaleConnectionError, TransientError

__all__ = [
    "STALE_RETRIES", "RemoteIOError", "RetryPolicy", "TransientError", "is_transient", "retry_after", "status_error",
]

log = logging.getLogger("gdsstore.remote")

T = TypeVar("T")
#: ``attempt(items, number)`` of :meth:`RetryPolicy.run`: each failed item's ``(index, what, exception)``.
Attempt = Callable[[list[int], int], list[tuple[int, str, BaseException]]]
#: Requests an item may lose to stale kept-alive connections (:class:`StaleConnectionError`) before they count
#: as attempts: each such loss takes one dead connection out of the pool, so a few cover a pool closing
#: together, and a server that closes every connection unanswered still ends after ``remote.max_attempts``.
STALE_RETRIES = 8


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure that a later attempt may not hit."""
    if isinstance(exc, TransientError | TimeoutError | ConnectionError):
        return True  # ConnectionError covers refused, reset, aborted and broken pipe
    import urllib3.exceptions as ue  # WebHDFS's transport (the core maps its own failures)

    if isinstance(exc, ue.SSLError):
        return False  # a certificate problem does not heal on its own
    return isinstance(exc, ue.TimeoutError | ue.ProtocolError | ue.NewConnectionError)


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

    def call(self, fn: Callable[[], T], what: str) -> T:
        """Run ``fn`` (one attempt; a transient exception, :func:`is_transient`, asks for another) as
        :meth:`run` runs one item; ``what``: the operation for messages (no secrets).

        Raises:
            RemoteIOError: the last transient failure, once the attempts are used up.
            Exception: any non-transient exception of ``fn``, at once.
        """
        out: list[T] = []
        failed: list[BaseException] = []

        def attempt(todo: list[int], number: int) -> list[tuple[int, str, BaseException]]:
            try:
                out.append(fn())
            except Exception as exc:
                return [(0, what, exc)]
            return []

        self.run(1, attempt, lambda i, exc: failed.append(exc))
        if failed:
            raise failed[0]
        return out[0]

    def run(self, n: int, attempt: Attempt, give_up: Callable[[int, BaseException], None]) -> None:
        """Run ``attempt`` on all ``n`` items, then again on those that failed transiently, at most
        ``max_attempts`` times each (a request lost to a stale connection is sent again at once, and counts
        only past :data:`STALE_RETRIES`); ``give_up(i, exc)`` for each item that failed for good."""
        todo, number = list(range(n)), 1
        used = [1] * n  # attempts each item has used up
        stale = [0] * n
        while todo:
            again: list[int] = []
            why: tuple[str, BaseException] | None = None
            for i, what, exc in attempt(todo, number):
                if isinstance(exc, StaleConnectionError) and stale[i] < STALE_RETRIES:
                    stale[i] += 1
                    again.append(i)
                elif is_transient(exc) and used[i] < self.max_attempts:
                    used[i] += 1
                    again.append(i)
                    why = why or (what, exc)
                elif is_transient(exc):
                    give_up(i, RemoteIOError(f"{what}: failed after {used[i]} attempt(s) "
                                             f"(remote.max_attempts={self.max_attempts}): {exc}"))
                else:
                    give_up(i, exc)
            todo = again
            if why is not None:  # wait before the next attempt, saying so (the first failure of this one)
                failed = max(used[i] for i in todo) - 1
                wait = self.delay(failed, getattr(why[1], "retry_after", None))
                level = logging.WARNING if failed == 1 else logging.DEBUG
                others = f" (and {len(todo) - 1} more request(s) of this call)" if len(todo) > 1 else ""
                log.log(level, "%s%s: attempt %d failed (%s: %s); retrying in %.2f s (remote.max_attempts, "
                        "remote.timeout)", why[0], others, failed, type(why[1]).__name__, why[1], wait)
                time.sleep(wait)
            number += 1


def status_error(status: int, label: str, retry: RetryPolicy | None = None, retry_after: float | None = None) -> OSError:
    """An HTTP error status as gdsstore's exceptions, one mapping for every transport: 404 → FileNotFoundError,
    401/403 → PermissionError, a ``remote.retry_status`` code → TransientError (retried), anything else →
    RemoteIOError. ``label`` names the request and the status (no secrets)."""
    if status == 404:
        return FileNotFoundError(label)
    if status in (401, 403):
        return PermissionError(label)
    if status in (retry or RetryPolicy.from_settings()).retry_status:
        return TransientError(label, retry_after=retry_after)
    return RemoteIOError(label)
