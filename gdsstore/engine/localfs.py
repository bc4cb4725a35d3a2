"""Local directories as a :class:`~gdsstore.engine.backend.Backend`: :class:`LocalBackend`.

Keys are ``/``-separated paths under one root directory. Every key is checked by
:func:`~gdsstore.engine.backend.check_key` before any I/O (no ``..``, no absolute keys). Bytes move
through :class:`~gdsstore.engine.local.LocalFile` (the cuFile or POSIX route, chosen by the policy
and recorded in the trace), straight into host or device buffers.

Symbolic links inside the root: reads follow them, wherever they point (as zarr's ``LocalStore``
does); writes and deletes never go through a link that resolves outside the root (PermissionError);
``follow_symlinks=False`` refuses every key whose path passes through a link. Listings show links
to files as keys and never descend into links to directories.

Writes are atomic (:class:`AtomicWriter`, used by every local writer: this backend and the fsspec
file): the value goes to a temporary file in the key's directory, then ``os.replace`` puts it in
place, so a reader (or a writer killed with SIGKILL) sees the old or the new value, never a mix.
Exclusive creates publish with ``os.link``, which fails when the key exists: two exclusive writers
can never both win.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat as stat_mod
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine.backend import Backend, BatchResult, ObjectInfo, check_key, host_buffer
from gdsstore.engine.batch import land_files, local_paths, read_objects
from gdsstore.engine.landing import MISSING_KEY, AddressTable, Alloc, Free, Landed
from gdsstore.engine.local import LocalFile, check_mode
from gdsstore.engine.pool import run_pieces
from gdsstore.engine.ranges import ByteRange

__all__ = ["TMP_SUFFIX", "AtomicWriter", "LocalBackend", "atomic_copy", "fsync_dir", "write_atomic"]

#: Suffix of in-flight temporary files. They are hidden from listings (a writer killed mid-``put``
#: leaves one behind; it must not show up as a key) and no key may take a temporary file's name.
TMP_SUFFIX = ".gdsstore-partial"

# Errors from os.link that mean "this filesystem has no hard links" (FAT, some FUSE/SMB mounts).
_NO_HARDLINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS}


#: The names temporary files are given (``.<name>.<hex>.gdsstore-partial``): only these are hidden and
#: reserved, so a key such as ``.gdsstore-partial`` itself stays an ordinary key.
_TMP_NAME = re.compile(r"\..+\.[0-9a-f]+" + re.escape(TMP_SUFFIX) + r"\Z")


def _is_tmp(name: str) -> bool:
    return _TMP_NAME.match(name) is not None


def fsync_dir(path: str) -> None:
    """Make a rename in ``path`` durable (the directory entry, not only the file data)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


def _publish(tmp: str, path: str, exclusive: bool, exists: Callable[[], None]) -> None:
    """Put the finished file ``tmp`` at ``path``: ``os.replace``, or with ``exclusive`` a hard link
    that fails if ``path`` exists (``exists()`` raises FileExistsError). ``tmp`` stays for the caller
    to remove after a link."""
    if not exclusive:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # atomic, and fails with EEXIST: the one exclusive primitive we need
    except FileExistsError:
        exists()
    except OSError as exc:
        if exc.errno not in _NO_HARDLINKS:
            raise
        # No hard links here (FAT, some FUSE/SMB mounts): claim the name with O_EXCL, which still
        # lets exactly one writer win, then rename over the claim (readers may briefly see it empty).
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
        except FileExistsError:
            exists()
        os.replace(tmp, path)


def _tmp_name(path: str) -> str:
    head, name = os.path.split(path)
    return os.path.join(head, f".{name}.{uuid.uuid4().hex}{TMP_SUFFIX}")


