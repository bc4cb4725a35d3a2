"""The bridge to the native I/O core (``gdsstore._core``, Rust over ``object_store``), the only HTTP(S) and S3
transport: :func:`read_table` hands it a wave as columns (a :class:`PieceTable`: one call, the GIL released,
answered as a :class:`TableResult`) and retries transient failures for the bytes not yet landed, :func:`read_one`
the same of one piece; :func:`write_objects`, :func:`head`, :func:`list_objects` and :func:`delete_objects` send
uploads, HEAD, LIST and DELETE; a transport the core does not carry (WebHDFS) is a :class:`PiecesStore`. How the
core runs and checks a wave: docs/remote.md ("The native core")."""

from __future__ import annotations

import abc
import dataclasses
import os
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import numpy as np

from gdsstore import policy
from gdsstore.engine import native
from gdsstore.engine.remote.redact import scrub_text
from gdsstore.engine.remote.retry import RetryPolicy, status_error
from gdsstore.errors import (
    RangeMismatchError,
    RangeNotSupportedError,
    RemoteIOError,
    StaleConnectionError,
    TransientError,
)

if TYPE_CHECKING:
    from gdsstore import _core as gdsstore_core

__all__ = [
    "Answer", "CoreResult", "CoreRoot", "CoreSource", "Failed", "ObjectRow", "Piece", "PieceTable", "PiecesStore",
    "TableResult", "delete_objects", "head", "http_store", "list_objects", "read_one", "read_table", "request_timeout",
    "s3_store", "split_bytes", "wave_reason", "write_objects",
]

_lock = threading.Lock()
_stores: dict[tuple[Any, ...], tuple[int, Any, Any]] = {}
#: object_store's S3 options that are credentials: a store is rebuilt when they change, never kept beside.
_CREDENTIALS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")

_TRANSIENT_KINDS = frozenset({"timeout", "connect", "io"})
#: What to do about a server that answers range requests with the whole object.
RANGE_FIX = (
    "this server does not support HTTP range requests (python -m http.server does not): read whole objects "
    "(offset 0, f.size bytes: one request without a Range header), or serve the data with a server that "
    "supports ranges (nginx, Apache, caddy, an object store)"
)
#: What to do about a certificate the core refused (it trusts the system's CA certificates).
TLS_FIX = ("not retried: pass `verify=` the path of a CA bundle (PEM) that signed the server's certificate "
           "(or set SSL_CERT_FILE), or `verify=False` to skip the check on a network you trust")


def module() -> Any:
    """The loaded ``gdsstore._core``; raises :class:`RemoteIOError` naming the fix where it is missing."""
    mod = native.load()
    if mod is None:
        raise RemoteIOError(f"HTTP(S) and S3 go through gdsstore's native core: {native.unavailable_reason()}; reinstall gdsstore "
                            "(`pip install .` in a clone builds it with cargo; docs/install.md)")
    return mod


def wave_reason(s: policy.Settings, store: Any = None) -> str:
    """The trace's words for who sends a wave's requests to ``store`` (None: the native core's)."""
    if isinstance(store, PiecesStore):
        return f"urllib3, {policy.python_wave_concurrency(s)} requests at once (remote.wave_concurrency)"
    return f"native core, one call (remote.wave_concurrency {s.remote_wave_concurrency})"


def _cached(key: tuple[Any, ...] | None, build: Any, version: Any = None) -> Any:
    # One store per configuration and process: its connection pool is reused across waves. Another
    # ``version`` (new credentials) replaces it: stores of expired credentials are not kept. No key: not kept.
    if key is None:
        return build()
    pid = os.getpid()
    with _lock:
        hit = _stores.get(key)
        if hit is not None and hit[0] == pid and hit[1] == version:
            return hit[2]
    store = build()
    with _lock:
        _stores[key] = (pid, version, store)
    return store


def _tls(verify: bool | str) -> dict[str, Any]:
    """The client options of a ``verify`` setting: ``False`` accepts any certificate, a path adds the CA
    bundle (PEM) to the system's certificates."""
    if verify is False:
        return {"options": [("allow_invalid_certificates", "true")]}
    if isinstance(verify, str):
        return {"ca_bundle": verify}
    return {}


