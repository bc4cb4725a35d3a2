"""The file of the ``gds`` filesystem (:class:`GDSFile`) and reads that end as ``bytes``.

fsspec hands out ``bytes`` (``cat_file``, ``read``). :class:`BytesBuilder` lets the engine fill the
storage of the ``bytes`` it returns, through public APIs only: an ``io.BytesIO`` over a fresh
``bytes(n)`` (calloc: no page touched before the engine writes it) owns the storage, the engine
writes through a numpy array over that storage's address, and ``getvalue()`` then hands the storage
over as ``bytes`` -- on CPython without a copy (a test checks the address), elsewhere with one copy,
never wrong bytes. A ``bytearray`` and a ``bytes()`` copy cost a second pass over the memory
(measured 2.4x the time).

Why no ``getbuffer()`` view reaches the engine: a BytesIO export caught in a garbage cycle (an
exception's traceback holding the view, as every failed read makes) lets CPython 3.12's collector free
the BytesIO before the view, which prints "deallocated BytesIO object has exported buffers" and then
crashes the interpreter. The BytesIO here has no export once the builder exists; the numpy array
keeps it alive through its base, which the collector frees in any order without harm.
"""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING, Any

from fsspec.spec import AbstractBufferedFile

if TYPE_CHECKING:
    from gdsstore.adapters.fsspec.filesystem import GDSFileSystem
    from gdsstore.engine.localfs import AtomicWriter

__all__ = ["BytesBuilder", "GDSFile", "alias_storage", "read_bytes", "resolve_range"]


class BytesBuilder:
    """``nbytes`` of writable memory that become an immutable ``bytes`` once filled.

    Examples:
        >>> b = BytesBuilder(3)
        >>> b.view[:] = b"abc"
        >>> b.to_bytes()
        b'abc'
    """

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        # BytesIO keeps an initial bytes object as its buffer; ours has no other reference, so
        # getbuffer() exports it as it is (a shared one would be copied first). The export lives only
        # long enough to take the storage's address.
        self._io = io.BytesIO(bytes(nbytes))
        self.view: memoryview = memoryview(alias_storage(self._io))
        self._value: bytes | None = None

    def to_bytes(self, start: int = 0, stop: int | None = None) -> bytes:
        """The filled memory, or ``[start, stop)`` of it (a copy), as ``bytes``.

        The whole of it is handed over without a copy; no writes through ``view`` afterwards.
        """
        stop = self.nbytes if stop is None else stop
        whole = start == 0 and stop == self.nbytes
        if self._value is None:
            if not whole:
                return bytes(self.view[start:stop])
            # The BytesIO has no exports: getvalue() hands its storage over without a copy.
            self._value = self._io.getvalue()
        return self._value if whole else self._value[start:stop]


class _StorageOwner:
    """Keeps a BytesIO alive for the numpy array over its storage (the array's ``base``)."""

    def __init__(self, owner: io.BytesIO, address: int, nbytes: int) -> None:
        self._owner = owner
        self.__array_interface__ = {
            "data": (address, False), "shape": (nbytes,), "typestr": "|u1", "version": 3,
        }


def alias_storage(owner: io.BytesIO) -> Any:
    """A writable uint8 numpy array over ``owner``'s contents that holds no buffer export of it.

    Valid while nothing writes to or resizes ``owner`` through its own methods.

    Examples:
        >>> b = io.BytesIO(b"abc")
        >>> alias_storage(b)[1] = ord("x")
        >>> b.getvalue()
        b'axc'
    """
    import ctypes

    import numpy as np

    view = owner.getbuffer()
    try:
        if view.nbytes == 0:
            return np.empty(0, np.uint8)
        address = ctypes.addressof(ctypes.c_char.from_buffer(view))
        nbytes = view.nbytes
    finally:
        view.release()
    return np.asarray(_StorageOwner(owner, address, nbytes))


def resolve_range(start: int | None, end: int | None, size: int) -> tuple[int, int]:
    """fsspec's ``start``/``end`` (None: the start / the end; negative: from the end) as
    ``(offset, nbytes)`` within an object of ``size`` bytes.

    Examples:
        >>> resolve_range(None, -2, 10), resolve_range(-3, None, 10), resolve_range(8, 100, 10)
        ((0, 8), (7, 3), (8, 2))
    """
    a = 0 if start is None else (max(0, size + start) if start < 0 else min(start, size))
    b = size if end is None else (max(0, size + end) if end < 0 else min(end, size))
    return a, max(0, b - a)


def read_bytes(f: Any, offset: int, nbytes: int, where: str) -> bytes:
    """``nbytes`` at ``offset`` of an open engine file, as ``bytes`` filled in place by the engine."""
    if nbytes <= 0:
        return b""
    out = BytesBuilder(nbytes)
    got = f.read(out.view, nbytes, offset)
    if got != nbytes:
        raise OSError(f"{where}: short read: {got} of {nbytes} bytes at offset {offset}")
    return out.to_bytes()