def _open_tmp(tmp: str, parent: str, where: str, name: str) -> int:
    """Create the temporary file (and, the first time, its directory)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(tmp, flags, 0o666)
    except FileNotFoundError:
        try:
            os.makedirs(parent, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise NotADirectoryError(f"{where}: cannot create {name!r}: a parent of it is a file") from None
        return os.open(tmp, flags, 0o666)
    except NotADirectoryError:
        raise NotADirectoryError(f"{where}: cannot create {name!r}: a parent of it is a file") from None


def write_atomic(path: str, view: memoryview, *, exclusive: bool = False, where: str = "write",
                 name: str | None = None) -> None:
    """Write the host bytes ``view`` as the whole file ``path``, atomically: :class:`AtomicWriter`'s
    contract (a temporary file beside it, ``fsync`` when the setting asks, then ``os.replace`` or,
    with ``exclusive``, ``os.link``) in the fewest system calls, for values one ``pwrite`` writes.

    Raises:
        FileExistsError: ``exclusive`` and ``path`` exists (the value untouched).
        NotADirectoryError: a parent of ``path`` is a file.
    """
    name = path if name is None else name
    parent = os.path.dirname(path) or "."
    tmp = _tmp_name(path)
    fd = _open_tmp(tmp, parent, where, name)
    durable = policy.settings().fsync
    try:
        try:
            done = 0
            while done < view.nbytes:
                done += os.pwritev(fd, [view[done:]], done)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)

        def exists() -> None:
            raise FileExistsError(f"{where}: {name!r} already exists")

        _publish(tmp, path, exclusive, exists)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if exclusive:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)  # the link published it; the temporary name goes
    if durable:
        fsync_dir(parent)


class AtomicWriter:
    """A file written beside ``path`` and published there whole: readers see the old or the new
    value, never a mix (zarr's ``_atomic_write`` and ``_safe_move`` in one place).

    The bytes go to ``.<name>.<uuid>.gdsstore-partial`` in ``path``'s directory (same filesystem),
    through ``file`` (a :class:`~gdsstore.engine.local.LocalFile`, host or device buffers).
    :meth:`commit` fsyncs it when the ``fsync`` setting is on, then publishes it with ``os.replace``
    — or, with ``exclusive=True``, with ``os.link``, which fails if ``path`` exists (FileExistsError,
    the existing value untouched) — and fsyncs the directory. :meth:`discard` removes the temporary
    file. As a context manager it commits on success and discards on an exception.

    Args:
        path: the file to publish (its directory is created).
        exclusive: publish only if ``path`` does not exist.
        where: the caller, for error messages (``"LocalBackend.put()"``).
        name: what to call ``path`` in messages (a key; default: the path).

    Raises:
        FileExistsError: ``exclusive`` and ``path`` exists (now or at commit).
        NotADirectoryError: a parent of ``path`` is a file.

    Examples:
        >>> import os, tempfile, numpy as np
        >>> p = os.path.join(tempfile.mkdtemp(), "a", "x.bin")
        >>> with AtomicWriter(p) as f:
        ...     f.write(np.arange(3, dtype="u1"))
        3
        >>> open(p, "rb").read()
        b'\\x00\\x01\\x02'
    """

    def __init__(self, path: str, *, exclusive: bool = False, where: str = "write", name: str | None = None):
        self.path = path
        self.exclusive = exclusive
        self._where = where
        self._name = path if name is None else name
        self._fsync = policy.settings().fsync
        self._parent = os.path.dirname(path) or "."
        try:
            os.makedirs(self._parent, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise NotADirectoryError(f"{where}: cannot create {self._name!r}: a parent of it is a file") from None
        if exclusive and os.path.lexists(path):
            self._exists()  # cheap early out; the link at commit decides
        self._tmp: str | None = os.path.join(
            self._parent, f".{os.path.basename(path)}.{uuid.uuid4().hex}{TMP_SUFFIX}"
        )
        self.file: LocalFile | None = LocalFile(self._tmp, "xb")

    def _exists(self) -> None:
        raise FileExistsError(f"{self._where}: {self._name!r} already exists")

    def commit(self) -> None:
        """Publish the written bytes at ``path`` (once); the temporary file is gone afterwards."""
        file, self.file = self.file, None
        tmp, self._tmp = self._tmp, None
        if file is None or tmp is None:
            raise ValueError(f"{self._where}: {self._name!r} was already committed or discarded")
        try:
            try:
                if self._fsync:
                    file.fsync()
            finally:
                file.close()
            self._publish(tmp)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        if self._fsync:
            fsync_dir(self._parent)

    def _publish(self, tmp: str) -> None:
        _publish(tmp, self.path, self.exclusive, self._exists)

    def discard(self) -> None:
        """Drop the written bytes: nothing is published. Idempotent."""
        file, self.file = self.file, None
        tmp, self._tmp = self._tmp, None
        if file is not None:
            file.close()
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def copy_from(self, src: str) -> None:
        """Fill the temporary file with a copy of the file ``src`` (the kernel copies: no bytes
        through Python)."""
        if self._tmp is None:
            raise ValueError(f"{self._where}: {self._name!r} was already committed or discarded")
        shutil.copyfile(src, self._tmp)  # the same inode our file holds open: commit fsyncs it

    def __enter__(self) -> LocalFile:
        assert self.file is not None
        return self.file

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def atomic_copy(src: str, dst: str, *, exclusive: bool = False, where: str = "copy") -> None:
    """Copy the file ``src`` to ``dst`` through an :class:`AtomicWriter`: ``dst`` holds its old
    value or the whole copy, never part of it (``exclusive``: only if ``dst`` does not exist)."""
    writer = AtomicWriter(dst, exclusive=exclusive, where=where)
    try:
        writer.copy_from(src)
    except BaseException:
        writer.discard()
        raise
    writer.commit()


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
        """Files into their slots by :func:`~gdsstore.engine.batch.land_files` (on a GPU: ``device``)."""
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
        if _is_tmp(os.path.basename(path)):
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
            if _is_tmp(e.name) or not e.name.startswith(name_prefix):
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
        base = prefix.rstrip("/")
        for name in self.list_dir(prefix):
            path = self._path(f"{base}/{name}" if base else name, "LocalBackend.list_dir_of_keys()")
            if not os.path.isdir(path) or os.path.islink(path) or next(self._walk(path, ""), None) is not None:
                yield name

    def list_dir(self, prefix: str = "") -> Iterator[str]:
        """Names of the files and directories directly under the directory ``prefix``."""
        path = self._path(prefix, "LocalBackend.list_dir()")
        try:
            names = [e.name for e in os.scandir(path) if self.follow_symlinks or not e.is_symlink()]
        except MISSING_KEY:
            return
        for name in names:
            if not _is_tmp(name):
                yield name
