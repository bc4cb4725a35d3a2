"""Local directories as a :class:`~gdsstore.engine.backend.Backend`: :class:`LocalBackend`.

Keys are ``/``-separated paths under one root directory. Every key is checked by
:func:`~gdsstore.engine.backend.check_key` before any I/O (no ``..``, no absolute keys). Bytes move
through :class:`~gdsstore.engine.local.LocalFile` (the cuFile or POSIX route, chosen by the policy
and recorded in the trace), straight into host or device buffers.

Symbolic links inside the root: reads follow them, wherever they point (as zarr's ``LocalStore``
does); writes and deletes never go through a link that resolves outside the root (PermissionError);
``follow_symlinks=False`` refuses every key whose path passes through a link. Listings show links
to files as keys and never descend into links to directories.

Writes are atomic (:mod:`gdsstore.engine.atomic`: a temporary file in the key's directory, published
by ``os.replace``, or by ``os.link`` for exclusive creates). Batched reads of many keys land in slots
of one buffer (:meth:`LocalBackend.land`, through :func:`gdsstore.engine.batch.read_batch`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat as stat_mod
import time
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import numpy as np

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine import bounce, cuda
from gdsstore.engine.atomic import TMP_SUFFIX, AtomicWriter, is_tmp, write_atomic
from gdsstore.engine.backend import Backend, BatchResult, ObjectInfo, check_key, host_buffer
from gdsstore.engine.batch import piece_size, read_batch, read_objects, stat_batch
from gdsstore.engine.landing import MISSING_KEY, AddressTable, Alloc, Free, Landed, checked_sizes, slot_layout
from gdsstore.engine.local import LocalFile, check_mode
from gdsstore.engine.pool import run_pieces
from gdsstore.engine.ranges import ByteRange

__all__ = ["LocalBackend", "land_files", "local_paths"]


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _any_link(root: str, parts: list[str]) -> bool:
    """Whether a directory of ``root/parts...`` that exists is a symbolic link. Without one, the
    path resolves inside the root, whatever it resolves to: one ``lstat`` per level instead of two
    ``realpath`` walks from ``/`` per write."""
    path = root
    for part in parts:
        path = f"{path}{os.sep}{part}"
        try:
            if os.lstat(path).st_mode & 0o170000 == 0o120000:  # S_ISLNK
                return True
        except MISSING_KEY:
            return False  # nothing below a missing name exists: makedirs creates real directories
    return False


def _host_bytes(buf: Any) -> memoryview | None:
    """A byte view of a contiguous host buffer of at most ``task_size`` bytes (written in one
    ``pwrite`` by the calling thread); None for device memory or a value the file route cuts."""
    if hasattr(buf, "__cuda_array_interface__"):
        return None
    try:
        view = memoryview(buf).cast("B")
    except (TypeError, ValueError):  # not a buffer, or not contiguous: the file route says why
        return None
    return view if view.nbytes <= policy.settings().task_size else None


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


def _file_extents(paths: list[str], table: AddressTable, threads: int) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, sizes)`` to read from each file (``-1``: missing): no ``stat`` for known sizes or exact
    ranges, else one batched ``stat``."""
    n = len(paths)
    if table.expect is not None:
        return np.zeros(n, dtype=np.int64), np.asarray(table.expect, dtype=np.int64) + 1
    if table.exact and table.starts is not None:
        assert table.stops is not None
        offsets = np.asarray(table.starts, dtype=np.int64)
        return offsets, np.asarray(table.stops, dtype=np.int64) - offsets
    return table.clamp(stat_batch(paths, threads))


def land_files(
    root: str, url: str, table: AddressTable, alloc: Alloc, free: Free, device: int | None, where: str
) -> Landed:
    """Local files under ``root``: every item by :func:`gdsstore.engine.batch.read_batch` straight into
    its slot (``device``: on that GPU through the bounce ring's pinned slots, each copied while the next
    is read, with no host buffer as large as the table)."""
    paths = local_paths(root, table.keys, where)
    threads = policy.settings().num_threads
    offsets, sizes = _file_extents(paths, table, threads)
    slots, total = slot_layout(sizes)
    host, owner, dev = None, None, None
    try:
        if device is not None:
            dev, sink = _device_sink(device, total, threads)
            got = read_batch(paths, offsets, sizes, sink, slots, threads, url=url)
        else:
            host, owner = alloc(total)
            into = "pinned staging" if owner is not None else "host buffer"
            got = read_batch(paths, offsets, sizes, host, slots, threads, into=into, url=url)
        sizes = checked_sizes(table, offsets, sizes, got, where)
    except BaseException:
        free(owner)
        raise
    return Landed(host, slots, sizes, owner, dev)


