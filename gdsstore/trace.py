"""Provenance: which route each operation took, why, and how fast.

Nothing is recorded (and nothing costs more than one truthiness check) unless a trace is active::

    with gdsstore.trace() as t:
        z[:]
    print(t)          # a table by route and reason, plus cuFile's own nvfs/posix split
    t.totals          # {"posix": {"ops": 3, "bytes": 12582912, "seconds": 0.01}}
"""

from __future__ import annotations

import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from gdsstore.policy import fmt_bytes

__all__ = ["Trace", "TraceEvent", "record", "recorder", "register_stats_source", "trace"]


@dataclass(frozen=True)
class TraceEvent:
    """One engine operation."""

    op: str  # "read" | "write" | "get" | ...
    route: str  # "cufile" | "posix" | "http" | "s3" | "webhdfs" | "gpu-decode" | ...
    reason: str
    nbytes: int
    seconds: float
    path: str = ""
    device: int | None = None  # CUDA device of the buffer, None for host memory
    requests: int = 1  # requests sent (a remote wave is one event of many requests)


@dataclass
class Trace:
    """Events recorded while the trace was active, with totals and cuFile's own counters."""

    events: list[TraceEvent] = field(default_factory=list)
    #: Differences of each stats source (e.g. ``"cufile"``) between trace start and end.
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Wall-clock seconds the trace was active (0 while it still is).
    wall_seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, event: TraceEvent) -> None:
        with self._lock:
            self.events.append(event)

    @property
    def totals(self) -> dict[str, dict[str, Any]]:
        """``{route: {"ops": int, "bytes": int, "seconds": float}}``."""
        out: dict[str, dict[str, Any]] = {}
        for e in list(self.events):
            t = out.setdefault(e.route, {"ops": 0, "bytes": 0, "seconds": 0.0})
            t["ops"] += 1
            t["bytes"] += e.nbytes
            t["seconds"] += e.seconds
        return out

    @property
    def routes(self) -> set[str]:
        """The set of routes taken."""
        return {e.route for e in list(self.events)}

    def by_reason(self) -> dict[tuple[str, str, str], dict[str, Any]]:
        """Totals keyed by ``(op, route, reason)``: ``ops`` (events), ``requests``, ``bytes``, ``seconds``."""
        out: dict[tuple[str, str, str], dict[str, Any]] = {}
        for e in list(self.events):
            t = out.setdefault((e.op, e.route, e.reason), {"ops": 0, "requests": 0, "bytes": 0, "seconds": 0.0})
            t["ops"] += 1
            t["requests"] += e.requests
            t["bytes"] += e.nbytes
            t["seconds"] += e.seconds
        return out

    def __str__(self) -> str:
        by_reason = self.by_reason()
        # A "requests" column only where some row sent more requests than it has events (a wave).
        waves = any(t["requests"] != t["ops"] for t in by_reason.values())
        rows = [("op", "route", "reason", "ops", *(("requests",) if waves else ()), "bytes", "seconds", "GB/s")]
        for (op, route, reason), t in sorted(by_reason.items()):
            secs = t["seconds"]
            rate = f"{t['bytes'] / secs / 1e9:.2f}" if secs > 0 else "-"
            reqs = (str(t["requests"]),) if waves else ()
            rows.append((op, route, reason, str(t["ops"]), *reqs, fmt_bytes(t["bytes"]), f"{secs:.4f}", rate))
        if len(rows) == 1:
            rows.append(("-", "-", "no engine operations recorded", "0", "0 B", "0", "-"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        if self.wall_seconds:
            lines.append(f"wall: {self.wall_seconds:.4f} s")
        for name, st in self.stats.items():
            lines.append(f"{name} stats: " + ", ".join(f"{k}={v}" for k, v in st.items()))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Trace(events={len(self.events)}, routes={sorted(self.routes)})"


# Active traces. A plain list, not a ContextVar: engine pieces run on pool threads that do not
# inherit the caller's context, and the check below must stay one attribute read.
_ACTIVE: list[Trace] = []
_ACTIVE_LOCK = threading.Lock()
_STATS_SOURCES: dict[str, Callable[[], dict[str, Any] | None]] = {}


def register_stats_source(name: str, snapshot: Callable[[], dict[str, Any] | None]) -> None:
    """Register a counter snapshot (numbers) read at trace start and end; the trace keeps the delta.

    A snapshot returns ``None`` when it cannot be read (library absent, ABI mismatch).
    """
    _STATS_SOURCES[name] = snapshot


def active() -> bool:
    """Whether any trace is recording."""
    return bool(_ACTIVE)


def record(
    op: str,
    route: str,
    reason: str,
    nbytes: int,
    seconds: float,
    path: str = "",
    device: int | None = None,
    requests: int = 1,
) -> None:
    """Record one operation into every active trace (no-op when none is); ``requests``: how many
    requests it sent (a remote wave records one event for all of them)."""
    if not _ACTIVE:
        return
    ev = TraceEvent(op, route, reason, nbytes, seconds, path, device, requests)
    for t in list(_ACTIVE):
        t.add(ev)


def recorder(
    op: str, route: str, reason: str, path: str = "", device: int | None = None
) -> Callable[[int, BaseException | None], None] | None:
    """A callback ``done(nbytes, error)`` that records one operation timed from now if it succeeded (the
    ``on_done`` of ``gdsstore.engine.pool.run_pieces``); None while no trace is active."""
    if not _ACTIVE:
        return None
    t0 = time.perf_counter()

    def done(n: int, exc: BaseException | None) -> None:
        if exc is None:
            record(op, route, reason, n, time.perf_counter() - t0, path, device)

    return done


def _snapshot_stats() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, fn in list(_STATS_SOURCES.items()):
        try:
            snap = fn()
        except Exception:  # a stats reader must never break the traced work
            snap = None
        if snap is not None:
            out[name] = snap
    return out


@contextmanager
def trace() -> Iterator[Trace]:
    """Record every engine operation in the block; yields the :class:`Trace`."""
    t = Trace()
    before = _snapshot_stats()
    with _ACTIVE_LOCK:
        _ACTIVE.append(t)
    start = time.perf_counter()
    try:
        yield t
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.remove(t)
        after = _snapshot_stats()
        for name, snap in after.items():
            base = before.get(name, {})
            t.stats[name] = {
                k: (v - base.get(k, 0)) if isinstance(v, int | float) and not isinstance(v, bool) else v
                for k, v in snap.items()
            }
        t.wall_seconds = time.perf_counter() - start


class _CallableModule(types.ModuleType):
    """Lets ``gdsstore.trace`` be both this module and the ``trace()`` context manager, whatever the
    import order (``from gdsstore import trace`` then ``trace.record(...)`` or ``trace()``)."""

    def __call__(self) -> AbstractContextManager[Trace]:
        return trace()


sys.modules[__name__].__class__ = _CallableModule
