"""A read of few large zstd chunks decoded by the host's threads and nvCOMP at once.

nvCOMP decodes each zstd frame in one thread block, so a call of a few large chunks lasts one chunk's decode
at a block's rate, while the host's threads (numcodecs) each decode one chunk at a time. Neither alone uses
the machine: here both take chunks from one queue (:class:`SplitQueue`), the device a batch from its front
(:func:`device_share` of what is left, each time it frees), the host's threads one chunk at a time from its
back, until it is empty. Each chunk's place in the device output is fixed before either starts, so both
land there: nvCOMP decodes straight into it; a host thread decodes into its slot of a pinned buffer and
copies that slot into it. A chunk of several zstd frames (:func:`gdsstore.gpu.zstd_frames.split_frames`) is
one nvCOMP item per frame, each decoded into its place of the chunk's output.

The scheduling (:func:`run_split`) takes the two decoders as callables: the tests run it, and the landing,
with numpy arrays posing as device memory.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gdsstore.engine import cuda
from gdsstore.engine.landing import Landed, empty_slots, slot_layout
from gdsstore.engine.pool import engine_pool
from gdsstore.gpu import codecs as _codecs
from gdsstore.gpu import nvcomp, nvcomp_capi, staging
from gdsstore.gpu.zstd_frames import FrameTable, split_frames

__all__ = [
    "DEVICE_FRAME_RATE", "DEVICE_ROUND_FLOOR", "DEVICE_SLOTS", "HOST_THREAD_RATE", "LEARN_CHUNKS", "SplitDecode", "SplitQueue", "SplitRun",
    "caller_event", "chunk_frames", "decode_split", "device_share", "host_to_device", "run_split",
]

#: Bytes per second one host thread decodes zstd (numcodecs, level 1, into pinned memory): an estimate from the
#: CPU route's rate (docs/performance.md, "Measurements behind the engine's choices").
HOST_THREAD_RATE = 220e6
#: Bytes per second nvCOMP decodes one large zstd frame (nvCOMP 6.0 on an H100, 8-16 chunks of 64-128 MiB, landing
#: included; docs/gpu-pipeline.md, "Few large chunks").
DEVICE_FRAME_RATE = 380e6
#: Seconds nvCOMP takes for a round of frames of a few MiB (the model is asked about chunks of `gpu.split_decode_bytes`
#: and more): 4 MiB and 16 MiB frames both took about 60-70 ms a call on that H100, as 60 MB/s a frame would for
#: 4 MiB (256 KiB frames are far quicker: 14 ms for 1,024, outside the model's use).
DEVICE_ROUND_FLOOR = 0.07
#: Frames nvCOMP decodes at once at that rate: about one per streaming multiprocessor (an H100 has 132).
DEVICE_SLOTS = 132
#: Chunks whose frames a read that nvCOMP takes no part of has nvCOMP parse for the scratch they need (learned
#: once per chunk size and process: the next reads' windows are planned with it instead of nvCOMP's bound).
LEARN_CHUNKS = 16


def device_share(
    frames: Sequence[np.ndarray | None],
    chunk_bytes: Sequence[int],
    threads: int,
    slots: int = DEVICE_SLOTS,
    host_rate: float = HOST_THREAD_RATE,
    frame_rate: float | None = None,
    round_floor: float | None = None,
) -> int:
    """How many chunks from the front of ``frames`` the device should take so that both decoders finish
    soonest: the device's call lasts its largest frame's decode (at least ``round_floor``) per round of ``slots``
    frames; the host's ``threads`` take the other chunks one at a time from the back. Ties go to the smaller share (less device
    memory); a chunk whose frames are unknown (``None``) and the chunks behind it stay with the host.

    Args:
        frames: per chunk in queue order, its frames' decoded sizes (``None``: the host decodes it).
        chunk_bytes: per chunk, its decoded size.
        threads: the host's threads (0: none, the device takes what it can).
        frame_rate, round_floor: the device's rates (None: :data:`DEVICE_FRAME_RATE`, :data:`DEVICE_ROUND_FLOOR`).

    Examples:
        >>> mib = 1 << 20
        >>> device_share([np.array([128 * mib])] * 8, [128 * mib] * 8, 16)  # a host thread is slower than the call
        8
        >>> device_share([np.array([4 * mib])] * 40, [4 * mib] * 40, 16)  # small frames: the host alone is sooner
        0
        >>> device_share([np.array([4 * mib])] * 200, [4 * mib] * 200, 16)  # one round on the device, the rest on the host
        120
        >>> device_share([np.array([16 * mib])] * 8, [16 * mib] * 8, 16, frame_rate=60e6)  # a slower device
        0
    """
    frame_rate = DEVICE_FRAME_RATE if frame_rate is None else frame_rate
    round_floor = DEVICE_ROUND_FLOOR if round_floor is None else round_floor
    n = next((k for k, f in enumerate(frames) if f is None), len(frames))
    if threads <= 0:
        return n
    best, best_k = math.inf, 0
    for k in range(n + 1):
        t_dev = 0.0
        if k:
            sizes = np.concatenate([f for f in frames[:k] if f is not None])
            t_dev = math.ceil(len(sizes) / slots) * max(float(sizes.max(initial=0)) / frame_rate, round_floor)
        t_host = _host_makespan(chunk_bytes[k:][::-1], threads) / host_rate
        t = max(t_dev, t_host)
        if t < best:
            best, best_k = t, k
    return best_k


def _host_makespan(sizes: Sequence[int], threads: int) -> float:
    """The bytes the busiest of ``threads`` decodes when each takes the next of ``sizes`` as it frees."""
    free = [0.0] * min(threads, max(len(sizes), 1))
    for s in sizes:
        heapq.heapreplace(free, free[0] + s)
    return max(free)


class SplitQueue:
    """Chunks ``0..n-1`` handed out once each: batches from the front, single chunks from the back."""

    def __init__(self, n: int) -> None:
        self._lo, self._hi = 0, n
        self._lock = threading.Lock()

    def rest(self) -> range:
        """The chunks not handed out yet."""
        with self._lock:
            return range(self._lo, self._hi)

    def take_front(self, k: int) -> list[int]:
        """Up to ``k`` chunks from the front."""
        with self._lock:
            hi = min(self._lo + max(k, 0), self._hi)
            out = list(range(self._lo, hi))
            self._lo = hi
            return out

    def take_back(self) -> int | None:
        """The last chunk, or ``None`` when none is left."""
        with self._lock:
            if self._hi <= self._lo:
                return None
            self._hi -= 1
            return self._hi


@dataclass
class SplitRun:
    """Who decoded what: ``device`` and ``host`` chunk ids (queue positions), and why the device stopped
    early (its chunks then decoded on the host), if it did."""

    device: list[int] = field(default_factory=list)
    host: list[int] = field(default_factory=list)
    device_failed: str | None = None


def run_split(
    n: int,
    threads: int,
    decode_host: Callable[[int], None],
    decode_device: Callable[[list[int]], None] | None,
    share: Callable[[range], int],
    aside: Callable[[], None] | None = None,
) -> SplitRun:
    """Decode chunks ``0..n-1`` once each: the device takes a batch from the front of a :class:`SplitQueue`
    (``decode_device(ids)``, ``share(rest)`` chunks of those left) before ``threads`` host workers on the engine's
    pool start taking them one at a time from the back (``decode_host(i)``), and another batch each time it
    frees, while ``share`` gives it any. ``decode_device`` ``None`` (no nvCOMP): the host alone. A device batch
    that fails goes to the host. ``aside``: the calling thread's work while the workers decode, where the
    device takes no first batch (its failure only skips it).

    Raises:
        Exception: the first error of a host decode, once every worker has stopped.
    """
    queue = SplitQueue(n)
    run = SplitRun()
    lock = threading.Lock()
    stop = threading.Event()  # a host decode failed: the other workers stop taking chunks

    def host_worker() -> None:
        while not stop.is_set() and (i := queue.take_back()) is not None:
            try:
                decode_host(i)
            except BaseException:
                stop.set()
                raise
            with lock:
                run.host.append(i)

    width = max(threads, 0) if decode_device is not None else max(threads, 1)
    ids = [] if decode_device is None else queue.take_front(share(queue.rest()))
    pool = engine_pool(width) if width else None
    workers: list[Future[None]] = [pool.submit(host_worker) for _ in range(width)] if pool else []
    failed: list[int] = []
    try:
        if aside is not None and decode_device is not None and not ids:
            with contextlib.suppress(Exception):  # what it learns is for later reads; this one goes on without
                aside()
        while decode_device is not None and ids and not stop.is_set():
            try:
                decode_device(ids)
            except Exception as exc:  # nvCOMP refused the batch: the CPU codec decides (it raises on corrupt data)
                run.device_failed = f"nvCOMP failed ({type(exc).__name__})"
                failed = ids
                break
            run.device.extend(ids)
            ids = queue.take_front(share(queue.rest()))
    finally:
        for f in workers:
            f.exception()  # every worker stopped before the first error is raised
    for f in workers:
        f.result()
    for i in failed + list(queue.rest()):  # a failed batch, and what no worker was left to take
        decode_host(i)
        run.host.append(i)
    return run


def chunk_frames(view: Any, want: int) -> FrameTable | None:
    """The frames of a stored zstd chunk of ``want`` decoded bytes, or ``None`` where nvCOMP cannot take it
    frame by frame: a frame without a content size, sizes that do not add up to ``want``, or not zstd (the CPU
    codec then decides, and names the error)."""
    try:
        table = split_frames(view)
    except ValueError:
        return None
    return table if table is not None and table.total == want else None


@dataclass
class SplitDecode:
    """A window's chunks decoded by both decoders into one device buffer: ``decoded``'s item ``k`` is present
    chunk ``k``'s raw bytes (in its device buffer ``dev``); ``run`` says who decoded which."""

    decoded: Landed
    run: SplitRun
    seconds: float


