"""A read in windows: how many bytes one window holds, and the loop that reads the next window while
the current one is decoded and placed.

Each selection is read in windows (:func:`gdsstore.gpu.plan.split_windows`) so that its staging and
decode buffers stay under ``gpu.memory_budget``: while window ``k`` is decoded and scattered, window
``k + 1`` is being fetched (:func:`run_windows`). The zarr pipeline's reads (:mod:`gdsstore.gpu.execute`,
:mod:`gdsstore.gpu.read_shards`) and the archive reader run their windows through it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future

from gdsstore import policy
from gdsstore.engine.pool import engine_pool
from gdsstore.gpu import codecs as _codecs
from gdsstore.gpu import nvcomp_capi
from gdsstore.gpu import plan as _plan
from gdsstore.gpu.decode import CodecChain
from gdsstore.gpu.memory import device_free_bytes, in_callers_allocator, trim_call_pool, window_budget
from gdsstore.gpu.plan import split_windows

__all__ = ["read_windows", "run_windows", "window_bytes"]


def window_bytes(chain: CodecChain, device: bool, chunk_bytes: int = 0, alone: bool = False) -> int:
    """Large windows where the GPU decodes or the bytes are staged on the GPU (each window's read
    starts with no copy to overlap); host staging keeps windows small enough to stay in cache, and a device
    read's chunks decoded on the CPU within ``gpu.memory_budget``.
    ``chunk_bytes``: the decoded size of the largest chunk (the decode scratch nvCOMP needs per decoded
    byte depends on it, :func:`gdsstore.gpu.nvcomp_capi.scratch_ratio`; chunks stored as they are decoded
    need none); ``alone``: the read's only window."""
    if not device:
        return _plan.WINDOW_BYTES
    fmt = chain.device_plan()[0]
    if fmt not in (None, "-") or chain.device_staged():
        budget = policy.settings().gpu_memory_budget
        free = _device_free()
        if fmt is None:  # staged as stored, nothing for nvCOMP to decode: no scratch beside the window
            return _plan.large_window(free, budget, scratch=0.0, alone=alone)
        limit = _plan.large_window(free, budget, scratch=nvcomp_capi.scratch_ratio(fmt, chunk_bytes), alone=alone)
        if limit < nvcomp_capi.EXACT_SCRATCH_BATCH:  # such a window decodes with the bound's scratch
            limit = _plan.large_window(free, budget, alone=alone)
        return limit
    # Decoded on the CPU: the window's decoded bytes are its device memory (staged on the host).
    return min(_plan.WINDOW_BYTES, window_budget(policy.settings().gpu_memory_budget, scratch=0.0))


def _device_free() -> int:
    """The bytes the read may allocate on the current device (:func:`~gdsstore.gpu.memory.device_free_bytes`:
    RMM's pool where it manages the device); 0 where there is no usable device (the smallest large window)."""
    if _codecs._cupy() is None:
        return 0
    try:
        return device_free_bytes()
    except Exception:  # no usable device
        return 0


def read_windows(sizes: Sequence[int], chain: CodecChain, device: bool, chunk_bytes: int) -> list[range]:
    """The windows of a read of items of ``sizes`` decoded bytes (chunks of ``chunk_bytes``): one where the
    whole read fits the budget with nothing staged beside it, else :func:`gdsstore.gpu.plan.split_windows`
    under :func:`window_bytes`."""
    most = chunk_bytes
    limit = window_bytes(chain, device, most)
    if device and limit < sum(sizes) <= window_bytes(chain, device, most, alone=True):
        return [range(len(sizes))]
    return split_windows(sizes, limit)


def run_windows[W, T](
    windows: Sequence[W],
    read: Callable[[W], T],
    process: Callable[[W, T], None],
    release: Callable[[T], None],
    pool: Executor | None = None,
    prepare: Callable[[], None] | None = None,
) -> None:
    """Run ``process`` on each window while the next window's ``read`` runs in the background (``pool``, the
    engine's by default: one read ahead; a single window is read on the calling thread, unless ``prepare``,
    work of the calling thread that needs no window's bytes, runs meanwhile). Each window read is given back
    with ``release`` once processed, or when a failure stops the loop before it is (the one read ahead
    included): a failed read never keeps pinned staging."""
    if not windows:
        if prepare is not None:
            prepare()
        return
    ahead = engine_pool() if pool is None else pool
    read_there = in_callers_allocator(read)  # the window's device staging comes from the call's memory
    aside = len(windows) > 1 or prepare is not None
    nxt: Future[T] | None = ahead.submit(read_there, windows[0]) if aside else None
    try:
        if prepare is not None:
            prepare()
        for k, w in enumerate(windows):
            cur = read(w) if nxt is None else nxt.result()
            nxt = ahead.submit(read_there, windows[k + 1]) if k + 1 < len(windows) else None
            try:
                process(w, cur)
            finally:
                release(cur)
            if nxt is not None:
                trim_call_pool()  # the next window's memory from the device, not beside idle blocks
    finally:
        if nxt is not None:
            with contextlib.suppress(BaseException):  # the first failure is the one raised
                release(nxt.result())
