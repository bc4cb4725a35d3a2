"""Whole-file copies of the ``gds`` filesystem: ``get_file``, ``put_file`` and ``cp_file``.

Between two local paths the kernel copies the bytes (a temporary name, then a rename: atomic); a copy
from or to a remote object moves the whole file as ``bytes`` through the filesystem's reads and writes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gdsstore.adapters.fsspec.filesystem import GDSFileSystem


def copy_local(src: str, dst: str, *, exclusive: bool = False, where: str) -> None:
    """Copy the local file ``src`` to ``dst`` atomically (``exclusive``: FileExistsError if ``dst`` exists)."""
    from gdsstore.engine.atomic import atomic_copy  # local copies only: the entry point stays light

    atomic_copy(src, dst, exclusive=exclusive, where=where)


def get_file(fs: GDSFileSystem, rpath: str, lpath: str, outfile: Any) -> None:
    """Copy ``rpath`` (stripped) of ``fs`` to the local path ``lpath`` or into ``outfile``."""
    if fs.is_local and outfile is None and not os.path.isdir(rpath):
        copy_local(rpath, lpath, where="GDSFileSystem.get_file()")
        return
    data = _file_or_dir(fs, rpath)
    if data is None:
        os.makedirs(lpath, exist_ok=True)
        return
    if outfile is not None:
        outfile.write(data)
        return
    with open(lpath, "wb") as f:
        f.write(data)


def put_file(fs: GDSFileSystem, lpath: str, rpath: str, mode: str) -> None:
    """Copy the local file ``lpath`` to ``rpath`` (stripped) of ``fs``; a directory is created."""
    if os.path.isdir(lpath):
        fs.makedirs(rpath, exist_ok=True)
        return
    if fs.is_local:
        if os.path.isdir(rpath):
            raise IsADirectoryError(f"GDSFileSystem.put_file(): {rpath!r} is a directory")
        copy_local(lpath, rpath, exclusive=mode == "create", where="GDSFileSystem.put_file()")
        return
    with open(lpath, "rb") as f:
        fs.pipe_file(rpath, f.read(), mode=mode)


def cp_file(fs: GDSFileSystem, path1: str, path2: str) -> None:
    """Copy ``path1`` to ``path2`` (both stripped) within ``fs``; a directory is created."""
    if fs.is_local:
        if os.path.isdir(path1):
            os.makedirs(path2, exist_ok=True)
            return
        if not os.path.exists(path1):
            raise FileNotFoundError(f"GDSFileSystem.cp_file(): no such file: {path1!r}")
        copy_local(path1, path2, where="GDSFileSystem.cp_file()")
        return
    data = _file_or_dir(fs, path1)
    if data is None:
        fs.makedirs(path2, exist_ok=True)
    else:
        fs.pipe_file(path2, data)


def _file_or_dir(fs: GDSFileSystem, path: str) -> bytes | None:
    """The whole file, or None for a directory (remote: read first, list only if that fails)."""
    try:
        return fs.cat_file(path)
    except IsADirectoryError:
        return None
    except FileNotFoundError:
        if fs.isdir(path):
            return None
        raise