def http_store(base: str, *, connect_timeout: float, pool_idle: int = 256, headers: dict[str, str] | None = None,
               verify: bool | str = True, cached: bool = True) -> gdsstore_core.Store:
    """The core's store of the objects under ``base`` (``scheme://host[:port]/``, or one object's URL with its
    query and path ``""``): ``headers`` sent with every request (never shown), ``verify`` as :func:`_tls`.
    Proxies come from ``HTTP(S)_PROXY``/``NO_PROXY``. ``cached=False``: a store of its own, not kept (a
    presigned URL: one store per object would grow the cache without bound)."""
    mod, extra = module(), _tls(verify)
    sent = dict(headers or {})
    if not any(k.lower() == "accept-encoding" for k in sent):
        sent["Accept-Encoding"] = "identity"  # a compressed body would not be the object's bytes
    extra["headers"] = sorted(sent.items())
    key = ("http", base, connect_timeout, pool_idle, repr(extra)) if cached else None
    store: gdsstore_core.Store = _cached(
        key, lambda: mod.Store.http(base, connect_timeout=connect_timeout, pool_idle=pool_idle, **extra))
    return store


def s3_store(options: dict[str, str], *, connect_timeout: float, pool_idle: int = 256,
             verify: bool | str = True) -> gdsstore_core.Store:
    """The core's store of one bucket; ``options`` are object_store's ``AmazonS3ConfigKey`` names, the
    credentials among them resolved by botocore (requests are signed in the header). ``verify`` as :func:`_tls`.
    """
    mod = module()
    extra = _tls(verify)
    opts = {**options, **dict(extra.pop("options", []))}
    config = tuple(sorted((k, v) for k, v in opts.items() if k not in _CREDENTIALS))
    creds = tuple(opts.get(k) for k in _CREDENTIALS)
    store: gdsstore_core.Store = _cached(
        ("s3", config, connect_timeout, pool_idle, repr(extra)),
        lambda: mod.Store.s3(sorted(opts.items()), connect_timeout=connect_timeout, pool_idle=pool_idle, **extra),
        creds)
    return store


#: One piece of a wave as a row: ``(path, start, end, expect, slot, cap)``: ``path`` bytes ``[start, end)``
#: (``end`` None: to the object's end; ``start`` negative: the last ``-start`` bytes) into ``buffer[slot:slot +
#: cap]``; ``expect``: the size the answer must have (None: unknown).
Piece = tuple[str, int, int | None, int | None, int, int]
#: A failed piece as a transport answers it: ``(index, kind, HTTP status or 0, message)``, or a
#: :class:`PiecesStore`'s ``(index, exception of gdsstore's tree, 0, "")``.
Failed = tuple[int, str | BaseException, int, str]
#: A wave's answer beside the counts it writes: each piece's ETag, the version ids (None: no answer had one),
#: the failed pieces.
Answer = tuple[list[str | None], list[str | None] | None, list[Failed]]


@dataclass(slots=True)
class CoreResult:
    """What one piece got: ``size`` bytes landed (prefix of its slot), the object's ``total`` size, its
    identity (``etag``, ``version``), and ``error`` (None: all landed) with its ``kind``, HTTP ``status`` and
    the ``attempts`` made."""

    size: int = 0
    total: int = -1
    etag: str | None = None
    version: str | None = None
    kind: str | None = None
    status: int = 0  # the HTTP status of a failure (kind "status", "not_found", "permission"...)
    error: BaseException | None = None
    attempts: int = 0


@dataclass(slots=True)
class PieceTable:
    """A wave's pieces as columns, one entry each (:data:`Piece`'s fields, -1 for None): ``paths``, and
    int64 arrays ``starts``, ``ends``, ``expect``, ``slots`` and ``caps``; per piece or None for all,
    ``if_match`` (the ETag the object must have, sent as ``If-Match``) and ``versions`` (the object version to
    read, S3 ``versionId``)."""

    paths: list[str]
    starts: np.ndarray
    ends: np.ndarray
    expect: np.ndarray
    slots: np.ndarray
    caps: np.ndarray
    if_match: list[str | None] | None = None
    versions: list[str | None] | None = None

    @classmethod
    def of(cls, rows: Sequence[Piece], *, if_match: str | None = None, version: str | None = None) -> PieceTable:
        """The table of ``rows``, each of the object with ETag ``if_match`` or of ``version`` where given."""
        starts, ends, expect, slots, caps = (np.array([-1 if r[c] is None else r[c] for r in rows], np.int64)
                                             for c in range(1, 6))
        n = len(rows)
        return cls([r[0] for r in rows], starts, ends, expect, slots, caps, [if_match] * n if if_match else None,
                   [version] * n if version else None)

    def row(self, i: int) -> Piece:
        """Piece ``i`` as a :data:`Piece`."""
        end, expect = int(self.ends[i]), int(self.expect[i])
        return (self.paths[i], int(self.starts[i]), None if end < 0 else end, None if expect < 0 else expect,
                int(self.slots[i]), int(self.caps[i]))

    def take(self, rows: np.ndarray) -> PieceTable:
        """The pieces ``rows`` (an int64 array of indices), in that order, as a table of their own."""
        js = rows.tolist()
        tags, versions = ([col[j] for j in js] if col else None for col in (self.if_match, self.versions))
        return PieceTable([self.paths[j] for j in js], self.starts[rows], self.ends[rows], self.expect[rows],
                          self.slots[rows], self.caps[rows], tags, versions)


