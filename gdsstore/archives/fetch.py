"""Landing archive chunks in one buffer: local files and remote objects, checked around each read.

A reference set's targets are local paths or ``http(s)://`` and ``s3://`` URLs (:func:`is_remote`).
:func:`land_chunks` plans a set of chunks' reads (coalesced, :func:`~gdsstore.archives.plan.plan_reads`)
and :func:`land` lands them in one host buffer through the engine's landing layer
(:func:`gdsstore.engine.landing.land`, one call per backend into its run of the buffer): the local files'
reads with the engine's batched reader, each remote root's as **one wave** (every range in flight at once,
no size lookup, bodies landing in place), never one request per chunk. A backend is made once per root
(``http://host:port``, ``s3://bucket``) from the caller's ``storage_options``, as
``gdsstore.GDSStore(root, storage_options=...)`` takes them.

A file changed since the references were opened fails the read, never mixes two versions
(:meth:`Targets.check`): local files by size and mtime, before and after the bytes are read; remote
objects by size and version (the ETag, else the modification time), taken with one ``HEAD`` the first time
a read touches the object and again after each read, unless every answer of that read carried the strong
ETag first seen (the native core's waves hand them back). Within one read the wave checks that every piece
of an object is of one version (ETag / ``If-Match``), and each range must come back whole.

Examples:
    >>> split_url("http://127.0.0.1:8080/data/a%20b.nc")
    ('http://127.0.0.1:8080', 'data/a b.nc')
    >>> split_url("s3://bucket/era5/t.nc")
    ('s3://bucket', 'era5/t.nc')
    >>> is_remote("https://example.org/a.nc"), is_remote("/data/a.nc")
    (True, False)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import numpy as np

from gdsstore import policy
from gdsstore.archives.plan import ReadPlan, plan_reads
from gdsstore.engine.backend import Backend, backend_for
from gdsstore.engine.landing import ALIGN, AddressTable, Landed, alloc_host, slot_layout
from gdsstore.engine.landing import land as land_table
from gdsstore.engine.pool import map_all
from gdsstore.errors import ArchiveChangedError, ChunkDecodeError

__all__ = [
    "MAX_GAP", "REMOTE_SCHEMES", "Targets", "chunk_ends", "chunk_positions", "is_remote", "land", "land_chunks",
    "pieces", "split_url",
]

#: Chunks at most this many bytes apart share one read (HDF5 interleaves small B-tree nodes).
MAX_GAP = 64 << 10

#: URL schemes read through the engine's remote backends (as waves).
REMOTE_SCHEMES = ("http", "https", "s3")

#: What a file was when first seen: its size and version (local: modification time in ns; remote: the
#: ETag, else Last-Modified or S3's modification time; ``None`` where the server tells none).
Stamp = tuple[int, Any]


def is_remote(target: str) -> bool:
    """Whether a reference target is a URL of a remote backend (:data:`REMOTE_SCHEMES`)."""
    return "://" in target and target.split("://", 1)[0].lower() in REMOTE_SCHEMES


def split_url(url: str) -> tuple[str, str]:
    """A remote target as its backend's root and the key under it (see the module's examples).

    Raises:
        NotImplementedError: a URL with a query or fragment (a presigned URL): not a key of a root.
    """
    p = urlsplit(url)
    if p.query or p.fragment:
        raise NotImplementedError(f"archive target {url!r}: URLs with a query or fragment are not read yet")
    return f"{p.scheme}://{p.netloc}", unquote(p.path).lstrip("/")


def chunk_ends(files: list[str], fids: np.ndarray, offs: np.ndarray, lens: np.ndarray) -> dict[str, int]:
    """Per file that ``fids`` (indexes into ``files``) touch: the end of its last chunk to read."""
    present = fids >= 0
    last = np.full(len(files), -1, dtype=np.int64)
    np.maximum.at(last, fids[present], offs[present] + lens[present])
    return {files[k]: v for k, v in enumerate(last.tolist()) if v >= 0}


def chunk_positions(rp: ReadPlan, read_pos: np.ndarray) -> np.ndarray:
    """Each chunk's first byte in the buffer once read ``k`` landed at ``read_pos[k]`` (``-1``: not read)."""
    if not len(rp.read_dest):
        return rp.chunk_pos.copy()
    read = np.searchsorted(rp.read_dest, rp.chunk_pos, side="right") - 1
    moved = read_pos[read.clip(0)] - rp.read_dest[read.clip(0)]
    return np.where(rp.chunk_pos >= 0, rp.chunk_pos + moved, -1)


