"""``gdsstore.GDSStore``: a Zarr v3 store over gdsstore's engine, for local paths and URLs.

The store is a thin adapter over one :class:`~gdsstore.engine.backend.Backend` (a local directory,
or a remote root from :mod:`gdsstore.engine.remote`). Every read allocates its destination from the
caller's ``prototype`` — host memory for zarr's default buffers, device memory for
``zarr.core.buffer.gpu.Buffer`` — and the engine fills it directly (cuFile or POSIX route; no host
copy first for device prototypes). Writes hand the buffer's own array, host or device, to the engine.

As in zarr's ``LocalStore``: the blocking work sits in small module-level functions (reads in
:mod:`~gdsstore.adapters.zarr_reads`, writes in :mod:`~gdsstore.adapters.zarr_writes`, the root and
listings here) and Backend methods; each async method runs one of them through ``asyncio.to_thread``,
each sync method (``get_sync``, ``set_sync``, ``delete_sync``, ``get_ranges_sync``) calls it directly.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Self

from zarr.abc.store import ByteRequest, Store
from zarr.core.buffer import Buffer, BufferPrototype
from zarr.core.buffer.core import default_buffer_prototype

from gdsstore.adapters.zarr_reads import (
    MAX_COALESCED_BYTES,
    MAX_GAP_BYTES,
    found,
    get_batch,
    get_key,
    is_device_buffer,
    read_ranges,
    read_wave,
)
from gdsstore.adapters.zarr_writes import put_batch, put_key
from gdsstore.engine.backend import Backend, backend_for, check_key
from gdsstore.engine.localfs import LocalBackend
from gdsstore.engine.ranges import ByteRange
from gdsstore.engine.tick import TickGatherer, executor_shut_down
from gdsstore.zarr_requests import to_byte_range

if TYPE_CHECKING:
    from donfig.config_obj import ConfigSet
    from zarr.core.common import AccessModeLiteral

__all__ = ["GDSStore", "TickGatherer", "enable_pipeline", "to_byte_range"]

# Local batches leave the event loop every few items: zarr copies each chunk on the loop thread (out
# of a read, into a write), and one batch per tick would keep the files idle while it copies. Remote
# gets of a tick form one wave: its requests are in flight together.
_LOCAL_GETS = 4
_LOCAL_SETS = 2


# -- the root and listings (blocking; each async method runs one in a thread) ----------------------


async def _to_thread[T](fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``asyncio.to_thread``, except that a call made after zarr's executor shut down (at exit) cancels its
    caller quietly instead of leaving a "cannot schedule new futures" traceback on stderr."""
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except RuntimeError as exc:
        if not executor_shut_down(exc):
            raise
        raise asyncio.CancelledError from None


def _exists(backend: Backend, key: str) -> bool:
    try:
        return backend.info(key).type == "file"
    except (FileNotFoundError, NotADirectoryError):
        return False


def _getsize(backend: Backend, key: str) -> int:
    info = backend.info(key)
    if info.type != "file":
        raise FileNotFoundError(f"GDSStore.getsize(): {key!r} is a directory, not a key")
    return info.size


def _size_prefix(backend: Backend, prefix: str) -> int:
    total = 0
    for key in backend.list(prefix):
        try:
            total += backend.size(key)
        except FileNotFoundError:  # deleted between the listing and the stat
            pass
    return total


def _is_empty(backend: Backend, prefix: str) -> bool:
    return next(iter(backend.list(prefix)), None) is None


def enable_pipeline() -> ConfigSet:
    """Switch zarr to gdsstore's batched codec pipeline and codecs, keeping zarr's host buffers.

    A selection's chunks then move in batches: read into one staging buffer per window, decoded as
    one batch (numcodecs on threads) and scattered into the output; writes encoded as a batch and
    published in parallel. Without it, zarr's own pipeline over :class:`GDSStore` still hands the
    engine each event-loop tick's chunk reads together (one batch, or one remote wave). Returns zarr's
    ``ConfigSet``: it applies at once and, used as a context manager, undoes itself::

        with gdsstore.enable_pipeline():
            x = zarr.open_array(gdsstore.GDSStore("/data/x.zarr"), mode="r")[:]   # numpy.ndarray

    Arrays pick their codec pipeline when they are opened: open them inside (or after) the call.
    :func:`gdsstore.enable_gpu` is the same with GPU buffers.
    """
    from gdsstore.gpu.enable import enable_gpu  # the pipeline's modules load only when asked for

    return enable_gpu(buffers=False)


