"""gdsstore.engine.pool: the future that joins a request's pieces."""

from __future__ import annotations

import threading

import pytest

from gdsstore.engine.pool import run_pieces


def test_counts_stop_at_the_first_short_piece() -> None:
    fut = run_pieces([lambda: 4, lambda: 2, lambda: 4], [4, 4, 4], 3)
    assert fut.result(timeout=10) == 6  # no holes: the third piece's bytes follow a short one


def test_first_error_after_every_piece_stopped() -> None:
    release = threading.Event()
    done: list[str] = []

    def slow() -> int:
        release.wait(10)
        done.append("slow")
        return 1

    def bad() -> int:
        release.set()
        raise OSError("piece failed")

    fut = run_pieces([slow, bad], [1, 1], 2)
    with pytest.raises(OSError, match="piece failed"):
        fut.result(timeout=10)
    assert done == ["slow"]


def test_a_failing_on_done_fails_the_future_instead_of_hanging_it() -> None:
    """on_done waits for device copies and checks versions: its error is the request's error."""
    seen: list[tuple[int, object]] = []

    def on_done(n: int, exc: BaseException | None) -> None:
        seen.append((n, exc))
        raise ValueError("copy failed")

    fut = run_pieces([lambda: 3, lambda: 3], [3, 3], 2, on_done)
    with pytest.raises(ValueError, match="copy failed"):
        fut.result(timeout=10)
    assert seen == [(6, None)]
