"""Batched local reads: many whole files or byte ranges into slots of one host buffer.

A zarr selection touches hundreds or thousands of chunk files. Reading them through one
:class:`~gdsstore.engine.local.LocalFile` each costs ~100 us of Python per file (settings, buffer
checks, routing) that a batch into one host buffer does not need: its route is POSIX into host
memory, decided once per batch by the policy ("host buffer"). Here a pool of ``num_threads`` threads
takes contiguous groups of the batch and runs ``open``/``preadv``/``close`` straight into each slot
(the syscalls release the GIL); one trace event records the whole batch.

Everything is vectorized on the caller's side: offsets, sizes and destination offsets are numpy
arrays, and the result is one numpy array of byte counts.

Example:
    >>> import numpy as np, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for name, data in (("a", b"hello"), ("b", b"world!")):
    ...     with open(os.path.join(d, name), "wb") as f:
    ...         _ = f.write(data)
    >>> paths = [os.path.join(d, n) for n in ("a", "b", "missing")]
    >>> sizes = stat_batch(paths)
    >>> sizes.tolist()
    [5, 6, -1]
    >>> dest = np.zeros(16, dtype=np.uint8)
    >>> got = read_batch(paths, np.zeros(3, np.int64), sizes.clip(0), dest, np.array([0, 8, 0]))
    >>> got.tolist(), bytes(dest[:5]), bytes(dest[8:14])
    ([5, 6, 0], b'hello', b'world!')
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import wait

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine.backend import check_key
from gdsstore.engine.pool import get_pool

__all__ = ["groups", "local_paths", "read_batch", "stat_batch"]

_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_MISSING = (FileNotFoundError, NotADirectoryError)


def groups(n: int, parts: int) -> list[range]:
    """``range(n)`` cut into at most ``parts`` contiguous groups (one pool task each).

    One task per file would cost more in futures than in reads for small chunks.
    """
    parts = max(1, min(parts, n))
    step = -(-n // parts)
    return [range(a, min(n, a + step)) for a in range(0, n, step)]


def _threads(num_threads: int | None) -> int:
    return num_threads if num_threads and num_threads > 0 else policy.settings().num_threads


def _run_groups(run: Callable[[range], None], n: int, threads: int) -> None:
    """``run`` over contiguous groups on the engine pool; the first error is raised only once every
    group has finished (no thread still writes into the caller's buffer)."""
    gs = groups(n, threads)
    if len(gs) <= 1:
        for g in gs:
            run(g)
        return
    futs = [get_pool(threads).submit(run, g) for g in gs]
    wait(futs)
    for f in futs:
        f.result()


def stat_batch(paths: Sequence[str], num_threads: int | None = None) -> np.ndarray:
    """Sizes of many files (``int64``; ``-1`` where a path does not exist or is not a file).

    Args:
        paths: local file paths.
        num_threads: threads to use (default: the policy's ``num_threads``).
    """
    n = len(paths)
    out = np.full(n, -1, dtype=np.int64)

    def run(g: range) -> None:
        stat = os.stat
        for i in g:
            try:
                st = stat(paths[i])
            except _MISSING:
                continue
            if st.st_mode & 0o170000 == 0o100000:  # S_ISREG without a call per file
                out[i] = st.st_size

    _run_groups(run, n, _threads(num_threads))
    return out


def read_batch(
    paths: Sequence[str],
    offsets: np.ndarray,
    sizes: np.ndarray,
    dest: np.ndarray,
    dest_offsets: np.ndarray,
    num_threads: int | None = None,
    *,
    into: str = "host buffer",
    url: str = "",
) -> np.ndarray:
    """Read ``sizes[i]`` bytes at ``offsets[i]`` of ``paths[i]`` into ``dest[dest_offsets[i]:]``.

    Args:
        paths: local file paths (one per read; the same file may appear several times).
        offsets: byte offset in each file (``int64``).
        sizes: bytes to read from each (``int64``; entries ``<= 0`` are skipped and read as 0).
        dest: the destination, a ``uint8`` host array (pinned or pageable).
        dest_offsets: where each read lands in ``dest``.
        num_threads: threads to use (default: the policy's ``num_threads``).
        into: what ``dest`` is, for the trace reason (``"pinned staging"``, ``"host buffer"``).
        url: the trace's path column (the backend's URL).

    Returns:
        ``int64`` array of bytes read per entry: short at end of file, ``-1`` where the file does not
        exist (deleted since its size was looked up: missing, as zarr says).

    Raises:
        ValueError: a read would overflow ``dest``.
        OSError: any other I/O error (the first one; every read has stopped touching ``dest``).
    """
    n = len(paths)
    offsets = np.asarray(offsets, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    dest_offsets = np.asarray(dest_offsets, dtype=np.int64)
    if not (len(offsets) == len(sizes) == len(dest_offsets) == n):
        raise ValueError(
            f"read_batch(): {n} paths but {len(offsets)} offsets, {len(sizes)} sizes, "
            f"{len(dest_offsets)} dest_offsets"
        )
    if n and int((dest_offsets + sizes.clip(0)).max()) > dest.nbytes:
        raise ValueError(f"read_batch(): reads overflow the destination of {dest.nbytes} bytes")
    t0 = time.perf_counter()
    threads = _threads(num_threads)
    # Reads larger than ``task_size`` are cut into pieces so that a few big reads (coalesced shard
    # ranges) still keep every thread busy; each piece opens the file itself.
    piece = max(1 << 20, policy.settings().task_size)
    cuts = np.maximum(1, -(-sizes.clip(0) // piece)) if n else np.zeros(0, dtype=np.int64)
    if n and int(cuts.max()) > 1:
        owner = np.repeat(np.arange(n), cuts)
        first = np.cumsum(cuts) - cuts
        k = np.arange(len(owner)) - first[owner]  # piece number within its read
        p_off = offsets[owner] + k * piece
        p_dst = dest_offsets[owner] + k * piece
        p_size = np.minimum(piece, sizes[owner] - k * piece)
    else:
        owner = np.arange(n)
        p_off, p_dst, p_size = offsets, dest_offsets, sizes
    m = len(owner)
    pgot = np.zeros(m, dtype=np.int64)
    view = memoryview(dest).cast("B")
    # Python ints once, not numpy scalars per file.
    offs, szs, dos = p_off.tolist(), p_size.tolist(), p_dst.tolist()
    pp = [paths[i] for i in owner.tolist()] if m != n else paths

    def run(g: range) -> None:
        op, pv, cl = os.open, os.preadv, os.close
        for i in g:
            size = szs[i]
            if size <= 0:
                continue
            try:
                fd = op(pp[i], _FLAGS)
            except _MISSING:
                pgot[i] = -1
                continue
            try:
                done = 0
                d0, off = dos[i], offs[i]
                while done < size:
                    k = pv(fd, [view[d0 + done : d0 + size]], off + done)
                    done += k
                    if k < size - done + k:  # short read of a regular file: end of file, no 2nd call
                        break
            finally:
                cl(fd)
            pgot[i] = done

    _run_groups(run, m, threads)
    if m == n:
        got = pgot
    else:
        # a read's count: its pieces' bytes up to the first short one; -1 when its file is gone
        got = np.zeros(n, dtype=np.int64)
        short = pgot < p_size
        first_short = np.full(n, m, dtype=np.int64)
        np.minimum.at(first_short, owner[short], np.flatnonzero(short))
        counted = np.arange(m) <= first_short[owner]
        np.add.at(got, owner[counted], pgot[counted].clip(0))
        got[owner[pgot < 0]] = -1
    _trace.record(
        "read",
        "posix",
        f"batch of {n} reads into {into}",
        int(got.clip(0).sum()),
        time.perf_counter() - t0,
        url,
    )
    return got


def local_paths(root: str, keys: Sequence[str], where: str) -> list[str]:
    """File paths of many keys under ``root``, validated like
    :func:`~gdsstore.engine.backend.check_key` (no escape from the root) with one scan of all keys.

    Raises:
        ValueError: naming ``where`` and the first bad key.
    """
    joined = "\n".join(keys)
    # Conservative one-pass test: anything unusual (NUL, backslash, empty/./.. segments, newlines
    # that split a key) goes through the exact per-key check, which raises for bad keys.
    wrapped = "/" + joined.replace("\n", "/\n/") + "/"
    if "\x00" in joined or "\\" in joined or "//" in wrapped or "/./" in wrapped or "/../" in wrapped:
        for k in keys:
            check_key(k, where)
        return [os.path.join(root, *k.rstrip("/").split("/")) if k.rstrip("/") else root for k in keys]
    prefix = root.rstrip(os.sep) + os.sep
    return [prefix + k for k in keys]
