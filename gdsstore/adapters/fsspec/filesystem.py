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
from typing import Any, ClassVar, Literal

from fsspec.asyn import AsyncFileSystem
from fsspec.core import has_magic
from fsspec.implementations.chained import ChainedFileSystem
from fsspec.implementations.local import LocalFileSystem

from gdsstore.adapters.fsspec.file import BytesBuilder, GDSFile, read_bytes, resolve_range
from gdsstore.adapters.fsspec.paths import (
    LOCAL_PROTOCOLS,
    REMOTE_PROTOCOLS,
    parent_path,
    split_path,
    strip_path,
    transport_options,
    unstrip_path,
)
from gdsstore.engine.backend import Backend, ObjectInfo, backend_for, host_alloc
from gdsstore.engine.pool import map_all
from gdsstore.engine.ranges import ByteRange, RangeRead, start_range_reads

__all__ = ["GDSFileSystem", "GDSLocalFileSystem"]

logger = logging.getLogger("gdsstore.fsspec")

_IGNORED_OPTIONS = (
    "skip_instance_cache",
    "use_listings_cache",
    "listings_expiry_time",
    "max_paths",
    "auto_mkdir",
)

# cat_ranges merges ranges of one file closer than this into one engine read: reading a small gap
# costs less than another request (a syscall locally, a round trip remotely).
_MAX_GAP_LOCAL = 64 << 10
_MAX_GAP_REMOTE = 1 << 20
_MAX_BLOCK = 64 << 20
# Files opened at once by cat_ranges (each holds a descriptor or a connection).
_OPEN_BATCH = 64