@dataclass(slots=True)
class TableResult:
    """What a :class:`PieceTable`'s pieces got, as columns: ``size`` bytes landed (a prefix of each slot),
    ``total`` the object's size (-1: not told), ``etags`` and ``versions`` (None: no answer had one) of each
    answer, the pieces that failed for good, each with its :class:`CoreResult` (``error``, ``kind``,
    ``status``, ``total``), and those whose object is missing (``missing``: answered 404, no exception made)."""

    size: np.ndarray
    total: np.ndarray
    etags: list[str | None]
    versions: list[str | None] | None
    failed: dict[int, CoreResult]
    missing: list[int] = dataclasses.field(default_factory=list)

    def answered(self) -> np.ndarray:
        """Which pieces landed their answer: neither failed nor missing (a bool per piece)."""
        ok = np.ones(len(self.size), bool)
        ok[[*self.failed, *self.missing]] = False
        return ok

    def result(self, i: int) -> CoreResult:
        """Piece ``i``'s :class:`CoreResult` (of a piece that failed, or landed)."""
        return self.failed.get(i) or CoreResult(int(self.size[i]), int(self.total[i]), self.etags[i],
                                                self.versions[i] if self.versions else None)


class PiecesStore(abc.ABC):
    """A transport the native core does not carry (WebHDFS: object_store has none): it reads a table's pieces
    itself and answers as the core's ``read_table`` does, its failures :data:`Failed` rows (:func:`read_table`
    retries the transient ones)."""

    @abc.abstractmethod
    def read_table(self, table: PieceTable, buffer: Any, got: np.ndarray, total: np.ndarray, *, concurrency: int,
                   timeout: float) -> Answer:
        """``gdsstore._core.read_table`` of this store: each piece's bytes landed into ``got`` and its object's
        size (-1: unknown) into ``total``."""


def _error(kind: str, status: int, msg: str, what: str, retry: RetryPolicy) -> BaseException:
    """The core's failure as gdsstore's exception tree (``TransientError``: worth another attempt)."""
    text = f"{what}: {scrub_text(msg)}"
    if kind in ("not_found", "permission", "status"):
        code = status or (404 if kind == "not_found" else 403)
        try:
            label = f"{what}: {code} {HTTPStatus(code).phrase}"
        except ValueError:  # a status the standard does not name
            label = f"{what}: HTTP {code}"
        return status_error(code, label, retry)
    if kind == "range_ignored":
        return RangeNotSupportedError(f"{what}: the server ignored the Range header (answered 200); {RANGE_FIX}")
    if kind in ("range", "short"):
        return RangeMismatchError(f"{what}: answer is not the range asked: {scrub_text(msg)}")
    if kind == "stale":
        return StaleConnectionError(text)
    if kind == "exists":  # a create-only upload
        return FileExistsError(f"{what}: {status or 412}: the key exists")
    if kind in _TRANSIENT_KINDS:
        return TransientError(text)
    if kind == "tls":
        return RemoteIOError(f"{text}; {TLS_FIX}")
    if kind == "changed":
        why = "412 Precondition Failed" if status == 412 else scrub_text(msg)
        return RangeMismatchError(f"{what}: the object changed while it was being read ({why}); "
                                  "its bytes would mix two versions: read it again")
    return RemoteIOError(text)


def _describe(where: str, p: Piece) -> str:
    """The request as its messages name it, with its ``Range`` header's value.

    Examples:
        >>> [_describe("s3://b/", ("k", *r, None, 0, 0)) for r in [(0, None), (4, 8), (4, None), (-100, None)]]
        ['GET s3://b/k', 'GET s3://b/k bytes=4-7', 'GET s3://b/k bytes=4-', 'GET s3://b/k bytes=-100']
    """
    path, start, end = p[:3]
    if start == 0 and end is None:
        return f"GET {where}{path}"
    last = "" if start < 0 or end is None else end - 1  # a suffix (start < 0) is "bytes=-n"
    return f"GET {where}{path} bytes={start}{'' if start < 0 else '-'}{last}"


