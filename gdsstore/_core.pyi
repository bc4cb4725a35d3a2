"""gdsstore's native I/O core (Rust over object_store): one call per wave of remote GETs, the GIL released."""

from collections.abc import Callable, Sequence
from typing import Any

class Store:
    @staticmethod
    def http(
        base: str,
        *,
        connect_timeout: float = 10.0,
        pool_idle: int = 256,
        headers: list[tuple[str, str]] = ...,
        options: list[tuple[str, str]] = ...,
        ca_bundle: str | None = None,
    ) -> Store:
        """``headers`` sent with every request; ``options``: object_store's client options by name
        (``allow_invalid_certificates``, ``proxy_url``...); ``ca_bundle``: a PEM file trusted beside the system's
        certificates. Proxies also come from ``HTTP(S)_PROXY``/``ALL_PROXY``/``NO_PROXY``."""
    @staticmethod
    def s3(
        options: list[tuple[str, str]],
        *,
        from_env: bool = False,
        connect_timeout: float = 10.0,
        pool_idle: int = 256,
        headers: list[tuple[str, str]] = ...,
        ca_bundle: str | None = None,
    ) -> Store: ...

def read_table(
    store: Store,
    table: Any,
    buffer: Any,
    got: Any,
    total: Any,
    *,
    concurrency: int = 256,
    timeout: float = 30.0,
    segments: Any = None,
    on_segment: Callable[[int, bool], None] | None = None,
) -> tuple[list[str | None], list[str | None] | None, list[tuple[int, str, int, str]]]:
    """GET every path of ``table`` into ``buffer[slots[i]:slots[i] + caps[i]]``. ``table`` has the attributes of
    ``gdsstore.engine.remote.core.PieceTable``: ``paths``; ``starts``, ``ends``, ``expect``, ``slots`` and
    ``caps``, int64 arrays (numpy), one entry per path; ``if_match`` and ``versions``, one entry per path or None.
    ``starts[i]``/``ends[i]``: ``0, -1`` whole object, ``s, -1`` from ``s`` on, ``-n, -1`` the last ``n`` bytes,
    ``s, e`` bytes ``[s, e)``. ``expect[i]`` (-1: unknown) is the size the answer must have. ``if_match[i]``
    (None: any): the ETag the object must have, sent as ``If-Match`` and checked before the body lands (kind
    changed). ``versions[i]`` (None: the current one): the object version to read (S3 ``versionId``). Each
    item's bytes landed go into ``got`` and its object's size (-1: not told) into ``total`` (writable int64
    arrays). Returns ``(etags, versions, failed)``: each item's ETag, the version ids (None where no answer had
    one), and one ``(index, kind, HTTP status or 0, message)`` per failed item. Error kinds: not_found,
    permission, changed, status, range, range_ignored, length, short, encoding, too_large, timeout, connect, io,
    stale (the server closed a kept-alive connection before answering: worth another request at once), tls (the
    server's certificate was refused: not worth another attempt), unsupported (object_store cannot take the
    item; read it another way), invalid, panic. Requests to one store wait for their answers a few at a time at
    first, more while the server keeps up. Ctrl-C (SIGINT) stops the wave within a tick (50 ms) and raises
    ``KeyboardInterrupt`` once every request is over: nothing writes into ``buffer`` after the call returns.
    ``segments`` (int64, the row each run of items ends before: increasing, the last the number of paths) and
    ``on_segment``, both or neither: ``on_segment(k, ok)`` is called on the calling thread once every item of
    run ``k`` is over (``ok``: all landed), each run once, the last before the call returns; one that raises
    stops the wave as Ctrl-C does, and its exception is raised once every request is over."""

def write_objects(
    store: Store,
    paths: list[str],
    buffer: Any,
    starts: list[int],
    lengths: list[int],
    *,
    mode: str,
    threshold: int,
    part_size: int,
    concurrency: int = 256,
    timeout: float = 30.0,
) -> list[tuple[str | None, str | None, tuple[str, int, str] | None]]:
    """PUT ``buffer[starts[i]:starts[i] + lengths[i]]`` (any contiguous buffer) as each path, at most
    ``concurrency`` requests in flight, the GIL released. An object above ``threshold`` bytes is a multipart
    upload in parts of ``part_size`` (aborted where it fails: nothing becomes visible). ``mode``
    ``"overwrite"``, or ``"create"`` (``If-None-Match: *``: an existing object fails its item, kind exists;
    an object above ``threshold`` is refused, kind unsupported: object_store completes multipart uploads
    unconditionally).
    A request has ``timeout`` seconds plus one per MiB of its body. Returns ``(ETag, version id, error)`` per
    item, error ``(kind, HTTP status or 0, message)`` or None; kinds as :func:`read_table`'s plus exists.
    Ctrl-C (SIGINT) cuts the requests in flight, aborts the multipart uploads begun (never completed after
    it) and raises ``KeyboardInterrupt``."""