def _threaded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The async twin of a blocking method: runs it on a worker thread."""

    @functools.wraps(fn)
    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, self, *args, **kwargs)

    run.__name__ = run.__qualname__ = "_" + fn.__name__
    return run


def _atomic_copy(src: str, dst: str, *, exclusive: bool = False, where: str) -> None:
    from gdsstore.engine.localfs import atomic_copy  # local copies only: the entry point stays light

    atomic_copy(src, dst, exclusive=exclusive, where=where)


def _byte_range(start: int | None, end: int | None) -> ByteRange | Literal[False] | None:
    """fsspec's ``start``/``end`` as a range that needs no size lookup (None: the whole object), or
    False when it does (a negative ``end``, or a negative ``start`` with an ``end``).

    Examples:
        >>> _byte_range(None, None), _byte_range(-3, None).kind, _byte_range(2, 5).nbytes, _byte_range(0, -1)
        (None, 'suffix', 3, False)
    """
    if start is not None and start < 0:
        return ByteRange("suffix", -start) if end is None else False
    if end is not None and end < 0:
        return False
    a = start or 0
    if end is None:
        return None if a == 0 else ByteRange("offset", a)
    return ByteRange("range", a, max(a, end))


def _view(b: BytesBuilder) -> memoryview:
    return b.view


def _info_dict(name: str, oi: ObjectInfo) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "size": oi.size if oi.type == "file" else 0, "type": oi.type}
    if oi.mtime is not None:
        out["mtime"] = oi.mtime
    return out


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
        proto = None if target_protocol in LOCAL_PROTOCOLS else target_protocol
        opts = dict(target_options or {})
        if proto is None:
            if opts or kwargs:
                raise TypeError(
                    f"GDSFileSystem(): local files take no storage options, got {sorted({**opts, **kwargs})}"
                )
            self.target_protocol = "file"
        else:
            if proto not in REMOTE_PROTOCOLS:
                raise ValueError(
                    f"GDSFileSystem(): unsupported target_protocol {proto!r}; use one of "
                    f"file, {', '.join(REMOTE_PROTOCOLS)}"
                )
            # Options given to gds itself (gds::s3 with storage_options={...}) go to the transport.
            opts.update(kwargs)
            self.target_protocol = proto
        self.target_options = opts
        super().__init__(**fsspec_kwargs)
        self._backends: dict[str, Backend] = {}
        self._backends_lock = threading.Lock()
        if proto is not None:
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
            return [self._strip_remote(p) for p in path]
        return strip_path(self.target_protocol, path)

    def unstrip_protocol(self, name: str) -> str:
        # docstring inherited
        return unstrip_path(self.target_protocol, self._strip_protocol(name), self.target_options)

    def _parent_remote(self, path: str) -> str:
        return parent_path(self.target_protocol, self._strip_remote(path))

    def _locate(self, path: str) -> tuple[Backend, str]:
        """The backend holding ``path`` and the key of ``path`` in it."""
        root, key = split_path(self.target_protocol, self._strip_protocol(path), self.target_options)
        return self._backend(root), key

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
        try:
            oi = backend.info(key)
        except FileNotFoundError:
            # Object stores have no directory objects: a prefix with keys under it is a directory.
            if key and backend.listable and next(iter(backend.list_dir(key.rstrip("/"))), None) is not None:
                return {"name": path, "size": 0, "type": "directory"}
            raise FileNotFoundError(f"GDSFileSystem.info(): no such file or directory: {path!r}") from None
        return _info_dict(path, oi)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        """Entries directly under the directory ``path`` (a file lists itself)."""
        path = self._strip_protocol(path)
        backend, key = self._locate(path)
        prefix = path if path.endswith("/") or not path else path + "/"
        if detail:
            # Sizes and types from the listing itself (S3: no HEAD per entry).
            infos = list(backend.list_dir_info(key.rstrip("/"))) if backend.listable else []
            entries: list[Any] = [_info_dict(prefix + oi.key.rpartition("/")[2], oi) for oi in infos]
        else:
            names = [n.rstrip("/") for n in backend.list_dir(key.rstrip("/"))] if backend.listable else []
            entries = [prefix + n for n in names if n]
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
        prefix = stripped if stripped.endswith("/") or not stripped else stripped + "/"
        path = stripped.rstrip("/")
        backend, key = self._locate(stripped)
        key = key.rstrip("/")
        files: list[str] = []
        sizes: dict[str, ObjectInfo] = {}
        dirs: set[str] = set()
        # One listing that carries the sizes (S3: no HEAD per object when detail is asked for).
        listing = backend.list_info if detail else backend.list
        for entry in listing(f"{key}/" if key else ""):
            k = entry.key if isinstance(entry, ObjectInfo) else entry
            parts = (k[len(key) + 1 :] if key else k).split("/")
            if maxdepth is None or len(parts) <= maxdepth:
                files.append(prefix + "/".join(parts))
                if isinstance(entry, ObjectInfo):
                    sizes[files[-1]] = entry
            if withdirs:
                top = len(parts) - 1 if maxdepth is None else min(len(parts) - 1, maxdepth)
                dirs.update(prefix + "/".join(parts[: i + 1]) for i in range(top))
        out: dict[str, Any] = {}
        if files or dirs:
            if withdirs and key:
                out[path] = {"name": path, "size": 0, "type": "directory"}
            for d in dirs:
                out[d] = {"name": d, "size": 0, "type": "directory"}
            if detail:
                out.update({f: _info_dict(f, sizes[f]) for f in files})
            else:
                out.update({f: {} for f in files})
        elif key:
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
        br = _byte_range(start, end)
        if backend.waves and br is not False:
            return self._get_bytes(backend, key, path, br)
        with self._open_engine(backend, key, path, "GDSFileSystem.cat_file()") as f:
            offset, nbytes = resolve_range(start, end, f.size)
            return read_bytes(f, offset, nbytes, f"GDSFileSystem.cat_file({path!r})")

    def _get_bytes(self, backend: Backend, key: str, path: str, br: ByteRange | None) -> bytes:
        """``key`` (or ``br`` of it) as ``bytes`` filled in place, in one request (remote backends)."""
        made: list[BytesBuilder] = []

        def alloc(n: int) -> memoryview:
            made.append(BytesBuilder(n))
            return made[-1].view

        try:
            backend.get(key, alloc, br)
        except IsADirectoryError:
            raise IsADirectoryError(f"GDSFileSystem.cat_file(): {path!r} is a directory") from None
        except FileNotFoundError:
            raise FileNotFoundError(f"GDSFileSystem.cat_file(): no such file: {path!r}") from None
        return made[-1].to_bytes()

    def _cat_wave(self, paths: list[str]) -> list[Any]:
        """Whole remote objects, one wave per backend: ``bytes``, or the exception of a path."""
        out: list[Any] = [None] * len(paths)
        self._wave_into(out, paths, list(range(len(paths))), [None] * len(paths), 0, "GDSFileSystem.cat()")
        return out

    def _wave_into(
        self, out: list[Any], paths: list[str], idxs: list[int], ranges: list[ByteRange | None], gap: int, where: str
    ) -> None:
        """Items ``idxs`` (``paths[i]``, ``ranges[k]`` of it) in one wave per backend: ``out[i]`` gets
        ``bytes`` or the exception that failed the item (FileNotFoundError for a missing file)."""
        groups: dict[int, tuple[Backend, list[int], list[str], list[ByteRange | None]]] = {}
        for i, br in zip(idxs, ranges):
            try:
                backend, key = self._locate(paths[i])
            except Exception as exc:
                out[i] = exc
                continue
            g = groups.setdefault(id(backend), (backend, [], [], []))
            g[1].append(i)
            g[2].append(key)
            g[3].append(br)
        for backend, members, keys, brs in groups.values():
            w = backend.get_many(keys, brs, host_alloc, errors="return", max_gap=gap, max_bytes=_MAX_BLOCK,
                                 where=where)
            values = w.all_bytes()  # one bytes each, copied in parallel
            for k, i in enumerate(members):
                err = w.errors[k] if w.errors else None
                v = values[k]
                out[i] = err if err is not None else (FileNotFoundError(f"{where}: no such file: {paths[i]!r}")
                                                      if v is None else v)

    async def _cat(
        self, path: Any, recursive: bool = False, on_error: str = "raise", batch_size: int | None = None,
        **kwargs: Any,
    ) -> Any:
        """Whole files: remote ones in one wave of concurrent GETs (no size lookups), else fsspec's way."""
        if self.is_local or kwargs:
            return await super()._cat(path, recursive, on_error, batch_size, **kwargs)
        paths = await self._expand_path(path, recursive=recursive)
        out = await asyncio.to_thread(self._cat_wave, paths)
        if on_error == "raise":
            for x in out:
                if isinstance(x, BaseException):
                    raise x
        if len(paths) > 1 or isinstance(path, list) or paths[0] != self._strip_protocol(path):
            return {k: v for k, v in zip(paths, out) if on_error != "omit" or not isinstance(v, BaseException)}
        return out[0]

    def _open_engine(self, backend: Backend, key: str, path: str, where: str) -> Any:
        try:
            return backend.open(key, "rb")
        except IsADirectoryError:
            raise IsADirectoryError(f"{where}: {path!r} is a directory") from None
        except FileNotFoundError:
            raise FileNotFoundError(f"{where}: no such file: {path!r}") from None

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
        s_list = list(starts) if isinstance(starts, Iterable) else [starts] * n
        e_list = list(ends) if isinstance(ends, Iterable) else [ends] * n
        if len(s_list) != n or len(e_list) != n:
            raise ValueError(
                f"GDSFileSystem.cat_ranges(): {n} paths but {len(s_list)} starts and {len(e_list)} ends"
            )
        gap = max_gap if max_gap is not None else (_MAX_GAP_LOCAL if self.is_local else _MAX_GAP_REMOTE)
        out: list[Any] = [None] * n
        stripped = [self._strip_protocol(p) for p in paths]
        rest = list(range(n))
        if not self.is_local:
            # One wave of concurrent requests, no size lookups, for every range that needs no size.
            brs = [_byte_range(s_list[i], e_list[i]) for i in range(n)]
            sized = [i for i in rest if brs[i] is not False]
            rest = [i for i in rest if brs[i] is False]
            self._wave_into(out, stripped, sized, [brs[i] or None for i in sized], gap,
                            "GDSFileSystem.cat_ranges()")
        by_path: dict[str, list[int]] = {}
        for i in rest:
            by_path.setdefault(stripped[i], []).append(i)
        items = list(by_path.items())
        for b in range(0, len(items), _OPEN_BATCH):
            self._cat_ranges_batch(items[b : b + _OPEN_BATCH], s_list, e_list, gap, out)
        if on_error != "return":
            for x in out:
                if isinstance(x, BaseException):
                    raise x
        return out

    def _cat_ranges_batch(
        self,
        items: list[tuple[str, list[int]]],
        starts: list[int | None],
        ends: list[int | None],
        gap: int,
        out: list[Any],
    ) -> None:
        """Read the ranges of a batch of files: every file's reads start before any is awaited."""
        opened: list[Any] = []
        reads: list[tuple[list[int], RangeRead[BytesBuilder]]] = []  # (out index of each span, read)
        try:
            for path, idxs in items:
                try:
                    backend, key = self._locate(path)
                    f = self._open_engine(backend, key, path, "GDSFileSystem.cat_ranges()")
                except Exception as exc:
                    for i in idxs:
                        out[i] = exc
                    continue
                opened.append(f)
                spans = [resolve_range(starts[i], ends[i], f.size) for i in idxs]
                where = f"GDSFileSystem.cat_ranges({path!r})"
                started = start_range_reads(
                    f, spans, BytesBuilder, max_gap=gap, max_bytes=_MAX_BLOCK, target=_view, where=where
                )
                reads.extend((idxs, read) for read in started)
            for idxs, read in reads:
                try:
                    buf = read.result()
                    # A range that fills its read becomes its bytes without a copy; others are sliced.
                    for m, a, b in read.slices():
                        out[idxs[m]] = buf.to_bytes(a, b)
                except Exception as exc:
                    for m, _, _ in read.members:
                        out[idxs[m]] = exc
        finally:
            for f in opened:
                f.close()

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
        with self._open_engine(backend, key, path, "GDSFileSystem.read_into()") as f:
            return int(f.read(buf, size, start))

    def read_array(self, path: str, start: int = 0, end: int | None = None, *, device: bool = True) -> Any:
        """Bytes ``[start, end)`` of ``path`` as a 1-D ``uint8`` array: cupy (``device=True``) or numpy.

        The device array is filled by the engine directly (see :meth:`read_into`).
        """
        path = self._strip_protocol(path)
        backend, key = self._locate(path)
        with self._open_engine(backend, key, path, "GDSFileSystem.read_array()") as f:
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
        rpath = self._strip_protocol(rpath)
        if self.is_local and outfile is None and not os.path.isdir(rpath):
            _atomic_copy(rpath, lpath, where="GDSFileSystem.get_file()")  # the kernel copies the bytes
            return
        data = self._file_or_dir(rpath)
        if data is None:
            os.makedirs(lpath, exist_ok=True)
            return
        if outfile is not None:
            outfile.write(data)
            return
        with open(lpath, "wb") as f:
            f.write(data)

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
        rpath = self._strip_protocol(rpath)
        if os.path.isdir(lpath):
            self.makedirs(rpath, exist_ok=True)
            return
        if self.is_local:
            if os.path.isdir(rpath):
                raise IsADirectoryError(f"GDSFileSystem.put_file(): {rpath!r} is a directory")
            _atomic_copy(lpath, rpath, exclusive=mode == "create", where="GDSFileSystem.put_file()")
            return
        with open(lpath, "rb") as f:
            self.pipe_file(rpath, f.read(), mode=mode)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        """Copy one file within this filesystem (a directory: created at ``path2``)."""
        path1 = self._strip_protocol(path1)
        path2 = self._strip_protocol(path2)
        if self.is_local:
            if os.path.isdir(path1):
                os.makedirs(path2, exist_ok=True)
                return
            if not os.path.exists(path1):
                raise FileNotFoundError(f"GDSFileSystem.cp_file(): no such file: {path1!r}")
            _atomic_copy(path1, path2, where="GDSFileSystem.cp_file()")
            return
        data = self._file_or_dir(path1)
        if data is None:
            self.makedirs(path2, exist_ok=True)
        else:
            self.pipe_file(path2, data)

    def _file_or_dir(self, path: str) -> bytes | None:
        """The whole file, or None for a directory (remote: read first, list only if that fails)."""
        try:
            return self.cat_file(path)
        except IsADirectoryError:
            return None
        except FileNotFoundError:
            if self.isdir(path):
                return None
            raise

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