def _merge(out: TableResult, i: int, got: int, total: int, etag: str | None, version: str | None) -> Failed | None:
    """Fold another attempt's answer of piece ``i`` into ``out``; an ETag other than that of the bytes landed
    before is an error (the object changed between the attempts)."""
    first = int(out.size[i]) == 0
    if not first and out.etags[i] is not None and etag is not None and etag != out.etags[i]:
        return i, "changed", 0, f"ETag {etag} differs from the first answer's {out.etags[i]}"
    if etag is not None and (first or out.etags[i] is None):
        out.etags[i] = etag
        if version is not None:
            out.versions = out.versions or [None] * len(out.etags)
            out.versions[i] = version
    if total > 0 and (first or out.total[i] < 0):
        out.total[i] = total
    out.size[i] += got
    return None


def _rest(table: PieceTable, left: PieceTable, i: int, landed: int, total: int) -> None:
    """Set piece ``i`` of ``left`` to what is still to fetch of ``table``'s after ``landed`` bytes of it arrived."""
    if table.ends[i] < 0 and total >= 0:
        left.ends[i] = total
    left.starts[i], left.slots[i] = table.starts[i] + landed, table.slots[i] + landed
    left.caps[i] = table.caps[i] - landed
    if table.expect[i] >= 0:
        left.expect[i] = table.expect[i] - landed


def read_table(store: Any, where: str, table: PieceTable, buffer: Any, *, retry: RetryPolicy, concurrency: int,
               timeout: float, missing: bool = True, segments: np.ndarray | None = None,
               on_segment: Callable[[int, bool], None] | None = None) -> TableResult:
    """Fetch every piece of ``table`` into ``buffer`` (a writable uint8 array): one call of the core with the
    columns, answered as columns (no Python object per piece but its path and ETag); the pieces that failed
    transiently are asked again, as a smaller table, for the bytes they have not landed yet.

    ``store``: from :func:`http_store` or :func:`s3_store`, or a :class:`PiecesStore`; ``where``: the URL prefix
    of the paths, for messages (no secrets); slots must lie in ``buffer`` and not overlap; ``concurrency``:
    requests in flight; ``timeout``: seconds without an answer or a body byte; ``missing``: a piece whose object
    is missing (404) is listed in :attr:`TableResult.missing` (zarr's fill value, no exception made), else it
    fails as the others do. ``segments`` (the row each run of pieces ends before, increasing, the last
    ``len(table)``) and ``on_segment``: ``on_segment(k, ok)`` is called on this thread once every piece of run
    ``k`` of the first attempt is over, ``ok`` where all landed (a :class:`PiecesStore` tells none).

    Returns:
        The pieces' sizes, ETags and failures for good: ``FileNotFoundError`` for 404, ``PermissionError``
        for 401/403, ``RemoteIOError`` once ``remote.max_attempts`` are spent, ..., each with its ``kind``
        (``"unsupported"``/``"too_large"``: the caller reads it another way).
    """
    n = len(table.paths)
    out = TableResult(np.zeros(n, np.int64), np.full(n, -1, np.int64), [None] * n, None, {})
    left = table  # what is still to fetch of each piece: a copy once one failed
    why: dict[int, tuple[str | None, int, int]] = {}  # each failed piece's last kind, status and attempt
    errors: dict[int, BaseException] = {}
    native_call = None if isinstance(store, PiecesStore) else partial(module().read_table, store)
    call: Callable[..., Answer] = native_call or store.read_table

    def attempt(todo: list[int], number: int) -> list[tuple[int, str, BaseException]]:
        nonlocal left
        rows = np.array(todo, np.int64)
        ask = left if number == 1 else left.take(rows)
        got, total = np.zeros(len(todo), np.int64), np.full(len(todo), -1, np.int64)
        told = {} if number > 1 or on_segment is None or native_call is None else {
            "segments": segments, "on_segment": on_segment}
        etags, versions, failures = call(ask, buffer, got, total, concurrency=concurrency, timeout=timeout, **told)
        if number == 1:
            out.size, out.total, out.etags, out.versions = got, total, etags, versions
            total[total == 0] = -1  # 0 tells nothing
            bad = failures
        else:  # each answer folded in, its failure (or a changed ETag) in the words of the table's piece
            of = {f[0]: f for f in failures}
            bad = []
            for j, i in enumerate(todo):
                changed = _merge(out, i, int(got[j]), int(total[j]), etags[j], versions[j] if versions else None)
                if changed or j in of:
                    bad.append(changed or (i, *of[j][1:]))
        if bad and left is table:
            left = table.take(np.arange(n))
        failed = []
        for i, kind, status, msg in bad:
            if kind == "not_found" and missing:
                out.missing.append(i)
                continue
            what = _describe(where, table.row(i))
            why[i] = (None, 0, number) if isinstance(kind, BaseException) else (kind, status, number)
            failed.append((i, what, kind if isinstance(kind, BaseException) else _error(kind, status, msg, what, retry)))
            _rest(table, left, i, int(out.size[i]), int(out.total[i]))
        return failed

    retry.run(n, attempt, errors.__setitem__)
    for i, exc in errors.items():
        kind, status, number = why[i]
        out.failed[i] = replace(out.result(i), kind=kind, status=status, error=exc, attempts=number)
    return out


