"""Local directories as a :class:`~gdsstore.engine.backend.Backend`: :class:`LocalBackend`.

Keys are ``/``-separated paths under one root directory. Every key is checked by
:func:`~gdsstore.engine.backend.check_key` before any I/O, so nothing outside the root is read,
created or deleted. Bytes move through :class:`~gdsstore.engine.local.LocalFile` (the cuFile or
POSIX route, chosen by the policy and recorded in the trace), straight into host or device buffers.

Writes are atomic: the value goes to a temporary file in the key's directory, then ``os.replace``
puts it in place, so a reader (or a writer killed with SIGKILL) leaves the old or the new value,
never a mix. ``put(..., exclusive=True)`` publishes with ``os.link``, which fails when the key
exists: two exclusive writers can never both win.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat as stat_mod
import uuid
from collections.abc import Iterator
from typing import Any

from gdsstore import policy
from gdsstore.engine.backend import Backend, ObjectInfo, check_key
from gdsstore.engine.local import LocalFile, check_mode

__all__ = ["TMP_SUFFIX", "LocalBackend"]

#: Suffix of in-flight temporary files. They are hidden from listings (a writer killed mid-``put``
#: leaves one behind; it must not show up as a key) and keys may not end with it.
TMP_SUFFIX = ".gdsstore-partial"

# Errors from os.link that mean "this filesystem has no hard links" (FAT, some FUSE/SMB mounts).
_NO_HARDLINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS}


def _is_tmp(name: str) -> bool:
    return name.endswith(TMP_SUFFIX)


def fsync_dir(path: str) -> None:
    """Make a rename in ``path`` durable (the directory entry, not only the file data)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: str, buf: Any, *, mode: str, fsync: bool) -> int:
    """Write all of ``buf`` (host or device memory) to ``path`` through the engine."""
    with LocalFile(path, mode) as f:
        n = f.write(buf)
        if fsync:
            f.fsync()
    return n


class LocalBackend(Backend):
    """A local directory as a backend.

    Args:
        root: the directory (need not exist yet; :meth:`mkdir` ``("")`` creates it).

    Examples:
        >>> import numpy as np, tempfile
        >>> b = LocalBackend(tempfile.mkdtemp())
        >>> b.put("a/b.bin", np.arange(4, dtype="u1"))
        >>> bytes(b.get("a/b.bin", lambda n: bytearray(n)))
        b'\\x00\\x01\\x02\\x03'
        >>> list(b.list("a/"))
        ['a/b.bin']
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        root = os.fspath(root)
        if not isinstance(root, str):
            raise TypeError(f"LocalBackend(): root must be a str or os.PathLike, got {type(root).__name__}")
        if "\x00" in root:
            raise ValueError(f"LocalBackend(): root contains a NUL byte: {root!r}")
        # Absolute and normalised: equal roots compare equal, and a later chdir changes nothing.
        self.root = os.path.abspath(root) if root else os.getcwd()

    @property
    def url(self) -> str:
        return "file://" + self.root.replace(os.sep, "/")

    # -- paths ---------------------------------------------------------------------------------------

    def _path(self, key: str, where: str) -> str:
        check_key(key, where)
        key = key.rstrip("/")
        if not key:
            return self.root
        return os.path.join(self.root, *key.split("/"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalBackend) and self.root == other.root

    def __hash__(self) -> int:
        return hash(("LocalBackend", self.root))

    # -- reads ---------------------------------------------------------------------------------------

    def open(self, key: str, mode: str = "rb") -> LocalFile:
        """The engine file for ``key`` (:class:`~gdsstore.engine.local.LocalFile`)."""
        where = "LocalBackend.open()"
        check_mode(mode, where)
        path = self._path(key, where)
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
        except (FileNotFoundError, NotADirectoryError):
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

    # -- writes --------------------------------------------------------------------------------------

    def put(self, key: str, buf: Any, *, exclusive: bool = False) -> None:
        """Write ``buf`` (host or device memory) as the whole value of ``key``, atomically.

        The bytes go to ``.<name>.<uuid>.gdsstore-partial`` in the key's directory (same
        filesystem), are fsynced when the ``fsync`` setting is on, then ``os.replace`` publishes
        them. ``exclusive=True`` publishes with ``os.link`` instead, which fails if the key
        exists: FileExistsError, and the existing value is untouched.
        """
        where = "LocalBackend.put()"
        path = self._path(key, where)
        name = os.path.basename(path)
        if not key.rstrip("/") or key.endswith("/"):
            raise ValueError(f"{where}: invalid key {key!r}: a value needs a file name")
        if _is_tmp(name):
            raise ValueError(f"{where}: invalid key {key!r}: names ending in {TMP_SUFFIX!r} are reserved")
        fsync = policy.settings().fsync
        parent = os.path.dirname(path)
        try:
            os.makedirs(parent, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise NotADirectoryError(f"{where}: cannot create {key!r}: a parent of it is a file") from None
        if exclusive and os.path.lexists(path):
            raise FileExistsError(f"{where}: key {key!r} already exists")  # cheap early out; link decides
        tmp = os.path.join(parent, f".{name}.{uuid.uuid4().hex}{TMP_SUFFIX}")
        try:
            _write_file(tmp, buf, mode="xb", fsync=fsync)
            if exclusive:
                self._publish_exclusive(tmp, path, key, buf, fsync)
            else:
                os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        if fsync:
            fsync_dir(parent)

    def _publish_exclusive(self, tmp: str, path: str, key: str, buf: Any, fsync: bool) -> None:
        try:
            os.link(tmp, path)  # atomic, and fails with EEXIST: the one exclusive primitive we need
        except FileExistsError:
            raise FileExistsError(f"LocalBackend.put(): key {key!r} already exists") from None
        except OSError as exc:
            if exc.errno not in _NO_HARDLINKS:
                raise
            # No hard links here: O_EXCL still makes the create exclusive, but readers may see the
            # value while it is being written.
            try:
                _write_file(path, buf, mode="xb", fsync=fsync)
            except FileExistsError:
                raise FileExistsError(f"LocalBackend.put(): key {key!r} already exists") from None

    def delete(self, key: str) -> None:
        """Delete ``key`` (a file, or a whole directory like zarr's LocalStore); missing is fine."""
        where = "LocalBackend.delete()"
        path = self._path(key, where)
        if not key.rstrip("/"):
            raise ValueError(f"{where}: refusing to delete the root {self.url!r}; use delete_prefix('')")
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return
        if stat_mod.S_ISDIR(st.st_mode):
            shutil.rmtree(path, ignore_errors=False)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def delete_prefix(self, prefix: str) -> None:
        """Delete everything under the directory ``prefix`` (``""``: the root's contents, not the root)."""
        where = "LocalBackend.delete_prefix()"
        path = self._path(prefix, where)
        if path == self.root:
            try:
                entries = list(os.scandir(path))
            except (FileNotFoundError, NotADirectoryError):
                return
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(e.path)
            return
        # A file named like the prefix is not "under" it; a missing directory is nothing to do.
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)

    def mkdir(self, key: str) -> None:
        os.makedirs(self._path(key, "LocalBackend.mkdir()"), exist_ok=True)

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
            else:
                yield key

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

    def list_dir(self, prefix: str = "") -> Iterator[str]:
        """Names of the files and directories directly under the directory ``prefix``."""
        path = self._path(prefix, "LocalBackend.list_dir()")
        try:
            names = [e.name for e in os.scandir(path)]
        except (FileNotFoundError, NotADirectoryError):
            return
        for name in names:
            if not _is_tmp(name):
                yield name