class GDSFile(AbstractBufferedFile):  # type: ignore[misc]
    """A buffered file of :class:`~gdsstore.adapters.fsspec.filesystem.GDSFileSystem`.

    Reads: random access, each block fetched by ``_fetch_range`` through the engine (one engine
    file held open); reads of a block or more and ``readinto`` go straight from the engine.
    Writes: local files stream into an ``gdsstore.engine.localfs.AtomicWriter`` (a temporary
    file beside the target, published on close; ``"xb"`` exclusively); remote files are buffered and
    written with one ``put`` (multipart above the transport's threshold) on close.
    """

    def __init__(
        self,
        fs: GDSFileSystem,
        path: str,
        mode: str = "rb",
        block_size: int | str = "default",
        autocommit: bool = True,
        cache_type: str = "readahead",
        cache_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        path = fs._strip_protocol(path)
        self._engine: Any = None
        self._writer: AtomicWriter | None = None
        if mode not in ("rb", "wb", "xb", "ab"):
            raise ValueError(f"GDSFile(): unsupported mode {mode!r}; use 'rb', 'wb', 'xb' or 'ab'")
        if mode == "rb":
            inf = fs.info(path)
            if inf["type"] != "file":
                raise IsADirectoryError(f"GDSFile(): {path!r} is a directory")
            kwargs.setdefault("size", inf["size"])
        elif mode == "xb" and fs.exists(path):
            raise FileExistsError(f"GDSFile(): {path!r} exists (mode 'xb')")
        elif mode == "ab" and not fs.is_local:
            raise NotImplementedError(f"GDSFile(): mode 'ab' is local only, not {fs.target_protocol!r}")
        if not autocommit:
            raise NotImplementedError("GDSFile(): autocommit=False (transactions) is not supported")
        super().__init__(fs, path, mode, block_size, autocommit, cache_type, cache_options, **kwargs)

    # -- reads ----------------------------------------------------------------------------------------

    def _engine_file(self) -> Any:
        if self._engine is None:
            backend, key = self.fs._locate(self.path)
            self._engine = self.fs._open_engine(backend, key, self.path, "GDSFile.read()")
        return self._engine

    def read(self, length: int = -1) -> bytes:
        """Read up to ``length`` bytes (all with -1). Reads of a block or more go straight from the
        engine into the returned bytes; smaller ones are served from the read-ahead cache."""
        if self.mode != "rb" or self.closed or length is None or 0 <= length < self.blocksize:
            return super().read(-1 if length is None else length)  # type: ignore[no-any-return]
        end = self.size if length < 0 else min(self.size, self.loc + length)
        if end <= self.loc:
            return b""
        out = self._fetch_range(self.loc, end)
        self.loc += len(out)
        return out

    def readinto(self, b: Any) -> int:
        """Read into the writable buffer ``b`` (host or device memory) through the engine, no copy."""
        if self.mode != "rb" or self.closed:
            return super().readinto(b)  # type: ignore[no-any-return]
        from gdsstore.engine.buffers import as_io_buffer

        nbytes = min(as_io_buffer(b, writable=True, where="GDSFile.readinto()").nbytes, self.size - self.loc)
        if nbytes <= 0:
            return 0
        got = int(self._engine_file().read(b, nbytes, self.loc))
        self.loc += got
        return got

    def _fetch_range(self, start: int, end: int) -> bytes:
        f = self._engine_file()
        offset, nbytes = resolve_range(start, end, self.size)
        return read_bytes(f, offset, nbytes, f"GDSFile.read({self.path!r})")

    # -- writes ---------------------------------------------------------------------------------------

    def _initiate_upload(self) -> None:
        if not self.fs.is_local:
            return  # remote: buffered, one put on close
        if self.mode == "ab":
            from gdsstore.engine.local import LocalFile

            os.makedirs(os.path.dirname(self.path) or "/", exist_ok=True)
            self._engine = LocalFile(self.path, "ab")  # appends write in place: not atomic
            self.offset = self._engine.size
            return
        from gdsstore.engine.localfs import AtomicWriter  # local writes only: the entry point stays light

        self._writer = AtomicWriter(self.path, exclusive=self.mode == "xb", where="GDSFile.close()")
        self._engine = self._writer.file

    def _upload_chunk(self, final: bool = False) -> bool:
        assert self.buffer is not None
        if not self.fs.is_local and not final:
            return False  # keep buffering: one put on close
        # No export of fsspec's BytesIO reaches the engine: one left in a failed call's traceback
        # crashes the interpreter when the garbage collector frees both (see BytesBuilder).
        data = alias_storage(self.buffer)
        if not self.fs.is_local:
            backend, key = self.fs._locate(self.path)
            backend.put(key, data, exclusive=self.mode == "xb")
            return True
        if len(data):
            self._engine.write(data, len(data), self.offset)
        del data
        if final:
            self._publish()
        return True

    def _publish(self) -> None:
        writer, self._writer = self._writer, None
        eng, self._engine = self._engine, None
        if writer is not None:
            writer.commit()  # fsync (setting), publish, fsync the directory
            return
        from gdsstore import policy

        # "ab" wrote in place: only its durability is left (the same fsync setting as every writer).
        try:
            if policy.settings().fsync:
                eng.fsync()
        finally:
            eng.close()

    def discard(self) -> None:
        # docstring inherited
        if self._writer is not None:
            self._writer.discard()
            self._writer = None
            self._engine = None
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def __exit__(self, exc_type: Any, *args: Any) -> None:
        # A writer that fails inside ``with`` publishes nothing: the old value stays (fsspec's
        # default would commit the partial data).
        if exc_type is not None and self.mode in ("wb", "xb") and not self.closed:  # type: ignore[has-type]
            self.discard()
            self.buffer = None
            self.closed = True
            return
        self.close()

    def close(self) -> None:
        # docstring inherited
        try:
            super().close()
        except BaseException:
            self.discard()
            raise
        if self.mode == "rb" and self._engine is not None:
            self._engine.close()
            self._engine = None