def request_timeout(s: policy.Settings) -> float:
    """Seconds without an answer or a body byte before a request fails (``remote.timeout``; 0: none)."""
    return s.remote_timeout or 1e9


def read_one(store: Any, where: str, piece: Piece, buffer: Any, s: policy.Settings | None = None, *,
             if_match: str | None = None, version: str | None = None) -> CoreResult:
    """:func:`read_table` of one piece (``if_match``, ``version``: as :meth:`PieceTable.of`), under the settings
    in force; a missing object fails it (``FileNotFoundError``)."""
    s = s or policy.settings()
    res = read_table(store, where, PieceTable.of([piece], if_match=if_match, version=version), buffer,
                     retry=RetryPolicy.from_settings(s), concurrency=1, timeout=request_timeout(s), missing=False)
    return res.result(0)


def split_bytes(buffer: Any, offsets: Sequence[int], sizes: Sequence[int]) -> list[bytes | None]:
    """``bytes`` of each item ``buffer[offsets[i]:offsets[i] + sizes[i]]`` (None where ``sizes[i] < 0``).

    The objects are made at once and filled on several threads with the GIL released: fresh memory is paid
    for in page faults as it is first written, and one thread copying thousands of small objects takes
    longer than the wave that fetched them.
    """
    offs, lens = np.asarray(offsets, np.int64).tolist(), np.asarray(sizes, np.int64).tolist()
    threads = min(8, os.cpu_count() or 1) if sum(lens) >= (4 << 20) else 1
    out: list[bytes | None] = module().split_bytes(buffer, offs, lens, threads=threads)
    return out


def write_objects(store: Any, whats: Sequence[str], paths: Sequence[str], buffer: Any, spans: Sequence[tuple[int, int]],
                  *, create: bool, threshold: int, part_size: int, retry: RetryPolicy, concurrency: int,
                  timeout: float) -> list[BaseException | None]:
    """Upload ``buffer[start:start + length]`` (one contiguous host buffer) of each ``spans[i]`` as ``paths[i]``
    (``whats[i]`` in messages, no secrets), retrying transient failures. ``create``: fail an item whose object
    exists (``FileExistsError``) instead of replacing it; above ``threshold`` bytes an object is a multipart
    upload in parts of ``part_size``. Returns each item's failure for good, None where it was written
    (``FileExistsError``, ``PermissionError``, ``FileNotFoundError``, ``RemoteIOError`` once
    ``remote.max_attempts`` are spent...)."""
    mod = module()
    errors: list[BaseException | None] = [None] * len(paths)

    def attempt(todo: list[int], number: int) -> list[tuple[int, str, BaseException]]:
        rows = mod.write_objects(
            store, [paths[i] for i in todo], buffer, [spans[i][0] for i in todo], [spans[i][1] for i in todo],
            mode="create" if create else "overwrite", threshold=threshold, part_size=part_size,
            concurrency=concurrency, timeout=timeout,
        )
        return [(i, whats[i], _error(err[0], err[1], err[2], whats[i], retry))
                for i, (_, _, err) in zip(todo, rows, strict=True) if err is not None]

    retry.run(len(paths), attempt, errors.__setitem__)
    return errors


#: One object as the core lists or HEADs it: (key, size, last-modified ns (0: unknown), ETag, version).
ObjectRow = tuple[str, int, int, str | None, str | None]