def _device_sink(device: int, total: int, threads: int) -> tuple[Any, Any]:
    """``total`` bytes on GPU ``device`` and the bounce ring's sink that lands reads there."""
    cp = cuda.cupy_or_none()
    assert cp is not None
    slot, limit = bounce.bounce_slots(policy.settings())
    with cp.cuda.Device(device):
        dev = cp.empty(max(total, 1), dtype=cp.uint8)
    piece = piece_size(total, threads, slot)
    return dev, bounce.DeviceSink(device, int(dev.data.ptr), total, piece, slot, limit)


class LocalBackend(Backend):
    """A local directory as a backend.

    Args:
        root: the directory (need not exist yet; :meth:`mkdir` ``("")`` creates it).
        follow_symlinks: True (default): reads follow symbolic links, as zarr's ``LocalStore``
            does; writes and deletes refuse a link that resolves outside the root. False: every
            key whose path passes through a link below the root is refused (PermissionError).

    Examples:
        >>> import numpy as np, tempfile
        >>> b = LocalBackend(tempfile.mkdtemp())
        >>> b.put("a/b.bin", np.arange(4, dtype="u1"))
        >>> bytes(b.get("a/b.bin", lambda n: bytearray(n)))
        b'\\x00\\x01\\x02\\x03'
        >>> list(b.list("a/"))
        ['a/b.bin']
    """

    def __init__(self, root: str | os.PathLike[str], *, follow_symlinks: bool = True) -> None:
        if not isinstance(follow_symlinks, bool):
            raise TypeError(
                f"LocalBackend(): follow_symlinks must be True or False, got {follow_symlinks!r}"
            )
        self.follow_symlinks = follow_symlinks
        root = os.fspath(root)
        if not isinstance(root, str):
            raise TypeError(f"LocalBackend(): root must be a str or os.PathLike, got {type(root).__name__}")
        if "\x00" in root:
            raise ValueError(f"LocalBackend(): root contains a NUL byte: {root!r}")
        # Absolute and normalised: equal roots compare equal, and a later chdir changes nothing.
        self.root = os.path.abspath(root) if root else os.getcwd()

    lands_on_device = True

    #: The storage options a local root takes (``GDSStore(path, storage_options={...})``).
    OPTIONS = ("follow_symlinks",)

    @classmethod
    def from_storage_options(cls, root: str | os.PathLike[str], options: dict[str, Any]) -> LocalBackend:
        """A backend for ``root`` from ``storage_options`` (only :attr:`OPTIONS`)."""
        unknown = sorted(set(options) - set(cls.OPTIONS))
        if unknown:
            raise TypeError(
                f"local roots take only the storage options {list(cls.OPTIONS)}, got {unknown}; "
                "the others are for URLs (s3://, http(s)://, webhdfs://)"
            )
        return cls(root, **options)

    @property
    def url(self) -> str:
        return "file://" + self.root.replace(os.sep, "/")

    # -- paths ---------------------------------------------------------------------------------------

    def _path(self, key: str, where: str, *, write: bool = False) -> str:
        """The path of ``key``, checked: a valid key, and the symlink rules (``write``: a write or delete)."""
        check_key(key, where)
        key = key.rstrip("/")
        if not key:
            return self.root
        parts = key.split("/")
        path = os.path.join(self.root, *parts)
        if not self.follow_symlinks:
            self._refuse_links(parts, key, where)
        elif write and len(parts) > 1 and _any_link(self.root, parts[:-1]):
            # A write or delete acts on the key's own name (a link there is replaced or removed, never
            # its target), so only the directories above it can lead out of the root.
            parent = os.path.realpath(os.path.dirname(path))
            if not _inside(parent, os.path.realpath(self.root)):
                raise PermissionError(
                    f"{where}: {key!r} goes through a symbolic link to {parent!r}, outside the root "
                    f"{self.root!r}; writes and deletes stay inside the root (reads follow links)"
                )
        return path

    def _refuse_links(self, parts: list[str], key: str, where: str) -> None:
        path = self.root
        for part in parts:
            path = os.path.join(path, part)
            try:
                if stat_mod.S_ISLNK(os.lstat(path).st_mode):
                    raise PermissionError(
                        f"{where}: {key!r} goes through the symbolic link {path!r}, and this store was "
                        "opened with follow_symlinks=False; pass follow_symlinks=True to follow links"
                    )
            except MISSING_KEY:
                return  # nothing below a missing name exists either

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, LocalBackend)
            and self.root == other.root
            and self.follow_symlinks == other.follow_symlinks
        )

    def __hash__(self) -> int:
        return hash(("LocalBackend", self.root, self.follow_symlinks))

    # -- reads ---------------------------------------------------------------------------------------

    def open(self, key: str, mode: str = "rb") -> LocalFile:
        """The engine file for ``key`` (:class:`~gdsstore.engine.local.LocalFile`)."""
        where = "LocalBackend.open()"
        check_mode(mode, where)
        path = self._path(key, where, write=mode != "rb")
        if not key.rstrip("/"):
            raise IsADirectoryError(f"{where}: the empty key is the root directory {self.url!r}, not a file")
        try:
            return LocalFile(path, mode)
        except NotADirectoryError:
            # A parent of the key is a file: the key cannot exist.
            raise FileNotFoundError(f"{where}: no such key {key!r} under {self.url}") from None
        except IsADirectoryError:
            # Directories are not keys (object stores have none): missing, as for every backend.
            raise FileNotFoundError(f"{where}: {key!r} is a directory, not a key, under {self.url}") from None

    def info(self, key: str) -> ObjectInfo:
        where = "LocalBackend.info()"
        path = self._path(key, where)
        try:
            st = os.stat(path)
        except MISSING_KEY:
            raise FileNotFoundError(f"{where}: no such key {key!r} under {self.url}") from None
        if stat_mod.S_ISDIR(st.st_mode):
            return ObjectInfo(key, st.st_size, "directory", st.st_mtime)
        return ObjectInfo(key, st.st_size, "file", st.st_mtime)

    def size(self, key: str) -> int:
        info = self.info(key)
        if info.type != "file":
            raise FileNotFoundError(
                f"LocalBackend.size(): {key!r} is a directory, not a key, under {self.url}"
            )
        return info.size

    def get_batch(self, keys: Sequence[str], ranges: Sequence[ByteRange | None]) -> BatchResult:
        """Many keys (or a range of each) into host buffers, one per key, as one batch of reads on
        the engine's threads (``gdsstore.engine.batch.read_objects``); missing keys are None."""
        where = "LocalBackend.get_batch()"
        if self.follow_symlinks and all(k and k[-1] != "/" for k in keys):
            paths = local_paths(self.root, keys, where)  # reads follow links: the key check is all
        else:
            paths = [self._path(k, where) for k in keys]
        return read_objects(paths, ranges, host_buffer, url=self.url)

    def land(
        self, table: AddressTable, alloc: Alloc, free: Free, *, device: int | None = None, room: int | None = None,
        where: str = "land()",
    ) -> Landed:
        """Files into their slots by :func:`land_files` (on a GPU: ``device``)."""
        return land_files(self.root, self.url, table, alloc, free, device, where)

    # -- writes --------------------------------------------------------------------------------------

    def put(self, key: str, buf: Any, *, exclusive: bool = False) -> None:
        """Write ``buf`` (host or device memory) as the whole value of ``key``, atomically.

        A temporary file in the key's directory, fsynced when the ``fsync`` setting is on,
        published by ``os.replace``; ``exclusive=True`` publishes with ``os.link`` instead, which
        fails if the key exists: FileExistsError, the value untouched. A host value of at most
        ``task_size`` bytes is one ``pwrite`` (:func:`write_atomic`); device memory and larger values
        go through :class:`AtomicWriter` (the policy's route, parallel pieces).
        """
        t0 = time.perf_counter()
        path, view = self._put(key, buf, exclusive, "LocalBackend.put()")
        if view is not None and _trace.active():
            _trace.record("write", "posix", "host buffer", view.nbytes, time.perf_counter() - t0, path)

    def put_batch(self, keys: Sequence[str], bufs: Sequence[Any], exclusive: Sequence[bool]) -> BatchResult:
        """:meth:`put` of many keys at once, ``num_threads`` at a time (each atomic on its own; one
        item's failure fails it alone); one trace event for the host values of the batch."""
        where = "LocalBackend.put_batch()"
        out = BatchResult(len(keys))
        sizes = [0] * len(keys)
        t0 = time.perf_counter()

        def put(i: int) -> int:
            try:
                view = self._put(keys[i], bufs[i], exclusive[i], where)[1]
                sizes[i] = view.nbytes if view is not None else 0
            except Exception as exc:
                out.errors[i] = exc
            return 0

        run_pieces([partial(put, i) for i in range(len(keys))], [0] * len(keys), policy.settings().num_threads).result()
        if _trace.active() and any(sizes):
            _trace.record("write", "posix", "batch of atomic writes from host buffers", sum(sizes),
                          time.perf_counter() - t0, self.url)
        return out

    def _put(self, key: str, buf: Any, exclusive: bool, where: str) -> tuple[str, memoryview | None]:
        """One atomic put; returns the path and, for a host value written in one call, its bytes."""
        path = self._path(key, where, write=True)
        if not key.rstrip("/") or key.endswith("/"):
            raise ValueError(f"{where}: invalid key {key!r}: a value needs a file name")
        if is_tmp(os.path.basename(path)):
            raise ValueError(f"{where}: invalid key {key!r}: names of the form .<name>.<hex>{TMP_SUFFIX} are "
                             "reserved for temporary files")
        view = _host_bytes(buf)
        for attempt in (0, 1):
            try:
                if view is not None:
                    write_atomic(path, view, exclusive=exclusive, where=where, name=key)
                else:
                    with AtomicWriter(path, exclusive=exclusive, where=where, name=key) as f:
                        f.write(buf)
                return path, view
            except (IsADirectoryError, FileExistsError):
                # Deleted keys leave empty directories behind; one at the key's name makes way once.
                if attempt or not (os.path.isdir(path) and not os.path.islink(path)):
                    raise
                self._drop_empty_dirs(path, key, where)
        raise AssertionError("unreachable")

    @staticmethod
    def _drop_empty_dirs(path: str, key: str, where: str) -> None:
        """Make way for a value at ``path``, where deleted keys left empty directories (no keys there:
        to the store the name is free). Only empty directories go; a file anywhere below stops it."""
        try:
            for dirpath, _, _ in os.walk(path, topdown=False):
                os.rmdir(dirpath)
        except OSError:
            raise IsADirectoryError(
                f"{where}: {key!r} is a directory with files under it; a key cannot also be a directory"
            ) from None

    def delete(self, key: str) -> None:
        """Delete ``key`` (a file, or a whole directory like zarr's LocalStore); missing is fine."""
        where = "LocalBackend.delete()"
        path = self._path(key, where, write=True)
        if not key.rstrip("/"):
            raise ValueError(f"{where}: refusing to delete the root {self.url!r}; use delete_prefix('')")
        try:
            st = os.lstat(path)
        except MISSING_KEY:
            return
        if stat_mod.S_ISDIR(st.st_mode):
            shutil.rmtree(path, ignore_errors=False)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def delete_prefix(self, prefix: str) -> None:
        """Delete everything under the directory ``prefix`` (``""``: the root's contents, not the root)."""
        where = "LocalBackend.delete_prefix()"
        path = self._path(prefix, where, write=True)
        if path == self.root:
            try:
                entries = list(os.scandir(path))
            except MISSING_KEY:
                return
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(e.path)
            return
        if os.path.islink(path):
            os.unlink(path)  # the link goes, never what it points to
        elif os.path.isdir(path):  # a file named like the prefix is not "under" it
            shutil.rmtree(path)

    def mkdir(self, key: str) -> None:
        os.makedirs(self._path(key, "LocalBackend.mkdir()", write=True), exist_ok=True)

    # -- listing -------------------------------------------------------------------------------------

    def _walk(self, top: str, rel: str, name_prefix: str = "") -> Iterator[str]:
        try:
            entries = list(os.scandir(top))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return
        for e in entries:
            if is_tmp(e.name) or not e.name.startswith(name_prefix):
                continue
            key = f"{rel}{e.name}"
            if e.is_dir(follow_symlinks=False):
                yield from self._walk(e.path, key + "/")
            elif not e.is_symlink() or (self.follow_symlinks and e.is_file()):
                yield key  # links to files are keys; links to directories are not walked (loops)

    def list(self, prefix: str = "") -> Iterator[str]:
        """Every key that starts with ``prefix`` (a plain string prefix, as in object stores)."""
        check_key(prefix, "LocalBackend.list()")
        # Walk only the deepest directory the prefix names; its last, partial name filters that level.
        dir_part, _, name_prefix = prefix.rpartition("/")
        top = self._path(dir_part, "LocalBackend.list()")
        yield from self._walk(top, f"{dir_part}/" if dir_part else "", name_prefix)

    def list_dir_info(self, prefix: str = "") -> Iterator[ObjectInfo]:
        base = prefix.rstrip("/")
        for name in self.list_dir(prefix):
            try:
                yield self.info(f"{base}/{name}" if base else name)
            except FileNotFoundError:  # removed since the listing
                continue

    def list_dir_of_keys(self, prefix: str = "") -> Iterator[str]:
        # A directory left empty by deletes is no prefix of a key: an object store would not list it.
        for e in self._dir_entries(prefix, "LocalBackend.list_dir_of_keys()"):
            if not e.is_dir(follow_symlinks=False) or next(self._walk(e.path, ""), None) is not None:
                yield e.name

    def list_dir(self, prefix: str = "") -> Iterator[str]:
        """Names of the files and directories directly under the directory ``prefix``."""
        for e in self._dir_entries(prefix, "LocalBackend.list_dir()"):
            yield e.name

    def _dir_entries(self, prefix: str, where: str) -> Sequence[os.DirEntry[str]]:
        """The entries directly under ``prefix`` that are listed: links only with ``follow_symlinks``, never
        a writer's temporary file."""
        path = self._path(prefix, where)
        try:
            entries = list(os.scandir(path))
        except MISSING_KEY:
            return []
        return [e for e in entries if (self.follow_symlinks or not e.is_symlink()) and not is_tmp(e.name)]
