"""The ``gds`` fsspec filesystem: local files and chained remote URLs through the gdsstore engine.

Registered as the fsspec protocol ``gds`` (entry point ``fsspec.specs``)::

    fs = fsspec.filesystem("gds")                          # local files, cuFile/POSIX engine
    fs.cat_file("/data/x.bin", start=0, end=100)
    fsspec.open("gds:///data/x.bin")
    fsspec.open("gds::s3://bucket/key", s3={"endpoint_url": "http://127.0.0.1:9000"})
    fsspec.open("gds::https://host/data/x.bin")            # remote range reader
    fs.read_array("/data/x.bin", 0, 1 << 20, device=True)  # cupy array, straight into device memory

:class:`GDSFileSystem` (an fsspec ``AsyncFileSystem``) is paired with
:class:`~gdsstore.adapters.fsspec.file.GDSFile`; paths become engine backends and keys in
:mod:`~gdsstore.adapters.fsspec.paths`. For local paths ``fsspec.filesystem("gds")`` returns
:class:`GDSLocalFileSystem`, the same class that is *also* an
``fsspec.implementations.local.LocalFileSystem``: cuDF hands paths of such filesystems straight to
libcudf, whose own GPUDirect reader (KvikIO) then moves the bytes into device memory; those reads
are libcudf's, so gdsstore's trace does not see them.

Blocking work sits in the sync methods (they call the engine directly); each async ``_method``
runs its sync twin through ``asyncio.to_thread`` (zarr's LocalStore pattern), so zarr's
``FsspecStore`` and fsspec's bulk operations (``cat``/``copy``/``put``/``get``/``find``) overlap
many files on threads.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from fsspec.asyn import AsyncFileSystem
from fsspec.core import has_magic
from fsspec.implementations.chained import ChainedFileSystem
from fsspec.implementations.local import LocalFileSystem

from gdsstore.adapters.fsspec import batch_reads, copies
from gdsstore.adapters.fsspec.batch_reads import MAX_GAP_LOCAL, MAX_GAP_REMOTE, cat_wave
from gdsstore.adapters.fsspec.file import (
    GDSFile,
    byte_range,
    get_bytes,
    open_for_reading,
    read_bytes,
    resolve_range,
)
from gdsstore.adapters.fsspec.listing import dir_entries, find_in_listing, path_info
from gdsstore.adapters.fsspec.paths import (
    LOCAL_PROTOCOLS,
    chain_target,
    literal_paths,
    locate_many,
    parent_path,
    split_path,
    strip_path,
    strip_paths,
    transport_options,
    unstrip_path,
)
from gdsstore.engine.backend import Backend, backend_for
from gdsstore.engine.pool import map_all

__all__ = ["GDSFileSystem", "GDSLocalFileSystem"]

logger = logging.getLogger("gdsstore.fsspec")

_IGNORED_OPTIONS = (
    "skip_instance_cache",
    "use_listings_cache",
    "listings_expiry_time",
    "max_paths",
    "auto_mkdir",
)

def _threaded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The async twin of a blocking method: runs it on a worker thread."""

    @functools.wraps(fn)
    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, self, *args, **kwargs)

    run.__name__ = run.__qualname__ = "_" + fn.__name__
    return run


