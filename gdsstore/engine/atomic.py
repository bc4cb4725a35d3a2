"""Atomic local writes: a temporary file beside the target, published whole by a rename or a link.

Every local writer (the :class:`~gdsstore.engine.localfs.LocalBackend`, :func:`gdsstore.open`'s
writers, the fsspec file) publishes through here (zarr's ``_atomic_write`` and ``_safe_move`` in one
place): the value goes to a temporary file in the target's directory, then ``os.replace`` puts it in
place, so a reader (or a writer killed with SIGKILL) sees the old or the new value, never a mix.
Exclusive creates publish with ``os.link``, which fails when the target exists: two exclusive writers
can never both win.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import uuid
from collections.abc import Callable

from gdsstore import policy
from gdsstore.engine.local import LocalFile

__all__ = ["TMP_SUFFIX", "AtomicWriter", "atomic_copy", "fsync_dir", "is_tmp", "write_atomic"]

#: Suffix of in-flight temporary files. They are hidden from listings (a writer killed mid-``put``
#: leaves one behind; it must not show up as a key) and no key may take a temporary file's name.
TMP_SUFFIX = ".gdsstore-partial"

# Errors from os.link that mean "this filesystem has no hard links" (FAT, some FUSE/SMB mounts).
_NO_HARDLINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS}


#: The names temporary files are given (``.<name>.<hex>.gdsstore-partial``): only these are hidden and
#: reserved, so a key such as ``.gdsstore-partial`` itself stays an ordinary key.
_TMP_NAME = re.compile(r"\..+\.[0-9a-f]+" + re.escape(TMP_SUFFIX) + r"\Z")


def is_tmp(name: str) -> bool:
    """Whether ``name`` is a temporary file's name (hidden from listings, reserved as a key)."""
    return _TMP_NAME.match(name) is not None


def fsync_dir(path: str) -> None:
    """Make a rename in ``path`` durable (the directory entry, not only the file data)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
        self._tmp: str | None = _tmp_name(path)
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
