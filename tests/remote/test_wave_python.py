"""The wave's Python does not grow with its objects: a wave of 1,024 objects makes as many Python function calls
as a wave of 64 (its planning, the core's call, the outcomes and each item's place are columns, not an object
and a call per item), for whole objects of known size (uncompressed chunks, in slots), of unknown size (fsspec
``cat``, in room set aside), with missing ones among them, and with a failure returned in its place; and an
fsspec ``cat`` of 1,024 URLs makes the Python calls of a ``cat`` of 64 (the URLs stripped and located as lists)."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator
from typing import Any

import fsspec
import numpy as np
import pytest
from servers.nginx import NginxServer

from gdsstore.engine.backend import backend_for, host_alloc
from gdsstore.engine.landing import Landed

SIZE = 100  # bytes of each object: of every object but the last, which is shorter


def _python_calls(fn: Any) -> tuple[int, Any]:
    """The Python function calls (in every thread) of ``fn()`` within gdsstore, and what it returned."""
    calls = itertools.count()

    def count(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and "gdsstore" in frame.f_code.co_filename:
            next(calls)

    threading.setprofile_all_threads(count)
    try:
        out = fn()
    finally:
        threading.setprofile_all_threads(None)
    return next(calls), out


@pytest.fixture(scope="module")
def served(nginx: NginxServer) -> Iterator[dict[str, bytes]]:
    """1,024 objects under nginx's root (``calls/o/<i>``), the last one shorter than the others."""
    data = {f"calls/o/{i}": bytes([i % 251]) * (SIZE if i < 1023 else SIZE // 2) for i in range(1024)}
    for key, value in data.items():
        os.makedirs(os.path.join(nginx.root, os.path.dirname(key)), exist_ok=True)
        with open(os.path.join(nginx.root, key), "wb") as f:
            f.write(value)
    yield data


def _wave(nginx: NginxServer, keys: list[str], *, known: bool, errors: str = "raise") -> Landed:
    backend = backend_for(nginx.url(""))
    expect = np.full(len(keys), SIZE, np.int64) if known else None
    return backend.get_many(keys, None, host_alloc, expect=expect, errors=errors)


@pytest.mark.parametrize("known", [True, False], ids=["sizes known", "sizes unknown"])
def test_a_wave_of_1024_objects_makes_the_python_calls_of_64(nginx: NginxServer, served: dict[str, bytes],
                                                              known: bool) -> None:
    """Objects of the same size, every tenth one missing (zarr's fill value): found ones land, missing ones
    are -1, and the calls are those of a wave sixteen times smaller."""
    counts = []
    for n in (64, 1024):
        keys = [f"calls/o/{i}" if i % 10 else f"calls/missing/{i}" for i in range(n - 1)]  # not the short one
        _wave(nginx, keys, known=known)  # connections (no stale one to send again) and the room hint warmed
        calls, landed = _python_calls(lambda keys=keys: _wave(nginx, keys, known=known))
        got = landed.all_bytes()
        assert got == [served.get(k) for k in keys]
        counts.append(calls)
    assert counts[0] == counts[1], f"{counts[1]} Python calls for a wave of 1,024 objects, {counts[0]} for 64"


def test_a_failure_returned_in_its_place_costs_no_call_per_object(nginx: NginxServer,
                                                                   served: dict[str, bytes]) -> None:
    """One object of another size than expected among 64 or 1,024: it alone fails, naming its size, and the
    calls do not grow with the objects that landed."""
    counts = []
    for n in (64, 1024):
        keys = [f"calls/o/{i}" for i in range(n - 1)] + ["calls/o/1023"]  # the short one last
        _wave(nginx, keys, known=True, errors="return")  # connections warmed: no stale one to send again
        calls, landed = _python_calls(lambda keys=keys: _wave(nginx, keys, known=True, errors="return"))
        assert landed.errors is not None and all(e is None for e in landed.errors[:-1])
        assert "is 50 bytes, not the 100 expected" in str(landed.errors[-1])
        assert landed.all_bytes()[:-1] == [served[k] for k in keys[:-1]]
        counts.append(calls)
    assert counts[0] == counts[1], f"{counts[1]} Python calls for a wave of 1,024 objects, {counts[0]} for 64"


def test_a_cat_of_1024_urls_makes_the_python_calls_of_64(nginx: NginxServer) -> None:
    """fsspec ``cat`` through ``gds``: the URLs stripped, located and read as lists (one wave), not a call per
    URL; every object comes back, a missing one as its FileNotFoundError."""
    os.makedirs(os.path.join(nginx.root, "catcalls"), exist_ok=True)
    for i in range(1024):
        with open(os.path.join(nginx.root, "catcalls", str(i)), "wb") as f:
            f.write(bytes([i % 251]) * 64)
    fs = fsspec.filesystem("gds", target_protocol="http")
    counts = []
    for n in (64, 1024):
        urls = [nginx.url(f"catcalls/{i}") for i in range(n - 1)] + [nginx.url("catcalls/missing")]
        fs.cat(urls, on_error="return")  # the backend and its connections warmed
        calls, got = _python_calls(lambda urls=urls: fs.cat(urls, on_error="return"))
        counts.append(calls)
        assert [got[u] for u in urls[:-1]] == [bytes([i % 251]) * 64 for i in range(n - 1)]
        assert isinstance(got[urls[-1]], FileNotFoundError)
    assert counts[0] == counts[1], f"{counts[1]} Python calls for a cat of 1,024 URLs, {counts[0]} for 64"


def test_cat_lands_in_the_buffer_the_last_cat_left(nginx: NginxServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``cat`` keeps its wave's buffer for the next (fresh memory costs its page faults on every call): the
    next ``cat`` lands in it, and one whose wave grows (an object larger than its share of the room, read
    again) moves to fresh memory, every object's bytes right."""
    from gdsstore.adapters.fsspec import batch_reads

    os.makedirs(os.path.join(nginx.root, "scratch"), exist_ok=True)
    data = {f"scratch/{i}": bytes([i]) * (16 << 10) for i in range(64)}
    data |= {f"scratch/small{i}": bytes([100 + i]) * 100 for i in range(3)}
    data["scratch/big"] = bytes(range(256)) * 400  # 100 KiB: more than the 16 KiB the last wave's objects had
    for key, value in data.items():
        with open(os.path.join(nginx.root, key), "wb") as f:
            f.write(value)
    fs = fsspec.filesystem("gds", target_protocol="http")
    first = [nginx.url(f"scratch/{i}") for i in range(64)]
    fs.cat(first)  # the backend's room hint learnt: 16 KiB an object
    assert fs.cat(first) == {nginx.url(k): data[k] for k in (f"scratch/{i}" for i in range(64))}
    kept = batch_reads._scratch.kept
    assert kept is not None and kept.nbytes <= batch_reads.SCRATCH_MAX
    grows = [nginx.url(f"scratch/small{i}") for i in range(3)] + [nginx.url("scratch/big")]
    given: list[Any] = []  # each buffer the growing wave was given
    wave_alloc = batch_reads._scratch.wave_alloc

    def counted() -> Any:
        alloc, done = wave_alloc()

        def noted(n: int) -> Any:
            buf, owner = alloc(n)
            given.append(buf)
            return buf, owner

        return noted, done

    monkeypatch.setattr(batch_reads._scratch, "wave_alloc", counted)
    assert fs.cat(grows) == {u: data[u.split("/", 3)[3]] for u in grows}
    monkeypatch.undo()
    assert len(given) == 2 and np.shares_memory(given[0], kept) and not np.shares_memory(given[1], kept)
    assert batch_reads._scratch.kept is kept  # the larger of the two kept
    assert fs.cat(first) == {nginx.url(k): data[k] for k in (f"scratch/{i}" for i in range(64))}
    assert batch_reads._scratch.kept is kept