class Targets:
    """The files a reference set points at: their stamps (:data:`Stamp`) and the remote backends.

    Args:
        files: the targets (local paths, remote URLs); local ones are stamped now.
        storage_options: passed to every remote backend (S3 ``endpoint_url``/``key``/``secret``, HTTP
            ``headers``...), as :class:`gdsstore.GDSStore` takes them.
    """

    def __init__(self, files: Iterable[str], storage_options: Mapping[str, Any] | None = None) -> None:
        self.storage_options = dict(storage_options or {})
        # The files as they are now: later reads fail if one changes (references carry no stamps).
        self.stamps: dict[str, Stamp] = {}
        for f in files:
            if not is_remote(f) and os.path.exists(f):
                self.stamps[f] = _local_stamp(f)
        self._backends: dict[str, Backend] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # Pickled (dask, multiprocessing) without the backends: their pooled connections stay here.
        return {"storage_options": self.storage_options, "stamps": self.stamps}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.storage_options, self.stamps = state["storage_options"], state["stamps"]
        self._backends, self._lock = {}, threading.Lock()

    def backend(self, root: str) -> Backend:
        """The backend of a remote root, or of local files (``""``: the file system's root), made on first
        use, then kept (its connections are pooled)."""
        with self._lock:
            b = self._backends.get(root)
            if b is None:
                b = self._backends[root] = backend_for(root, self.storage_options, read_only=True) if root else \
                    backend_for(os.sep, read_only=True)
            return b

    def size(self, target: str) -> int:
        """A target's size now (a ``HEAD`` for a remote object): for ``[url]`` whole-file references."""
        if not is_remote(target):
            return os.path.getsize(target)
        root, key = split_url(target)
        return self.backend(root).info(key).size

    def _answered(self, target: str, etag: str | None) -> bool:
        """Whether a read's answers for ``target`` all carried the strong ETag it was first seen with."""
        then = self.stamps.get(target)
        return then is not None and _strong(etag) is not None and _strong(etag) == _strong(then[1])

    def _now(self, target: str) -> Stamp:
        try:
            if not is_remote(target):
                return _local_stamp(target)
            root, key = split_url(target)
            info = self.backend(root).info(key)
        except FileNotFoundError as exc:
            raise ArchiveChangedError(f"{target}: referenced file is gone") from exc
        return info.size, info.etag or info.mtime  # the ETag sees a same-size rewrite in the same second

    def check(self, ends: Mapping[str, int], *, after: bool, seen: Mapping[str, str] | None = None) -> None:
        """Each file as when first seen, and long enough for its chunks (``ends``).

        Before a read (``after=False``) remote objects are looked at only the first time (their stamp
        is taken then); after it, every remote object read is looked at again (one concurrent ``HEAD``
        each), so the bytes just read are of the version first seen, except those whose answers all
        carried the strong ETag of their stamp (``seen``, from :func:`land`: the bytes are of that version).

        Raises:
            ArchiveChangedError: a file changed or is gone. ChunkDecodeError: a file too short.
        """
        seen = seen or {}
        todo = [p for p in ends if (after and not self._answered(p, seen.get(p))) or not is_remote(p)
                or p not in self.stamps]
        remote = [p for p in todo if is_remote(p)]
        now = dict(zip(remote, map_all(self._now, remote))) if remote else {}
        for p in todo:
            stamp = now[p] if p in now else self._now(p)
            then = self.stamps.setdefault(p, stamp)
            if stamp != then:
                raise ArchiveChangedError(
                    f"{p}: changed since its references were opened (size, mtime {then} -> {stamp}); "
                    "open the references again"
                )
            if ends[p] > stamp[0]:
                raise ChunkDecodeError(
                    f"{p}: truncated: chunks reach byte {ends[p]} but the file has {stamp[0]} bytes"
                )


def _strong(etag: Any) -> str | None:
    """A strong ETag without its quotes, else None (a weak one, a modification time, nothing)."""
    if not isinstance(etag, str) or not etag or etag.startswith("W/"):
        return None
    return etag.strip('"')


def _local_stamp(path: str) -> Stamp:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def land_chunks(
    targets: Targets, files: list[str], fids: np.ndarray, offs: np.ndarray, lens: np.ndarray, *, pinned: bool,
    extra: int = 0, where: str,
) -> Landed:
    """Land chunks (``files[fids[i]]``, ``lens[i]`` bytes at ``offs[i]``; ``fids[i] < 0``: nothing to read)
    in one host buffer (``pinned``: the pinned pool's), their reads coalesced (:func:`~.plan.plan_reads`),
    the files checked before and after (:meth:`Targets.check`: a read never mixes two versions).

    Returns:
        The chunks as items of one buffer (``-1``: not read), with ``extra`` bytes free after the last read
        (from ``plan.nbytes``, the :class:`~.plan.ReadPlan`'s size: where the caller puts inlined chunks).
    """
    rp = plan_reads(fids, offs, lens, max_gap=MAX_GAP)
    buf, owner = alloc_host(max(rp.nbytes + extra, 1), pinned)
    landed = Landed(buf, np.full(len(fids), -1), np.full(len(fids), -1), owner)
    try:
        ends = chunk_ends(files, fids, offs, lens)
        targets.check(ends, after=False)
        read_pos, seen = land(targets, files, rp, buf, where)
        targets.check(ends, after=True, seen=seen)  # a file rewritten during the read: fail, never mix
    except BaseException:
        landed.release()
        raise
    pos = chunk_positions(rp, read_pos)
    landed.offsets, landed.sizes = pos, np.where(pos >= 0, lens, -1)
    return landed