class GDSFileSystem(AsyncFileSystem, ChainedFileSystem):  # type: ignore[misc]
    """fsspec filesystem over the gdsstore engine: local paths, or one chained remote protocol.

    Args:
        target_protocol: ``None``/``"file"`` for local files; ``"s3"``, ``"http"``, ``"https"``,
            ``"webhdfs"`` for chained URLs (set by fsspec from ``gds::s3://...``).
        target_options: options of the remote transport (``endpoint_url``, ``key``/``secret``,
            ``anon``, ``headers``, ``host``/``port``/``user`` for WebHDFS...); from
            ``storage_options={"s3": {...}}`` in chained URLs.
        fo: the chained target path (fsspec passes it; unused).
        **kwargs: fsspec options (``asynchronous``, ``loop``, ``skip_instance_cache``...).

    Missing paths raise FileNotFoundError. Device reads: :meth:`read_into`, :meth:`read_array`.
    """

    protocol: ClassVar[str | tuple[str, ...]] = "gds"  # type: ignore[misc]
    root_marker = "/"
    async_impl = True
    # The chained path does not change which filesystem this is.
    _strip_tokenize_options = ("fo",)

    def __new__(cls, *args: Any, **kwargs: Any) -> GDSFileSystem:
        # Local instances are also LocalFileSystems (cuDF gives their paths to libcudf directly).
        target = args[0] if args else kwargs.get("target_protocol")
        if cls is GDSFileSystem and target in LOCAL_PROTOCOLS:
            cls = GDSLocalFileSystem
        return super().__new__(cls)  # type: ignore[no-any-return]

    def __init__(
        self,
        target_protocol: str | None = None,
        target_options: dict[str, Any] | None = None,
        fo: str | None = None,
        **kwargs: Any,
    ) -> None:
        fsspec_kwargs = {k: kwargs.pop(k) for k in ("asynchronous", "loop", "batch_size") if k in kwargs}
        # Generic fsspec options with no meaning here: no listings cache, parents always created.
        for k in _IGNORED_OPTIONS:
            kwargs.pop(k, None)
        self.target_protocol, self.target_options = chain_target(target_protocol, target_options, kwargs)
        super().__init__(**fsspec_kwargs)
        self._backends: dict[str, Backend] = {}
        self._backends_lock = threading.Lock()
        if not self.is_local:
            # Paths of a chained filesystem are the target's paths ("bucket/key" for s3).
            self._strip_protocol: Callable[[Any], Any] = self._strip_remote  # type: ignore[method-assign]
            self._parent: Callable[[str], str] = self._parent_remote  # type: ignore[method-assign]

    # -- paths ----------------------------------------------------------------------------------------

    @property
    def is_local(self) -> bool:
        """Local files (``gds:///path``) rather than a chained remote protocol."""
        return self.target_protocol == "file"

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        """Local paths: absolute, posix, no protocol; ``"gds://"`` alone is empty (a chain's head)."""
        if isinstance(path, list | tuple):
            return [cls._strip_protocol(p) for p in path]
        return strip_path("file", path)

    def _strip_remote(self, path: Any) -> Any:
        """Remote paths as the target protocol writes them: ``bucket/key`` (s3), the URL (http)."""
        if isinstance(path, list | tuple):
            fast = strip_paths(self.target_protocol, list(path))
            return fast if fast is not None else [self._strip_remote(p) for p in path]
        return strip_path(self.target_protocol, path)

    def unstrip_protocol(self, name: str) -> str:
        # docstring inherited
        return unstrip_path(self.target_protocol, self._strip_protocol(name), self.target_options)

    def _parent_remote(self, path: str) -> str:
        return parent_path(self.target_protocol, self._strip_remote(path))

    def _locate(self, path: str) -> tuple[Backend, str]:
        """The backend holding ``path`` and the key of ``path`` in it."""
        return self._locate_stripped(self._strip_protocol(path))

    def _locate_stripped(self, path: str) -> tuple[Backend, str]:
        """:meth:`_locate` of a path as :meth:`_strip_protocol` returns it (``_expand_path``'s)."""
        root, key = split_path(self.target_protocol, path, self.target_options)
        return self._backend(root), key

    def _locate_many(self, paths: list[str]) -> tuple[list[Backend | None], list[str], dict[int, Exception]]:
        """:meth:`_locate_stripped` of many paths (:func:`~gdsstore.adapters.fsspec.paths.locate_many`)."""
        return locate_many(paths, self.target_protocol, self.target_options, self._backend, one_pass=not self.is_local)

    def _backend(self, root: str) -> Backend:
        """The engine backend of ``root``, made once per filesystem (it holds connection pools)."""
        with self._backends_lock:
            b = self._backends.get(root)
            if b is None:
                opts = None if self.is_local else transport_options(self.target_protocol, self.target_options)
                b = self._backends[root] = backend_for(root, opts)
                logger.debug("gds: %r for %s paths", b, self.target_protocol)
            return b

    # -- metadata -------------------------------------------------------------------------------------

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        """``{"name", "size", "type"}`` (``mtime`` where known). Raises FileNotFoundError."""
        path = self._strip_protocol(path)
        backend, key = self._locate(path)
        return path_info(backend, key, path)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        """Entries directly under the directory ``path`` (a file lists itself)."""
        path = self._strip_protocol(path)
        backend, key = self._locate(path)
        entries = dir_entries(backend, key, path, detail)
        if not entries:
            inf = self.info(path)  # a file, an empty directory, or FileNotFoundError
            if inf["type"] != "directory":
                return [inf if detail else path]
            return []
        return entries if detail else sorted(entries)

    async def _find(
        self, path: str, maxdepth: int | None = None, withdirs: bool = False, **kwargs: Any
    ) -> Any:
        # Object stores list a whole prefix in one paged request; walking it level by level would
        # cost a listing per "directory" and a HEAD per entry.
        if self.is_local or not self._locate(self._strip_protocol(path))[0].listable:
            return await super()._find(path, maxdepth=maxdepth, withdirs=withdirs, **kwargs)
        return await asyncio.to_thread(self._find_flat, path, maxdepth, withdirs, kwargs.get("detail", False))

    def _find_flat(self, path: str, maxdepth: int | None, withdirs: bool, detail: bool) -> Any:
        """``find`` over one flat listing of the prefix (remote)."""
        if maxdepth is not None and maxdepth < 1:
            raise ValueError(f"GDSFileSystem.find(): maxdepth must be at least 1, got {maxdepth}")
        stripped = self._strip_protocol(path)
        path = stripped.rstrip("/")
        backend, key = self._locate(stripped)
        out = find_in_listing(backend, key, stripped, maxdepth, withdirs, detail)
        if not out and key.rstrip("/"):
            try:
                inf = self.info(path)
            except FileNotFoundError:
                inf = None
            if inf is not None and inf["type"] == "file":
                out[path] = inf
        names = sorted(out)
        return {n: out[n] for n in names} if detail else names

    def exists(self, path: str, **kwargs: Any) -> bool:
        # docstring inherited
        try:
            self.info(path)
        except (FileNotFoundError, ValueError):
            return False
        return True

    def isdir(self, path: str) -> bool:
        # docstring inherited
        try:
            return bool(self.info(path)["type"] == "directory")
        except (FileNotFoundError, ValueError):
            return False

    def isfile(self, path: str) -> bool:
        # docstring inherited
        try:
            return bool(self.info(path)["type"] == "file")
        except (FileNotFoundError, ValueError):
            return False

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        """Create a directory (object stores: nothing to do). FileExistsError if it exists locally."""
        path = self._strip_protocol(path)
        if self.is_local:
            if os.path.exists(path):
                raise FileExistsError(f"GDSFileSystem.mkdir(): {path!r} exists")
            if create_parents:
                os.makedirs(path, exist_ok=True)
            else:
                os.mkdir(path)
            return
        backend, key = self._locate(path)
        backend.mkdir(key)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Create ``path`` and its parents (object stores: nothing to do)."""
        path = self._strip_protocol(path)
        if self.is_local:
            os.makedirs(path, exist_ok=exist_ok)
            return
        backend, key = self._locate(path)
        backend.mkdir(key)

    def rmdir(self, path: str) -> None:
        """Remove an empty directory (object stores: nothing to do)."""
        path = self._strip_protocol(path)
        if self.is_local:
            os.rmdir(path)

    def rm_file(self, path: str) -> None:
        """Delete one file. FileNotFoundError when it does not exist."""
        path = self._strip_protocol(path)
        inf = self.info(path)
        if inf["type"] == "directory":
            raise IsADirectoryError(
                f"GDSFileSystem.rm_file(): {path!r} is a directory; use rm(recursive=True)"
            )
        backend, key = self._locate(path)
        backend.delete(key)

    def _rm_expanded(self, paths: list[str]) -> None:
        if not self.is_local:
            # Object stores: a "directory" is a prefix with nothing to remove, and deleting a missing
            # key is no error, so every path is one DELETE, all at once.
            located = [bk for bk in map(self._locate, paths) if bk[1]]  # never the bucket itself
            map_all(lambda bk: bk[0].delete(bk[1]), located)
            return
        # Deepest first, so directories are empty when their turn comes.
        for p in sorted(paths, key=lambda p: (p.count("/"), p), reverse=True):
            try:
                inf = self.info(p)
            except FileNotFoundError:
                continue
            if inf["type"] == "directory":
                self.rmdir(p)
            else:
                backend, key = self._locate(p)
                backend.delete(key)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        """Delete files (and directories with ``recursive=True``)."""
        if self._rm_tree(path, recursive, maxdepth):
            return
        self._rm_expanded(self.expand_path(path, recursive=recursive, maxdepth=maxdepth))

    def _rm_tree(self, path: Any, recursive: bool, maxdepth: int | None) -> bool:
        """Remote ``rm(dir, recursive=True)`` as one prefix delete; False where it does not apply."""
        if (
            self.is_local
            or not recursive
            or maxdepth is not None
            or not isinstance(path, str)
            or has_magic(path)
        ):
            return False
        path = self._strip_protocol(path)
        backend, key = self._locate(path)
        key = key.rstrip("/")
        if not key or not backend.listable:
            return False
        if next(iter(backend.list(f"{key}/")), None) is not None:
            backend.delete_prefix(key)  # batched deletes (S3: DeleteObjects, 1000 keys a request)
        elif not backend.exists(key):
            raise FileNotFoundError(f"GDSFileSystem.rm(): no such file or directory: {path!r}")
        backend.delete(key)
        return True

    async def _rm(
        self, path: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any
    ) -> None:
        if await asyncio.to_thread(self._rm_tree, path, recursive, maxdepth):
            return
        paths = await self._expand_path(path, recursive=recursive, maxdepth=maxdepth)
        await asyncio.to_thread(self._rm_expanded, paths)

    def touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        """Create an empty file (or, locally with ``truncate=False``, update its mtime)."""
        if truncate or not self.exists(path):
            self.pipe_file(path, b"")
        elif self.is_local:
            os.utime(self._strip_protocol(path))
        else:
            raise NotImplementedError("GDSFileSystem.touch(): truncate=False on object stores")

    def created(self, path: str) -> Any:
        # docstring inherited
        return self.modified(path)

    def modified(self, path: str) -> Any:
        # docstring inherited
        import datetime

        mtime = self.info(path).get("mtime")
        if mtime is None:
            raise NotImplementedError(f"GDSFileSystem.modified(): no mtime for {path!r}")
        return datetime.datetime.fromtimestamp(mtime, tz=datetime.UTC)

    # -- reads ----------------------------------------------------------------------------------------

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        """Bytes ``[start, end)`` of ``path`` (None: from the start / to the end; negative: from the end).

        Remote objects: one GET, no size lookup first (unless ``end`` is negative or ``start`` is with an ``end``).
        """
        path = self._strip_protocol(path)
        backend, key = self._locate(path)
        br = byte_range(start, end)
        if backend.waves and br is not False:
            return get_bytes(backend, key, path, br)
        with open_for_reading(backend, key, path, "GDSFileSystem.cat_file()") as f:
            offset, nbytes = resolve_range(start, end, f.size)
            return read_bytes(f, offset, nbytes, f"GDSFileSystem.cat_file({path!r})")

    async def _cat(
        self, path: Any, recursive: bool = False, on_error: str = "raise", batch_size: int | None = None,
        **kwargs: Any,
    ) -> Any:
        """Whole files: remote ones in one wave of concurrent GETs (no size lookups), else fsspec's way."""
        if self.is_local or kwargs:
            return await super()._cat(path, recursive, on_error, batch_size, **kwargs)
        if isinstance(path, list) and not recursive and literal_paths(path):  # _expand_path's answer, made at once
            paths = sorted(set(self._strip_protocol(path)))
            if not paths:
                raise FileNotFoundError(path)
        else:
            paths = await self._expand_path(path, recursive=recursive)
        out = await asyncio.to_thread(cat_wave, self._locate_many, paths)  # _expand_path stripped them
        if on_error == "raise":
            for x in out:
                if isinstance(x, BaseException):
                    raise x
        if len(paths) > 1 or isinstance(path, list) or paths[0] != self._strip_protocol(path):
            return {k: v for k, v in zip(paths, out) if on_error != "omit" or not isinstance(v, BaseException)}
        return out[0]

    def cat_ranges(
        self,
        paths: list[str],
        starts: int | list[int | None] | None,
        ends: int | list[int | None] | None,
        max_gap: int | None = None,
        on_error: str = "return",
        **kwargs: Any,
    ) -> list[Any]:
        """Many byte ranges of many files; nearby ranges of one file become one engine read.

        Ranges of one file closer than ``max_gap`` bytes (default 64 KiB locally, 1 MiB remotely)
        are read as one range (up to 64 MiB) and sliced, and every read of a batch runs at once
        on the engine's threads. ``on_error="return"`` puts a failed range's exception in its place.
        """
        if not isinstance(paths, list):
            raise TypeError(f"GDSFileSystem.cat_ranges(): `paths` must be a list, got {type(paths).__name__}")
        n = len(paths)
        item_starts = list(starts) if isinstance(starts, Iterable) else [starts] * n
        item_ends = list(ends) if isinstance(ends, Iterable) else [ends] * n
        if len(item_starts) != n or len(item_ends) != n:
            raise ValueError(
                f"GDSFileSystem.cat_ranges(): {n} paths but {len(item_starts)} starts and {len(item_ends)} ends"
            )
        gap = max_gap if max_gap is not None else (MAX_GAP_LOCAL if self.is_local else MAX_GAP_REMOTE)
        stripped = [self._strip_protocol(p) for p in paths]
        out = batch_reads.cat_ranges(self._locate, self._locate_many, stripped, item_starts, item_ends, gap,
                                     waves=not self.is_local)
        if on_error != "return":
            for x in out:
                if isinstance(x, BaseException):
                    raise x
        return out

    def read_into(self, path: str, buf: Any, start: int = 0, size: int | None = None) -> int:
        """Read ``path`` from byte ``start`` into ``buf`` through the engine; returns bytes read.

        ``buf`` is host memory (numpy, bytearray) or device memory (cupy, anything with
        ``__cuda_array_interface__``): device buffers are filled by the engine's cuFile or POSIX
        device route (local) or the remote range reader, never through an intermediate ``bytes``.
        Reads ``size`` bytes (default: the buffer's size), fewer at end of file.

        Examples:
            >>> import cupy, fsspec  # doctest: +SKIP
            >>> fs = fsspec.filesystem("gds")  # doctest: +SKIP
            >>> buf = cupy.empty(1 << 20, dtype="u1")  # doctest: +SKIP
            >>> fs.read_into("/data/x.bin", buf, start=4096)  # doctest: +SKIP
            1048576
        """
        path = self._strip_protocol(path)
        backend, key = self._locate(path)
        with open_for_reading(backend, key, path, "GDSFileSystem.read_into()") as f:
            return int(f.read(buf, size, start))

    def read_array(self, path: str, start: int = 0, end: int | None = None, *, device: bool = True) -> Any:
        """Bytes ``[start, end)`` of ``path`` as a 1-D ``uint8`` array: cupy (``device=True``) or numpy.

        The device array is filled by the engine directly (see :meth:`read_into`).
        """
        path = self._strip_protocol(path)
        backend, key = self._locate(path)
        with open_for_reading(backend, key, path, "GDSFileSystem.read_array()") as f:
            offset, nbytes = resolve_range(start, end, f.size)
            if device:
                from gdsstore._optional import require

                cp = require("cupy", purpose="GDSFileSystem.read_array(device=True)")
                arr = cp.empty(nbytes, dtype="u1")
            else:
                import numpy as np

                arr = np.empty(nbytes, dtype="u1")
            got = f.read(arr, nbytes, offset) if nbytes else 0
            if got != nbytes:
                raise OSError(f"GDSFileSystem.read_array(): short read of {path!r}: {got} of {nbytes} bytes")
            return arr

    def get_file(
        self, rpath: str, lpath: str, callback: Any = None, outfile: Any = None, **kwargs: Any
    ) -> None:
        """Copy one file of this filesystem to the local path ``lpath`` (a directory: created)."""
        copies.get_file(self, self._strip_protocol(rpath), lpath, outfile)

    # -- writes ---------------------------------------------------------------------------------------

    def pipe_file(self, path: str, value: Any, mode: str = "overwrite", **kwargs: Any) -> None:
        """Write ``value`` (bytes, host or device buffer) as the whole file, atomically.

        ``mode="create"``: FileExistsError if ``path`` exists (and nothing is written).
        """
        if mode not in ("overwrite", "create"):
            raise ValueError(f"GDSFileSystem.pipe_file(): mode must be 'overwrite' or 'create', got {mode!r}")
        path = self._strip_protocol(path)
        backend, key = self._locate(path)
        if self.is_local and os.path.isdir(path):
            raise IsADirectoryError(f"GDSFileSystem.pipe_file(): {path!r} is a directory")
        backend.put(key, value, exclusive=mode == "create")

    def put_file(
        self, lpath: str, rpath: str, callback: Any = None, mode: str = "overwrite", **kwargs: Any
    ) -> None:
        """Copy the local file ``lpath`` to ``rpath`` (a local directory: created)."""
        copies.put_file(self, lpath, self._strip_protocol(rpath), mode)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        """Copy one file within this filesystem (a directory: created at ``path2``)."""
        copies.cp_file(self, self._strip_protocol(path1), self._strip_protocol(path2))

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | str | None = None,
        autocommit: bool = True,
        cache_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> GDSFile:
        # docstring inherited
        return GDSFile(
            self, path, mode, block_size or "default", autocommit, cache_options=cache_options, **kwargs
        )

    # -- async twins: each runs its blocking method on a thread ---------------------------------------

    _info = _threaded(info)
    _ls = _threaded(ls)
    _exists = _threaded(exists)
    _isdir = _threaded(isdir)
    _isfile = _threaded(isfile)
    _mkdir = _threaded(mkdir)
    _makedirs = _threaded(makedirs)
    _rmdir = _threaded(rmdir)
    _rm_file = _threaded(rm_file)
    _touch = _threaded(touch)
    _cat_file = _threaded(cat_file)
    _pipe_file = _threaded(pipe_file)
    _get_file = _threaded(get_file)
    _put_file = _threaded(put_file)
    _cp_file = _threaded(cp_file)
    _read_into = _threaded(read_into)
    _read_array = _threaded(read_array)

    async def _cat_ranges(
        self,
        paths: list[str],
        starts: Any,
        ends: Any,
        max_gap: int | None = None,
        batch_size: int | None = None,
        on_error: str = "return",
        **kwargs: Any,
    ) -> list[Any]:
        return await asyncio.to_thread(self.cat_ranges, paths, starts, ends, max_gap, on_error)

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuild through GDSFileSystem: the same token (and cached instance) as the original call.
        from fsspec.spec import make_instance

        return make_instance, (GDSFileSystem, self.storage_args, self.storage_options)

    def __repr__(self) -> str:
        if self.is_local:
            return f"{type(self).__name__}()"
        return f"{type(self).__name__}(target_protocol={self.target_protocol!r})"


class GDSLocalFileSystem(GDSFileSystem, LocalFileSystem):  # type: ignore[misc]
    """:class:`GDSFileSystem` for local files, also an fsspec ``LocalFileSystem``.

    ``fsspec.filesystem("gds")`` returns one. Being a ``LocalFileSystem`` lets readers that
    special-case local files (cuDF hands such paths to libcudf, which reads them with its own
    GPUDirect Storage path) take their fastest route; every I/O method is gdsstore's own.
    """

    protocol = "gds"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.auto_mkdir = True

    @property
    def fsid(self) -> str:
        return "gds-local"

    def _isfilestore(self) -> bool:
        return True
