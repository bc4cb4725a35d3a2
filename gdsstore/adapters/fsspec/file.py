"""The file of the ``gds`` filesystem (:class:`GDSFile`) and reads that end as ``bytes``.

fsspec hands out ``bytes`` (``cat_file``, ``read``). :class:`BytesBuilder` lets the engine fill the
storage of the ``bytes`` it returns, through public APIs only: an ``io.BytesIO`` over a fresh
``bytes(n)`` (calloc: no page touched before the engine writes it) owns the storage, the engine
writes through a numpy array over that storage's address, and ``getvalue()`` then hands the storage
over as ``bytes`` -- on CPython without a copy (a test checks the address), elsewhere with one copy,
never wrong bytes. A ``bytearray`` and a ``bytes()`` copy cost a second pass over the memory.

Why no ``getbuffer()`` view reaches the engine: a BytesIO export caught in a garbage cycle (an
exception's traceback holding the view, as every failed read makes) lets CPython 3.12's collector free
the BytesIO before the view, which prints "deallocated BytesIO object has exported buffers" and then
crashes the interpreter. The BytesIO here has no export once the builder exists; the numpy array
keeps it alive through its base, which the collector frees in any order without harm.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, Literal

from fsspec.spec import AbstractBufferedFile

from gdsstore.engine.backend import Backend
from gdsstore.engine.file import WriteGuard, warn_unclosed
from gdsstore.engine.ranges import ByteRange

if TYPE_CHECKING:
    from gdsstore.adapters.fsspec.filesystem import GDSFileSystem

__all__ = [
    "BytesBuilder",
    "GDSFile",
    "alias_storage",
    "byte_range",
    "get_bytes",
    "open_for_reading",
    "read_bytes",
    "resolve_range",
]


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


def byte_range(start: int | None, end: int | None) -> ByteRange | Literal[False] | None:
    """fsspec's ``start``/``end`` as a range that needs no size lookup (None: the whole object), or
    False when it does (a negative ``end``, or a negative ``start`` with an ``end``).

    Examples:
        >>> byte_range(None, None), byte_range(-3, None).kind, byte_range(2, 5).nbytes, byte_range(0, -1)
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


def open_for_reading(backend: Backend, key: str, path: str, where: str) -> Any:
    """``key`` of ``backend`` opened for reading; a directory or a missing file raises naming ``path``."""
    try:
        return backend.open(key, "rb")
    except IsADirectoryError:
        raise IsADirectoryError(f"{where}: {path!r} is a directory") from None
    except FileNotFoundError:
        raise FileNotFoundError(f"{where}: no such file: {path!r}") from None


def get_bytes(backend: Backend, key: str, path: str, br: ByteRange | None) -> bytes:
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
    Writes: local files stream into the engine's writer (``gdsstore.open``'s: a temporary file
    beside the target, published on close; ``"xb"`` exclusively; ``"ab"`` appends); remote files
    are buffered and written with one ``put`` (multipart above the transport's threshold) on close.
    Every writer keeps the engine's contract (:class:`gdsstore.engine.file.BaseFile`): published on
    a clean close only; an exception or an interrupt -- inside ``with fs.open(...)``, inside
    ``with fsspec.open(...)`` (whose ``close()`` carries no word of it) or before pandas' ``close()``
    -- discards the bytes and leaves the old value; a writer collected unclosed is discarded with a
    ``ResourceWarning``.
    """

    _engine: Any = None
    _guard: WriteGuard | None = None  # set once a writer is fully open

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
        if mode not in ("rb", "wb", "xb", "ab"):
            raise ValueError(
                f"GDSFile(): unsupported mode {mode!r}; use 'rb' (read), 'wb' (replace), 'xb' (create, fails "
                "if the file exists) or 'ab' (append; local files only)"
            )
        if mode == "rb":
            inf = fs.info(path)
            if inf["type"] != "file":
                raise IsADirectoryError(f"GDSFile(): {path!r} is a directory")
            kwargs.setdefault("size", inf["size"])
        elif mode == "xb" and fs.exists(path):
            raise FileExistsError(f"GDSFile(): {path!r} exists (mode 'xb')")
        elif mode == "ab" and not fs.is_local:
            raise NotImplementedError(
                f"GDSFile(): mode 'ab' (append) is for local files; {fs.target_protocol} objects are replaced "
                "whole: use 'wb' (replace) or 'xb' (create)"
            )
        if not autocommit:
            raise NotImplementedError("GDSFile(): autocommit=False (transactions) is not supported")
        super().__init__(fs, path, mode, block_size, autocommit, cache_type, cache_options, **kwargs)
        if mode != "rb":
            if fs.is_local:
                # Local writes only: the entry point stays light.
                from gdsstore.engine.schemes import open_local_writer

                self._engine = open_local_writer(self.path, mode, "GDSFile()")
            self._guard = WriteGuard()

    # -- reads ----------------------------------------------------------------------------------------

    def _engine_file(self) -> Any:
        if self._engine is None:
            backend, key = self.fs._locate(self.path)
            self._engine = open_for_reading(backend, key, self.path, "GDSFile.read()")
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
        if len(data):  # "ab": the engine's writer appends (offset 0 means "at the end")
            self._engine.write(data, len(data), 0 if self.mode == "ab" else self.offset)
        del data
        if final:
            eng, self._engine = self._engine, None
            eng.close()  # fsync (setting), publish, fsync the directory
        return True

    def flush(self, force: bool = False) -> None:
        # docstring inherited
        if self._guard is not None and self._guard.interrupted() and not self.closed:
            return  # the bytes are about to be discarded (fsspec's OpenFile flushes before close)
        super().flush(force)

    def discard(self) -> None:
        """Close without publishing: the bytes written are dropped, the old value stays whole."""
        eng, self._engine = self._engine, None
        if eng is not None:
            eng.discard()
        if self.mode != "rb":
            self.buffer = None
        self.closed = True

    def __exit__(self, exc_type: Any, *args: Any) -> None:
        if exc_type is not None and self.mode != "rb":
            self.discard()  # the block did not finish: publish nothing (fsspec's default would)
            return
        self._finish(publish_while_handling=True)

    def close(self) -> None:
        """Close the file; a writer publishes, unless an exception raised since it was opened is in
        flight (fsspec's ``OpenFile`` and pandas close this way on an error): then it discards."""
        self._finish(publish_while_handling=False)

    def _finish(self, publish_while_handling: bool) -> None:
        if self.closed:
            return
        if not publish_while_handling and self._guard is not None and self._guard.interrupted():
            self.discard()
            return
        try:
            super().close()
        except BaseException:
            self.discard()
            raise
        if self.mode == "rb" and self._engine is not None:
            self._engine.close()
            self._engine = None

    def __del__(self) -> None:
        if self.closed:
            return
        if self.mode == "rb":
            super().__del__()
            return
        if self._guard is not None:  # unset: the writer failed to open, nothing to warn about
            warn_unclosed("GDSFile", self.path)
        warn_unclosed("GDSFile", self.path)
        self.discard()