def head(root: CoreRoot, path: str) -> ObjectRow:
    """HEAD of ``path`` through the core, retried as a read is (``FileNotFoundError``: no such object)."""
    s = policy.settings()
    what, retry = f"HEAD {root.base}{path}", RetryPolicy.from_settings(s)

    def attempt() -> ObjectRow:
        answer: tuple[ObjectRow, None] | tuple[None, tuple[str, int, str]] = module().head_object(
            root.store(), path, timeout=request_timeout(s))
        if answer[1] is not None:
            raise _error(*answer[1], what, retry)
        return answer[0]

    return retry.call(attempt, what)


def list_objects(root: CoreRoot, prefix: str, delimiter: str | None = None) -> tuple[list[ObjectRow], list[str]]:
    """Every object whose key starts with ``prefix`` through the core, all pages, and with ``delimiter`` the
    common prefixes (each ending with it). A transient failure takes the listing up again at the page that
    failed."""
    s = policy.settings()
    what, retry = f"LIST {root.base}{prefix}", RetryPolicy.from_settings(s)
    objects: list[ObjectRow] = []
    prefixes: list[str] = []
    resume: str | None = None

    def attempt() -> None:
        nonlocal resume
        page: tuple[list[ObjectRow], list[str], str | None, tuple[str, int, str] | None] = module().list_objects(
            root.store(), prefix, delimiter=delimiter, resume=resume, timeout=request_timeout(s))
        objects.extend(page[0])
        prefixes.extend(page[1])
        resume = page[2]
        if page[3] is not None:
            raise _error(*page[3], what, retry)

    retry.call(attempt, what)
    return objects, prefixes


def delete_objects(root: CoreRoot, paths: Sequence[str]) -> None:
    """DELETE every path through the core (a missing one is no error), retrying transient failures; raises the
    first failure for good (``PermissionError``, ``RemoteIOError``...)."""
    s = policy.settings()
    retry = RetryPolicy.from_settings(s)
    failed: list[BaseException] = []
    store = root.store()

    def attempt(todo: list[int], number: int) -> list[tuple[int, str, BaseException]]:
        rows: list[tuple[str, int, str] | None] = module().delete_objects(
            store, [paths[i] for i in todo], concurrency=s.remote_concurrency, timeout=request_timeout(s))
        out: list[tuple[int, str, BaseException]] = []
        for i, err in zip(todo, rows, strict=True):
            if err is not None:
                what = f"DELETE {root.base}{paths[i]}"
                out.append((i, what, _error(*err, what, retry)))
        return out

    retry.run(len(paths), attempt, lambda i, exc: failed.append(exc))
    if failed:
        raise failed[0]


@dataclass(frozen=True, slots=True)
class CoreRoot:
    """Where a backend's objects are, set once per backend: ``store()`` gives the store of this moment (S3:
    a new one when botocore has refreshed the credentials), ``base`` the URL prefix of messages (no
    secrets), ``prefix`` what goes before a key in a path."""

    store: Callable[[], Any]
    base: str
    prefix: str = ""


class CoreSource:
    """One object, as :class:`~gdsstore.engine.remote.reader.RemoteFile` reads it: its size, ETag and
    version from one GET whose body is not taken (:meth:`stat`), then its ranges (each of the version
    :meth:`stat` saw where ``pin_version``: S3's ``version_aware``)."""

    pin_version = False

    def __init__(self, root: CoreRoot, path: str, url: str, *, route: str, scheme: str) -> None:
        self.core = root
        self.path = path
        self.url = url  # no secrets
        self.route = route
        self.scheme = scheme
        self.etag: str | None = None
        self.version_id: str | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    def stat(self) -> int:
        """The object's size (remembering its ETag and version): a GET with no room for its body, which the
        core answers with the size its answer told (a server without ``Range`` answers it too)."""
        res = read_one(self.core.store(), self.core.base, (self.path, 0, None, None, 0, 0), np.empty(1, np.uint8))
        if res.error is not None and res.kind != "too_large":
            raise res.error
        size = res.size if res.error is None else res.total  # landed whole: an empty object
        if size < 0:
            raise RemoteIOError(f"HEAD {self.url}: the server does not tell the object's size")
        self.etag, self.version_id = res.etag, res.version
        return size

    def version(self) -> Hashable:
        """The object's identity now, compared before and after a read of several ranges by a transport whose
        requests cannot say "only this version" (WebHDFS, no ETag); None here: ranges carry ``If-Match``."""
        return None
