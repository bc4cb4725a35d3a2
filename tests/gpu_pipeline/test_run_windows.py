"""``gpu.windows.run_windows``, the one read-ahead loop of the zarr pipeline and the archive reader: every
window read is given back exactly once, whether its processing succeeded or failed, the one read ahead of
a failure included; one window is read on the calling thread."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gdsstore.gpu.windows import run_windows


class Ledger:
    """Reads, processing and releases of windows, by window."""

    def __init__(self, fail_read: int = -1, fail_process: int = -1) -> None:
        self.fail_read, self.fail_process = fail_read, fail_process
        self.read: list[int] = []
        self.processed: list[int] = []
        self.released: list[int] = []
        self.threads: list[int] = []
        self.lock = threading.Lock()

    def on_read(self, w: int) -> int:
        with self.lock:
            self.threads.append(threading.get_ident())
            self.read.append(w)
        if w == self.fail_read:
            raise OSError(f"window {w} could not be read")
        return w * 10  # what a window's read hands on (its staging)

    def on_process(self, w: int, got: int) -> None:
        assert got == w * 10
        if w == self.fail_process:
            raise ValueError(f"window {w} is corrupt")
        self.processed.append(w)

    def on_release(self, got: int) -> None:
        with self.lock:
            self.released.append(got // 10)


@settings(max_examples=80, deadline=None)
@given(n=st.integers(0, 6), fail_read=st.integers(-1, 6), fail_process=st.integers(-1, 6),
       prepare=st.sampled_from(["none", "ok", "fails"]))  # fmt: skip
def test_every_window_read_is_given_back_once(n: int, fail_read: int, fail_process: int, prepare: str) -> None:
    led = Ledger(fail_read, fail_process)
    windows = list(range(n))
    prepared: list[bool] = []

    def plan() -> None:
        prepared.append(True)
        if prepare == "fails":
            raise ValueError("window -1 plan failed")

    first_failure = min((k for k in (fail_read, fail_process) if 0 <= k < n), default=None)
    if prepare == "fails":
        first_failure = -1  # the plan runs before any window is processed, its failure the one raised
    with ThreadPoolExecutor(2) as pool:

        def run() -> None:
            run_windows(windows, led.on_read, led.on_process, led.on_release, pool, None if prepare == "none" else plan)

        if first_failure is None:
            run()
        else:
            with pytest.raises((OSError, ValueError), match=f"window {first_failure} "):
                run()
    assert prepared == ([] if prepare == "none" else [True])
    landed = [w for w in led.read if w != fail_read]
    assert sorted(led.released) == sorted(landed)  # every read that landed given back, once
    stop = n if first_failure is None else max(0, first_failure)
    assert led.processed == windows[:stop]  # in order, none after the first failure
    assert all(w <= stop + 1 for w in led.read)  # at most one window read ahead of where it stopped


def test_one_window_is_read_on_the_calling_thread() -> None:
    me = threading.get_ident()
    led = Ledger()
    with ThreadPoolExecutor(2) as pool:
        run_windows([0], led.on_read, led.on_process, led.on_release, pool)
        assert led.threads == [me]  # no hop to the pool for a single window
        run_windows([0, 1, 2], led.on_read, led.on_process, led.on_release, pool)
    assert me not in led.threads[1:]  # several: each read on the pool, while the one before is processed
    assert led.released == [0, 0, 1, 2]


def test_one_window_is_read_in_the_background_while_prepare_runs() -> None:
    me = threading.get_ident()
    led = Ledger()
    started = threading.Event()

    def read(w: int) -> int:
        started.set()
        return led.on_read(w)

    def prepare() -> None:  # returns only once the read has started: the two ran at once
        assert started.wait(timeout=10), "the window was not read while prepare ran"

    with ThreadPoolExecutor(2) as pool:
        run_windows([0], read, led.on_process, led.on_release, pool, prepare)
    assert led.threads and led.threads[0] != me
    assert led.processed == [0] and led.released == [0]