# The documents zarr looks for to find a node (v3, v2 array, v2 group): a node missing in both formats may
# be a missing root.
_NODE_DOCUMENTS = frozenset({"zarr.json", ".zarray", ".zgroup"})


def _check_local_root(root: str) -> None:
    """A read-only local root must exist (zarr's ``LocalStore`` raises the same on open)."""
    if os.path.isdir(root):
        return
    if os.path.lexists(root):
        raise NotADirectoryError(f"GDSStore: the root {root!r} is not a directory")
    raise FileNotFoundError(f"GDSStore: the root directory {root!r} does not exist (a read-only store does not "
                            "create it; check the path)")


def _check_remote_root(backend: Backend) -> None:
    """A remote root that cannot be listed because it is not there (an S3 bucket, a WebHDFS directory)."""
    try:
        next(iter(backend.list_dir("")), None)
    except FileNotFoundError as exc:
        what = "bucket" if backend.url.startswith("s3://") else "directory"
        raise FileNotFoundError(f"GDSStore: {backend.url} does not exist (no such {what}: {exc})") from exc
    except Exception:  # listing refused (no ListBucket right, a plain web server): nothing to add
        return


def _move(src: str, dest: str) -> None:
    """zarr's ``LocalStore.move``: the whole root to ``dest``, which must not exist yet."""
    os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
    if os.path.lexists(dest):
        raise FileExistsError(f"GDSStore.move(): the destination {dest!r} already exists")
    shutil.move(src, dest)


def _dir_prefix(prefix: str) -> str:
    return prefix if prefix == "" or prefix.endswith("/") else prefix + "/"