def decode_split(
    staged: Landed,
    present: np.ndarray,
    want: np.ndarray,
    decode_host_into: Callable[[int, np.ndarray], None],
    threads: int,
    device: bool = True,
    to_device: Callable[[Landed], Any] = staging.to_device,
) -> SplitDecode:
    """Decode the ``present`` chunks of a host-staged window (``want[k]`` decoded bytes each) with the host's
    ``threads`` and nvCOMP at once (:func:`run_split`) into one device buffer, each chunk in a slot fixed in
    advance. ``decode_host_into(i, dst)`` decodes window chunk ``i`` into the host array ``dst`` (raising on
    corrupt data); ``device`` ``False``: the host alone; ``to_device``: the one copy of the staged window to the
    device, made when nvCOMP takes its first batch."""
    t0 = time.perf_counter()
    cp = _codecs._cupy()
    out_off, total = slot_layout(want, nvcomp.OUT_ALIGN)
    out = cp.empty(max(total, 1), dtype=cp.uint8)
    host = empty_slots(want, pinned=True)
    views = [staged.view(int(i)) for i in present.tolist()]
    frames = [None if v is None else chunk_frames(v, int(n)) for v, n in zip(views, want.tolist())]
    # Chunks nvCOMP cannot take frame by frame go to the back of the queue, where the host starts.
    order = sorted(range(len(frames)), key=lambda k: frames[k] is None)
    after = caller_event(out)
    dev_staged: list[Any] = []
    most = max((_largest(t) for t in frames), default=0)
    unlearned = nvcomp_capi.scratch_ratio("zstd", most) >= nvcomp_capi.BOUND_SCRATCH

    def on_host(q: int) -> None:
        k = order[q]
        a, n = int(host.offsets[k]), int(want[k])
        decode_host_into(int(present[k]), host.host[a : a + n])
        host_to_device(out, int(out_off[k]), host, a, n, after)

    def on_device(qs: list[int]) -> None:
        first = not dev_staged
        if first:
            dev_staged.append(to_device(staged))
        ks = [order[q] for q in qs]
        src_off, src_len, dst_off, dst_len = _frame_items([frames[k] for k in ks], staged.offsets[present[ks]], out_off[ks])
        # The first batch learns the scratch the frames need where the process has not: this read's windows were
        # planned with nvCOMP's bound (hence so few chunks per call that it was split), the next read's with it.
        exact = first and unlearned
        nvcomp.decode_batch_into("zstd", dev_staged[0], src_off, src_len, out, dst_off, dst_len, exact_scratch=exact)

    sizes = [None if (t := frames[k]) is None else t.decoded for k in order]
    nbytes = [int(want[k]) for k in order]

    def share(rest: range) -> int:
        return device_share(sizes[rest.start : rest.stop], nbytes[rest.start : rest.stop], threads)

    def learn() -> None:
        # nvCOMP decodes none of this read: its windows were planned with nvCOMP's scratch bound (hence so few
        # chunks per call), so the next read's are planned with what the frames of a few chunks need: those of
        # the largest frames, as the ratio is kept per largest frame (nvcomp_capi.scratch_ratio).
        ks = sorted((k for k in order if frames[k] is not None), key=lambda k: -_largest(frames[k]))[:LEARN_CHUNKS]
        if ks:
            _learn_scratch(staged, present, frames, ks)

    try:
        run = run_split(
            len(order), threads, on_host, on_device if device else None, share,
            aside=learn if unlearned and nvcomp_capi.library() is not None else None,
        )
    finally:
        host.release()
    run.device = [order[q] for q in run.device]
    run.host = [order[q] for q in run.host]
    return SplitDecode(Landed(None, out_off, want, dev=out), run, time.perf_counter() - t0)