# (key, size, last-modified in ns since the epoch (0: unknown), ETag, version id)
ObjectRow = tuple[str, int, int, str | None, str | None]
# (kind, HTTP status or 0, message)
ErrorRow = tuple[str, int, str]

def head_object(store: Store, path: str, *, timeout: float = 30.0) -> tuple[ObjectRow | None, ErrorRow | None]:
    """HEAD of ``path``: its row, or the error (kinds as :func:`read_table`'s). Ctrl-C raises ``KeyboardInterrupt``."""

def list_objects(
    store: Store, prefix: str, *, delimiter: str | None = None, resume: str | None = None, timeout: float = 30.0
) -> tuple[list[ObjectRow], list[str], str | None, ErrorRow | None]:
    """Every object whose key starts with ``prefix`` (a string prefix: ``"a/b"`` lists ``a/bc``), every page
    (object_store's pagination, one request in flight). With ``delimiter``, the keys past it are grouped
    into common prefixes (each ending with it). Returns ``(objects, prefixes, resume, error)``: on an error,
    what was listed before it, and ``resume`` to pass back to list the rest (None: from the start).
    S3 stores only (else kind unsupported). Ctrl-C raises ``KeyboardInterrupt`` within a tick."""

def delete_objects(
    store: Store, paths: list[str], *, concurrency: int = 16, timeout: float = 30.0
) -> list[ErrorRow | None]:
    """DELETE each path (one path: a DELETE; more: DeleteObjects of up to 1000 keys per request, at most
    ``concurrency`` in flight). A missing key is no error. One error or None per path. Ctrl-C raises
    ``KeyboardInterrupt`` once the requests in flight are cut."""

def versions() -> tuple[tuple[str, str], ...]: ...

def split_bytes(buffer: Any, offsets: list[int], sizes: list[int], *, threads: int = 8) -> list[bytes | None]:
    """``bytes(buffer[offsets[i]:offsets[i] + sizes[i]])`` for each item (None where ``sizes[i] < 0``), the
    objects made under the GIL and filled on ``threads`` threads with it released."""

def zstd_decompress(src: Any, dst: Any, table: Any, got: Any, *, threads: int = 1) -> None:
    """Decode zstd payloads on ``threads`` threads with the GIL released: payload ``i`` is
    ``src[table[0, i]:table[0, i] + table[1, i]]`` (one frame, or several concatenated) and decodes into
    ``dst[table[2, i]:table[2, i] + table[3, i]]`` (``table``: a C-contiguous int64 array of 4 rows; slots
    disjoint and inside ``dst``). ``got`` (a writable int64 array) receives each payload's decoded size,
    -1 where zstd refused it (not zstd, corrupt, or larger than its slot): the caller decides what that
    means (a slot's bytes past the decoded size, or of a refused payload, are undefined).

    Raises:
        ValueError: a payload outside ``src``, a slot outside ``dst`` or overlapping another, a negative entry.
    """

def slice_table(sels: Sequence[Any], shape: Sequence[int]) -> bytes:
    """``(start, count, step)`` of each axis of each of ``sels`` (tuples of slices over ``shape``: Python's
    ``slice.indices``, ``count`` the slice's length), as native int64 laid out ``[item][axis][3]``.

    Raises:
        TypeError: an item is not a tuple of ``len(shape)`` slices.
        ValueError: a slice's step is 0.
    """

def read_files(
    paths: list[str],
    offsets: Any,
    sizes: Any,
    buffer: Any,
    slots: Any,
    got: Any,
    *,
    threads: int = 1,
) -> list[tuple[int, str, int, str]]:
    """Read ``sizes[i]`` bytes at ``offsets[i]`` of local file ``paths[i]`` into
    ``buffer[slots[i]:slots[i] + sizes[i]]`` (``offsets``, ``sizes``, ``slots``: int64 arrays; sizes
    ``<= 0`` are skipped), on ``threads`` threads with the GIL released. Slots must be disjoint and inside
    ``buffer``. ``got`` (a writable int64 array) receives each item's bytes landed: fewer than asked where
    the file ends first, -1 where it is missing. Returns ``(index, kind, errno, message)`` per failed item,
    kinds not_found, is_directory, permission, io, panic; a failed item lands nothing."""

def stat_files(paths: list[str], got: Any, *, threads: int = 1) -> list[tuple[int, str, int, str]]:
    """Each path's size into ``got`` (a writable int64 array): its size where it is a regular file
    (symbolic links followed), -1 where it is missing or not a regular file; on ``threads`` threads with
    the GIL released. Returns ``(index, kind, errno, message)`` per path that could not be looked up
    (permission, io)."""