class GDSStore(Store):
    """A Zarr v3 store that moves chunks through gdsstore's engine (cuFile / POSIX / remote).

    Args:
        root: a local directory, a ``file://`` URL, or a remote root (``s3://bucket/prefix``,
            ``http(s)://host/path``, ``webhdfs://host/path``).
        read_only: refuse writes and deletes.
        storage_options: transport options for remote roots (credentials, ``endpoint_url``...).

    Attributes:
        backend: the :class:`~gdsstore.engine.backend.Backend` that does the I/O (public: batched
            readers such as gdsstore's GPU pipeline read chunks through it directly).
        root: the local directory (absolute path) or the remote root URL.

    Examples:
        >>> import tempfile, numpy as np, zarr, gdsstore
        >>> store = gdsstore.GDSStore(tempfile.mkdtemp())
        >>> z = zarr.create_array(store, shape=(4,), chunks=(2,), dtype="i4")
        >>> z[:] = np.arange(4)
        >>> zarr.open_array(store, mode="r")[:].tolist()
        [0, 1, 2, 3]
    """

    backend: Backend
    root: str

    def __init__(
        self,
        root: str | os.PathLike[str],
        read_only: bool = False,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(read_only=read_only)
        if not isinstance(root, str | os.PathLike):
            raise TypeError(
                f"GDSStore(): `root` must be a str, os.PathLike or URL, got {type(root).__name__}"
            )
        if storage_options is not None and not isinstance(storage_options, dict):
            raise TypeError(
                f"GDSStore(): `storage_options` must be a dict or None, got {type(storage_options).__name__}"
            )
        self._root_arg = os.fspath(root)
        self._storage_options = dict(storage_options or {})
        self._attach(backend_for(self._root_arg, self._storage_options))
        # Pickles carry the absolute root: a worker with another working directory opens the same data.
        self._root_arg = self.root

    def _attach(self, backend: Backend) -> None:
        self.backend = backend
        # Local roots: the absolute directory; remote roots: the URL as given.
        self.root = getattr(backend, "root", None) or self._root_arg
        # Whether a metadata miss should ask if the remote root exists (once): read-only stores, and S3,
        # whose missing bucket is an error in any mode (a writable WebHDFS directory is made on write).
        self._root_unchecked = backend.waves and backend.listable and (self.read_only or backend.url.startswith("s3://"))
        self._node_misses: dict[str, set[str]] = {}  # node path -> its documents found missing
        # zarr's concurrent gets (and local sets) of one tick become engine batches or one wave.
        local = isinstance(backend, LocalBackend)
        self._gets = (
            TickGatherer(backend, get_batch, _LOCAL_GETS) if local else TickGatherer(backend, get_batch) if backend.waves else None
        )
        # Remote sets of a tick go as one batch where the backend has one (S3: one native-core call).
        batched = type(backend).put_batch is not Backend.put_batch
        self._sets = (
            TickGatherer(backend, put_batch, _LOCAL_SETS) if local else TickGatherer(backend, put_batch) if batched else None
        )

    # -- identity ------------------------------------------------------------------------------------

    def with_read_only(self, read_only: bool = False) -> Self:
        # docstring inherited
        new = type(self).__new__(type(self))
        Store.__init__(new, read_only=read_only)
        new._root_arg = self._root_arg
        new._storage_options = dict(self._storage_options)
        new._attach(self.backend)  # share the backend (and its connection pools)
        return new

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, GDSStore)
            and self.backend.url == other.backend.url
            and self._storage_options == other._storage_options
        )

    __hash__ = None  # type: ignore[assignment]  # mutable (open state), like zarr's LocalStore

    def __str__(self) -> str:
        return self.backend.url

    def __repr__(self) -> str:
        return f"GDSStore('{self}')"

    def __getstate__(self) -> dict[str, Any]:
        # The backend is rebuilt on unpickling: remote backends hold connection pools and locks.
        state = self.__dict__.copy()
        for name in ("backend", "_gets", "_sets"):
            del state[name]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._attach(backend_for(self._root_arg, self._storage_options))

    # -- capabilities --------------------------------------------------------------------------------

    @property
    def supports_writes(self) -> bool:
        return self.backend.writable

    supports_deletes = supports_writes  # a backend that writes deletes (its writers replace and remove keys)

    @property
    def supports_listing(self) -> bool:
        return self.backend.listable

    def _check_writes(self, where: str) -> None:
        self._check_writable()
        if not self.backend.writable:
            raise NotImplementedError(f"{where}: {self} does not support writes or deletes")

    def _check_listing(self, where: str) -> None:
        if not self.backend.listable:
            raise NotImplementedError(f"{where}: {self} does not support listing")

    # -- open ----------------------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        root: str | os.PathLike[str],
        *,
        read_only: bool = False,
        storage_options: dict[str, Any] | None = None,
        mode: AccessModeLiteral | None = None,
    ) -> Self:
        """Create and open the store (``mode`` as in zarr's ``LocalStore.open``)."""
        creating_read_only = mode in ("r", "r+") if mode is not None else read_only
        store = cls(root, read_only=creating_read_only, storage_options=storage_options)
        await store._open()
        if creating_read_only != read_only:
            store = store.with_read_only(read_only)
            await store._open()
        return store

    def _prepare(self) -> None:
        # A writable local root is created on open, a read-only one must exist, as with zarr's LocalStore.
        if not self.read_only and self.backend.writable:
            self.backend.mkdir("")
        elif isinstance(self.backend, LocalBackend):
            _check_local_root(self.root)

    def _missing(self, key: str) -> None:
        """A key is missing. Once a node's v3 document and a v2 one are both missing (zarr finds no node
        there), a remote root is listed, once per store, to tell a missing bucket or directory apart."""
        node, _, name = key.rpartition("/")
        if not self._root_unchecked or name not in _NODE_DOCUMENTS:
            return
        missed = self._node_misses.setdefault(node, set())
        missed.add(name)
        if "zarr.json" in missed and len(missed) > 1:
            self._root_unchecked = False
            _check_remote_root(self.backend)

    async def _open(self) -> None:
        if self._is_open:
            raise ValueError("store is already open")
        await _to_thread(self._prepare)
        await super()._open()

    async def _ensure_open(self) -> None:
        # Concurrent lazy opens may all get here; preparing twice is harmless, Store._open is not.
        if not self._is_open:
            await _to_thread(self._prepare)
            self._is_open = True

    def _ensure_open_sync(self) -> None:
        if not self._is_open:
            self._prepare()
            self._is_open = True

    # -- reads ---------------------------------------------------------------------------------------

    async def get(
        self,
        key: str,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        # docstring inherited
        prototype = prototype or default_buffer_prototype()
        if self._gets is None or is_device_buffer(prototype.buffer):
            return await _to_thread(self._get_here, key, prototype, byte_range, "GDSStore.get()")
        br = self._request(key, byte_range, "GDSStore.get()")
        await self._ensure_open()
        buf: Buffer | None = await self._gets.submit((key, br, prototype))
        if buf is None and self._root_unchecked:
            await _to_thread(self._missing, key)
        return buf

    def get_sync(
        self,
        key: str,
        *,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        """Blocking :meth:`get` (zarr's sync codec pipeline reads through it)."""
        return self._get_here(key, prototype or default_buffer_prototype(), byte_range, "GDSStore.get_sync()")

    def _get_here(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None, where: str
    ) -> Buffer | None:
        """One key read in the calling thread: :meth:`get_sync`, and :meth:`get` outside a batch of gets
        (errors name ``where``)."""
        br = self._request(key, byte_range, where)
        self._ensure_open_sync()
        buf = get_key(self.backend, key, prototype, br)
        if buf is None:
            self._missing(key)
        return buf

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        # docstring inherited
        where = "GDSStore.get_partial_values()"
        requests = list(key_ranges)  # a one-shot iterable is fine: read it exactly once
        by_key: dict[str, list[tuple[int, ByteRange | None]]] = defaultdict(list)
        for i, (key, byte_range) in enumerate(requests):
            check_key(key, where)
            by_key[key].append((i, to_byte_range(byte_range, where)))
        out: list[Buffer | None] = [None] * len(requests)
        if not by_key:
            return out
        await self._ensure_open()
        if self._waves(prototype):
            keys = [key for key, _ in requests]
            ranges = [to_byte_range(r, where) for _, r in requests]
            return await _to_thread(read_wave, self.backend, prototype, keys, ranges, where)

        async def one(key: str, items: list[tuple[int, ByteRange | None]]) -> None:
            groups = await _to_thread(
                read_ranges, self.backend, key, prototype, [r for _, r in items], one_wave=False
            )
            for group in groups or ():
                for j, buf in group:
                    out[items[j][0]] = buf

        await asyncio.gather(*(one(k, items) for k, items in by_key.items()))
        return out

    async def get_ranges(
        self,
        key: str,
        byte_ranges: Sequence[ByteRequest | None],
        *,
        prototype: BufferPrototype,
        max_concurrency: int = 10,
        max_gap_bytes: int = MAX_GAP_BYTES,
        max_coalesced_bytes: int = MAX_COALESCED_BYTES,
    ) -> AsyncIterator[Sequence[tuple[int, Buffer | None]]]:
        """Read many ranges of ``key``: nearby ranges coalesce into one engine read each.

        Yields one batch of ``(input_index, Buffer)`` per engine read. A missing key raises a
        ``BaseExceptionGroup`` holding a FileNotFoundError (zarr's contract).
        """
        ranges = self._ranges(key, byte_ranges, "GDSStore.get_ranges()")
        await self._ensure_open()
        groups = await _to_thread(
            read_ranges, self.backend, key, prototype, ranges,
            one_wave=self._waves(prototype), max_gap=max_gap_bytes, max_coalesced=max_coalesced_bytes,
        )
        for group in found(groups, key):
            yield group

    def get_ranges_sync(
        self,
        key: str,
        byte_ranges: Sequence[ByteRequest | None],
        *,
        prototype: BufferPrototype,
        max_gap_bytes: int = MAX_GAP_BYTES,
        max_coalesced_bytes: int = MAX_COALESCED_BYTES,
    ) -> Sequence[tuple[int, Buffer | None]]:
        """Blocking :meth:`get_ranges`, flattened (zarr's sync sharding path reads through it)."""
        ranges = self._ranges(key, byte_ranges, "GDSStore.get_ranges_sync()")
        self._ensure_open_sync()
        groups = read_ranges(
            self.backend, key, prototype, ranges,
            one_wave=self._waves(prototype), max_gap=max_gap_bytes, max_coalesced=max_coalesced_bytes,
        )
        return [item for group in found(groups, key) for item in group]

    def _waves(self, prototype: BufferPrototype) -> bool:
        """Many-key reads go in one wave: a remote backend, into host buffers."""
        return self.backend.waves and not is_device_buffer(prototype.buffer)

    @staticmethod
    def _request(key: str, byte_range: ByteRequest | None, where: str) -> ByteRange | None:
        """``key`` checked, and ``byte_range`` as the engine's byte range (errors name ``where``)."""
        check_key(key, where)
        return to_byte_range(byte_range, where)

    @staticmethod
    def _ranges(key: str, byte_ranges: Sequence[ByteRequest | None], where: str) -> list[ByteRange | None]:
        check_key(key, where)
        return [to_byte_range(r, where) for r in byte_ranges]

    async def exists(self, key: str) -> bool:
        # docstring inherited
        check_key(key, "GDSStore.exists()")
        return await _to_thread(_exists, self.backend, key)

    async def getsize(self, key: str) -> int:
        # docstring inherited
        check_key(key, "GDSStore.getsize()")
        return await _to_thread(_getsize, self.backend, key)

    async def getsize_prefix(self, prefix: str) -> int:
        # docstring inherited
        check_key(prefix, "GDSStore.getsize_prefix()")
        self._check_listing("GDSStore.getsize_prefix()")
        return await _to_thread(_size_prefix, self.backend, _dir_prefix(prefix))

    # -- writes --------------------------------------------------------------------------------------

    def _check_value(self, value: object, where: str) -> None:
        if not isinstance(value, Buffer):
            raise TypeError(
                f"{where}: `value` must be a Buffer instance. Got an instance of {type(value)} instead."
            )

    async def set(self, key: str, value: Buffer) -> None:
        # docstring inherited
        await self._set(key, value, exclusive=False, where="GDSStore.set()")

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        # docstring inherited
        await self._set(key, value, exclusive=True, where="GDSStore.set_if_not_exists()")

    async def _set(self, key: str, value: Buffer, *, exclusive: bool, where: str) -> None:
        check_key(key, where)
        await self._ensure_open()
        self._check_writes(where)
        self._check_value(value, where)
        if self._sets is None:
            await _to_thread(put_key, self.backend, key, value, exclusive)
            return
        try:
            await self._sets.submit((key, value, exclusive))
        except FileExistsError:
            if not exclusive:
                raise

    def set_sync(self, key: str, value: Buffer) -> None:
        """Blocking :meth:`set`."""
        where = "GDSStore.set_sync()"
        check_key(key, where)
        self._ensure_open_sync()
        self._check_writes(where)
        self._check_value(value, where)
        put_key(self.backend, key, value, False)

    def _delete(self, key: str) -> None:
        # "" is the root node (zarr's StorePath.delete() of a root array or group): every key goes, as
        # zarr's LocalStore.delete("") removes the whole root.
        if key == "":
            self.backend.delete_prefix("")
        else:
            self.backend.delete(key)

    async def delete(self, key: str) -> None:
        # docstring inherited
        check_key(key, "GDSStore.delete()")
        self._check_writes("GDSStore.delete()")
        await _to_thread(self._delete, key)

    def delete_sync(self, key: str) -> None:
        """Blocking :meth:`delete`."""
        check_key(key, "GDSStore.delete_sync()")
        self._ensure_open_sync()
        self._check_writes("GDSStore.delete_sync()")
        self._delete(key)

    async def move(self, dest_root: str | os.PathLike[str]) -> None:
        """Move a local store to ``dest_root``, which must not exist yet; the old root is gone (zarr's
        ``LocalStore.move``). The store then reads and writes at its new root.

        Raises:
            FileExistsError: ``dest_root`` exists.
            NotImplementedError: a remote store (object stores have no rename of a whole prefix).
        """
        self._check_writes("GDSStore.move()")
        if not isinstance(self.backend, LocalBackend):
            raise NotImplementedError(f"GDSStore.move(): {self} is remote; only local stores can be moved")
        dest = os.path.abspath(os.fspath(dest_root))
        await _to_thread(_move, self.root, dest)
        self._root_arg = dest
        self._attach(backend_for(dest, self._storage_options))

    async def delete_dir(self, prefix: str) -> None:
        # docstring inherited
        check_key(prefix, "GDSStore.delete_dir()")
        self._check_writes("GDSStore.delete_dir()")
        self._check_listing("GDSStore.delete_dir()")
        await _to_thread(self.backend.delete_prefix, _dir_prefix(prefix))

    async def clear(self) -> None:
        # docstring inherited
        await self.delete_dir("")

    # -- listing -------------------------------------------------------------------------------------

    async def _listed(self, fn: Callable[[str], Iterable[str]], prefix: str, where: str) -> list[str]:
        check_key(prefix, where)
        self._check_listing(where)
        return await _to_thread(lambda: list(fn(prefix)))

    async def list(self) -> AsyncIterator[str]:
        # docstring inherited
        for key in await self._listed(self.backend.list, "", "GDSStore.list()"):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        # docstring inherited
        for key in await self._listed(self.backend.list, prefix, "GDSStore.list_prefix()"):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        # docstring inherited
        for name in await self._listed(self.backend.list_dir_of_keys, prefix, "GDSStore.list_dir()"):
            yield name

    async def is_empty(self, prefix: str) -> bool:
        # docstring inherited
        if prefix.strip("/") == "":
            prefix = ""  # "/" is the root, as zarr's stores and its hierarchy state machine ask for it
        check_key(prefix, "GDSStore.is_empty()")
        self._check_listing("GDSStore.is_empty()")
        return await _to_thread(_is_empty, self.backend, _dir_prefix(prefix))