def land(targets: Targets, files: list[str], rp: ReadPlan, buf: np.ndarray, where: str) -> tuple[np.ndarray, dict[str, str]]:
    """Land the plan's reads in ``buf`` (``rp.nbytes`` bytes at least) through the engine's landing layer
    (:func:`gdsstore.engine.landing.land`): the local files' reads first, then each remote root's as one
    wave, every read in a slot of :func:`~gdsstore.engine.landing.slot_layout`.

    Returns:
        Each read's first byte in ``buf``, and the ETag every answer for a remote file carried, where its
        wave saw them all (for :meth:`Targets.check`).

    Raises:
        OSError: a short read, or a remote request failed for good (its URL and the reason).
        ArchiveChangedError: a file gone. ChunkDecodeError: a file shorter than its references.
    """
    paths = [files[i] for i in rp.read_file.tolist()]
    roots = [split_url(p)[0] if is_remote(p) else "" for p in paths]
    runs: dict[str, list[int]] = {}
    for k in sorted(range(len(paths)), key=lambda k: (roots[k] != "", roots[k])):  # local, then one run per root
        runs.setdefault(roots[k], []).append(k)
    order = np.array([k for run in runs.values() for k in run], dtype=np.int64)
    read_pos = np.zeros(len(paths), dtype=np.int64)
    read_pos[order] = slot_layout(rp.read_nbytes[order])[0]
    seen: dict[str, str] = {}
    for root, run in runs.items():
        seen.update(_land_run(targets, root, [paths[k] for k in run], rp, np.array(run), buf, read_pos, where))
    return read_pos, seen


#: A wave's reads are cut into at least this many requests (each at least :data:`MIN_PIECE` bytes): a window's
#: reads are few and large (one per file, its chunks coalesced), and one connection lands only a share of
#: what many do (docs/performance.md).
PIECES_PER_WAVE = 64
MIN_PIECE = 1 << 20


def pieces(nbytes: np.ndarray, total: int, most: int) -> tuple[int, np.ndarray, np.ndarray]:
    """Reads of ``nbytes`` cut into requests of one size (a multiple of :data:`ALIGN`, at most ``most``, about
    ``total`` / :data:`PIECES_PER_WAVE` and at least :data:`MIN_PIECE`): ``(size, each request's read, its
    offset in it)``.

    Examples:
        >>> size, read, at = pieces(np.array([3 << 20, 100]), 4 << 20, 32 << 20)
        >>> size >> 20, read.tolist(), [a >> 20 for a in at.tolist()]
        (1, [0, 0, 0, 1], [0, 1, 2, 0])
    """
    size = min(max(-(-total // PIECES_PER_WAVE), MIN_PIECE), max(most, ALIGN))
    size = -(-size // ALIGN) * ALIGN
    counts = np.maximum(1, -(-nbytes // size))
    read = np.repeat(np.arange(len(nbytes)), counts)
    at = (np.arange(read.size) - (np.cumsum(counts) - counts)[read]) * size
    return size, read, at


def _land_run(
    targets: Targets, root: str, paths: list[str], rp: ReadPlan, reads: np.ndarray, buf: np.ndarray,
    read_pos: np.ndarray, where: str,
) -> dict[str, str]:
    """One backend's reads (``root`` ``""``: local files) as one landing: a remote root's reads cut into
    :func:`pieces` (many requests in flight), in their run of ``buf`` (in place when the backend lays its
    slots out as the plan did, else copied there once); returns the ETags per path the wave saw."""
    want = rp.read_nbytes[reads]
    if root:
        keys = [split_url(p)[1] for p in paths]
        size, read, at = pieces(want, int(want.sum()), policy.settings().remote_max_range_size)
    else:  # the engine's batched read cuts large reads itself
        keys = [os.path.abspath(p).lstrip(os.sep) for p in paths]
        size, read, at = int(want.max(initial=0)), np.arange(len(reads)), np.zeros(len(reads), dtype=np.int64)
    starts = rp.read_offset[reads][read] + at
    lens = np.minimum(want[read] - at, size)
    table = AddressTable([keys[k] for k in read.tolist()], starts, starts + lens, exact=True, max_request=size)
    base = int(read_pos[reads[0]])
    region = buf[base : base + slot_layout(want)[1]]
    landed = land_table(targets.backend(root), table, into=region, where=where)
    bad = np.flatnonzero(landed.sizes != lens)
    if bad.size:
        j = int(bad[0])
        name = paths[int(read[j])]
        if landed.sizes[j] < 0:
            raise ArchiveChangedError(f"{name}: referenced file is gone")
        raise ChunkDecodeError(f"{name}: truncated: {int(landed.sizes[j])} of {int(lens[j])} bytes at offset {int(starts[j])}")
    dest = read_pos[reads][read] + at
    if not (np.may_share_memory(landed.host, region) and (landed.offsets + base == dest).all()):
        host = np.array(landed.host, copy=True)  # laid out otherwise: copied out before overwriting
        for a, d, n in zip(landed.offsets.tolist(), dest.tolist(), lens.tolist()):
            buf[d : d + n] = host[a : a + n]
    return {p: landed.etags[k] for p, k in zip(paths, keys) if k in landed.etags}