def _frame_items(
    tables: Sequence[FrameTable | None], src_base: np.ndarray, dst_base: np.ndarray
) -> tuple[list[int], list[int], list[int], list[int]]:
    """One nvCOMP item per frame of the chunks of ``tables`` (each chunk's stored bytes at ``src_base``, its
    decoded bytes at ``dst_base``): ``(source offsets, sizes, output offsets, decoded sizes)``."""
    frames = [t for t in tables if t is not None]
    assert len(frames) == len(tables)  # nvCOMP is never handed a chunk it cannot take frame by frame
    src = np.concatenate([b + t.offsets for b, t in zip(src_base, frames)])
    dst = np.concatenate([b + t.decoded_offsets for b, t in zip(dst_base, frames)])
    sizes = np.concatenate([t.sizes for t in frames])
    decoded = np.concatenate([t.decoded for t in frames])
    keep = decoded > 0  # a frame of no content writes nothing
    return src[keep].tolist(), sizes[keep].tolist(), dst[keep].tolist(), decoded[keep].tolist()


def _largest(frames: FrameTable | None) -> int:
    """The decoded size of a chunk's largest frame (0: none nvCOMP can take)."""
    return 0 if frames is None else int(frames.decoded.max(initial=0))


def _learn_scratch(staged: Landed, present: np.ndarray, frames: Sequence[FrameTable | None], ks: list[int]) -> None:
    """Copy chunks ``ks``'s stored bytes to the device and ask nvCOMP for the scratch their frames need
    (:func:`gdsstore.gpu.nvcomp_capi.learn_scratch`), without decoding them."""
    cp = _codecs._cupy()
    views = [np.asarray(staged.view(int(present[k]))) for k in ks]
    starts = np.cumsum([0] + [v.nbytes for v in views[:-1]])
    src_off, src_len, _, decoded = _frame_items([frames[k] for k in ks], starts, np.zeros(len(ks), np.int64))
    src = cp.asarray(np.concatenate(views))
    nvcomp_capi.learn_scratch("zstd", nvcomp_capi.DecodeTable(src, src_off, src_len, None, [0] * len(decoded), decoded))


def caller_event(out: Any) -> Any:
    """An event after the work queued so far on the caller's stream, for copies into ``out`` from other threads."""
    return cuda.current_event(out.device.id)


def host_to_device(out: Any, out_offset: int, host: Landed, offset: int, n: int, after: Any) -> None:
    """Copy ``n`` decoded bytes at ``offset`` of the host buffer into ``out`` at ``out_offset``, after the
    caller's work queued when the read started (``after``: its stream may still use this memory)."""
    if not n:
        return
    if host.pinned is not None:
        cuda.memcpy_htod(out.device.id, int(out.data.ptr) + out_offset, int(host.pinned.ptr) + offset, n, after)
    else:
        out[out_offset : out_offset + n].set(host.host[offset : offset + n])
