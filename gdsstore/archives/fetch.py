"""Landing a read plan's bytes in one buffer: local files and remote objects, checked around each read.

A reference set's targets are local paths or ``http(s)://`` and ``s3://`` URLs (:func:`is_remote`).
:func:`land` reads the reads of a :class:`~gdsstore.archives.plan.ReadPlan` into one host buffer: the
local ones with one call of the engine's batched reader, the remote ones as **one wave per backend**
(:meth:`gdsstore.engine.backend.Backend.get_many`: every range in flight at once, no size lookup,
bodies landing in place in the buffer), never one request per chunk. A backend is made once per root
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
from gdsstore.archives.plan import ALIGN, ReadPlan
from gdsstore.engine.backend import Backend, ByteRange, backend_for
from gdsstore.engine.batch import read_batch
from gdsstore.engine.pool import map_all
from gdsstore.errors import ArchiveChangedError, ChunkDecodeError

__all__ = [
    "REMOTE_SCHEMES", "Targets", "chunk_ends", "chunk_positions", "is_remote", "land", "pieces", "split_url",
]

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
        """The backend of a remote root (made on first use, then kept: its connections are pooled)."""
        with self._lock:
            b = self._backends.get(root)
            if b is None:
                b = self._backends[root] = backend_for(root, self.storage_options, read_only=True)
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


def land(
    targets: Targets, files: list[str], rp: ReadPlan, buf: np.ndarray, where: str
) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
    """Read the plan's reads into ``buf`` (``rp.nbytes`` bytes at least): local files first, then each
    remote backend's objects in one wave of their own, each read 64-byte aligned.

    Returns:
        Each read's first byte in ``buf``, the bytes it got (short only for a local file that is shorter
        than its references; a remote range that comes back short fails the wave), and the ETag every
        answer for a remote file carried, where its wave saw them all (for :meth:`Targets.check`).

    Raises:
        OSError: a remote request failed for good (its URL and the reason).
    """
    paths = [files[i] for i in rp.read_file.tolist()]
    remote = [is_remote(p) for p in paths]
    roots = [split_url(p)[0] if r else "" for p, r in zip(paths, remote)]
    order = sorted(range(len(paths)), key=lambda k: (remote[k], roots[k]))  # local, then one run per root
    padded = -(-rp.read_nbytes // ALIGN) * ALIGN
    read_pos = np.zeros(len(paths), dtype=np.int64)
    if order:
        read_pos[order] = np.concatenate([[0], np.cumsum(padded[order])[:-1]])
    got = rp.read_nbytes.copy()
    local = np.array([k for k in order if not remote[k]], dtype=np.int64)
    if len(local):
        got[local] = read_batch(
            [paths[k] for k in local.tolist()], rp.read_offset[local], rp.read_nbytes[local], buf, read_pos[local],
            url=where,
        )
    seen: dict[str, str] = {}
    for root in dict.fromkeys(roots[k] for k in order if remote[k]):
        wave = [k for k in order if roots[k] == root]
        keys = [split_url(paths[k])[1] for k in wave]
        etags = _wave(targets.backend(root), keys, rp, np.array(wave), buf, read_pos, where)
        seen.update((paths[k], etags[key]) for k, key in zip(wave, keys) if key in etags)
    return read_pos, got, seen


#: A wave's reads are cut into at least this many requests (each at least :data:`MIN_PIECE` bytes): a window's
#: reads are few and large (one per file, its chunks coalesced), and one connection lands about 1 GB/s.
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


def _wave(
    backend: Backend, keys: list[str], rp: ReadPlan, reads: np.ndarray, buf: np.ndarray, read_pos: np.ndarray,
    where: str,
) -> dict[str, str]:
    """One backend's reads as one wave (each cut into :func:`pieces`, so that many requests are in flight),
    landing in their run of ``buf`` (in place when the wave lays its slots out as this plan did, else
    copied there once); returns the wave's ETags per key (:attr:`~gdsstore.engine.backend.Wave.etags`)."""
    base = int(read_pos[reads[0]])
    end = int(read_pos[reads[-1]] + -(-rp.read_nbytes[reads[-1]] // ALIGN) * ALIGN)
    region = buf[base:end]

    def alloc(n: int) -> tuple[np.ndarray, Any]:
        # The wave's one buffer is this run of ours; a wave that wants more gets its own (then copied).
        return (region[:n], None) if n <= region.size else (np.empty(n, dtype=np.uint8), None)

    want = rp.read_nbytes[reads]
    size, read, at = pieces(want, int(want.sum()), policy.settings().remote_max_range_size)
    p_off = rp.read_offset[reads][read] + at
    p_len = np.minimum(want[read] - at, size)
    ranges = [ByteRange("range", int(o), int(o + n)) for o, n in zip(p_off.tolist(), p_len.tolist())]
    # max_bytes: the wave does not join the pieces again.
    w = backend.get_many([keys[k] for k in read.tolist()], ranges, alloc, exact=True, where=where, max_bytes=size)
    sizes = np.asarray(w.sizes, dtype=np.int64)
    if (sizes != p_len).any():
        j = int(np.flatnonzero(sizes != p_len)[0])
        url = f"{backend.url}/{keys[int(read[j])]}"
        if sizes[j] < 0:
            raise ArchiveChangedError(f"{url}: referenced file is gone")
        raise ChunkDecodeError(f"{url}: truncated: {int(sizes[j])} of {int(p_len[j])} bytes at offset {int(p_off[j])}")
    dest = read_pos[reads][read] + at
    got = np.asarray(w.offsets, dtype=np.int64) + base
    if np.may_share_memory(w.host, region) and (got == dest).all():
        return w.etags  # landed in place
    host = np.array(w.host, copy=True)  # the wave's layout differs from ours: copy out before overwriting
    for a, d, n in zip(w.offsets, dest.tolist(), p_len.tolist()):
        buf[d : d + n] = host[int(a) : int(a) + n]
    return w.etags
