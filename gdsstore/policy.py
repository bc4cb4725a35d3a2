"""The policy: validated settings and every routing decision, each with its reason.

Every route gdsstore takes is chosen here and nowhere else. A decision is a :class:`Decision`:
the route name and a sentence a user can read in the trace ("below gds_threshold 1 MiB"). A reason
names settings and facts, never a per-call number (a size, a count): the trace keeps one row per
route and reason, and sizes go in its columns.

Examples:
    >>> from gdsstore import policy
    >>> policy.decide_local(device=False, nbytes=1 << 20, cufile=None).route
    'posix'
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from gdsstore._config import config

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gdsstore.engine.storage import StorageFacts

__all__ = [
    "CompatMode",
    "CuFileProbeResult",
    "CuFileRequiredError",
    "Decision",
    "ReadPlan",
    "Settings",
    "WithoutNvfs",
    "decide_codec",
    "decide_local",
    "decide_local_read",
    "decide_remote",
    "fmt_bytes",
    "needs_residency_probe",
    "remote_range_size",
    "settings",
]

CompatMode = Literal["auto", "on", "off"]
_COMPAT_MODES: tuple[str, ...] = ("auto", "on", "off")
WithoutNvfs = Literal["cufile", "posix"]
_WITHOUT_NVFS: tuple[str, ...] = ("cufile", "posix")


class CuFileRequiredError(RuntimeError):
    """``compat_mode="off"`` asks for cuFile but a step of its probe failed."""


@dataclass(frozen=True)
class Decision:
    """A route and the reason it was chosen."""

    route: str
    reason: str


@dataclass(frozen=True)
class CuFileProbeResult:
    """Outcome of the cuFile probe for one file: ``ok`` and, when not ok, which step failed.

    ``nvfs``: for a registered handle, whether nvidia-fs is loaded (``False``: cuFile runs its compat
    mode); ``None`` when not known (a driver probe, a failure).
    """

    ok: bool
    reason: str
    nvfs: bool | None = None


def fmt_bytes(n: float) -> str:
    """Format a byte count with binary units: ``fmt_bytes(8192) == '8 KiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if float(n).is_integer() else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _as_int(key: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"gdsstore setting {key!r} must be an integer, got {value!r}")
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"gdsstore setting {key!r} must be an integer, got {value!r}") from None
    if n < minimum:
        raise ValueError(f"gdsstore setting {key!r} must be >= {minimum}, got {n}")
    return n


def _as_float(key: str, value: object, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"gdsstore setting {key!r} must be a number, got {value!r}")
    try:
        x = float(value)
    except ValueError:
        raise ValueError(f"gdsstore setting {key!r} must be a number, got {value!r}") from None
    if positive and not x > 0:
        raise ValueError(f"gdsstore setting {key!r} must be > 0, got {x}")
    if not positive and x < 0:
        raise ValueError(f"gdsstore setting {key!r} must be >= 0, got {x}")
    return x


def _as_bool(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.lower() in ("1", "true", "yes", "on")
    raise ValueError(f"gdsstore setting {key!r} must be a boolean, got {value!r}")


def _as_status_list(key: str, value: object) -> tuple[int, ...]:
    items: Sequence[object]
    if isinstance(value, str):
        items = [v for v in value.replace(",", " ").split() if v]
    elif isinstance(value, list | tuple):
        items = value
    else:
        raise ValueError(f"gdsstore setting {key!r} must be a list of HTTP status codes, got {value!r}")
    out = []
    for v in items:
        code = _as_int(key, v, minimum=100)
        if code > 599:
            raise ValueError(f"gdsstore setting {key!r}: {code} is not an HTTP status code")
        out.append(code)
    return tuple(out)


def _cufile_stats_level(value: object) -> int:
    level = _as_int("cufile_stats_level", value, minimum=0)
    if level > 3:
        raise ValueError(f"gdsstore setting 'cufile_stats_level' must be 0..3, got {level}")
    return level


@dataclass(frozen=True)
class Settings:
    """A validated snapshot of ``gdsstore.config``; read once per operation."""

    compat_mode: CompatMode
    cufile_without_nvfs: WithoutNvfs
    gds_threshold: int
    task_size: int
    num_threads: int
    bounce_buffer_size: int
    direct_io_read: bool
    direct_io_write: bool
    fsync: bool
    cufile_probe_timeout: float
    cufile_handle_cache_size: int
    cufile_stats_level: int
    remote_max_attempts: int
    remote_retry_status: tuple[int, ...]
    remote_timeout: float
    remote_connect_timeout: float
    remote_concurrency: int
    remote_max_range_size: int
    remote_fast_http: bool
    remote_backoff_base: float
    remote_backoff_max: float
    remote_multipart_threshold: int
    remote_multipart_chunksize: int


_cache: tuple[dict[str, Any], Settings] | None = None


def settings() -> Settings:
    """Read and validate every setting; raise ``ValueError`` naming the first bad key.

    Called on every engine operation, so the validated snapshot is reused while ``gdsstore.config``
    compares equal to the values it was built from (a dict comparison, ~1 µs, not a re-validation).
    """
    global _cache
    current = config.config
    cached = _cache
    if cached is not None and cached[0] == current:
        return cached[1]
    s = _build_settings()
    _cache = (copy.deepcopy(current), s)
    return s


def _build_settings() -> Settings:
    get = config.get
    mode = get("compat_mode")
    if not isinstance(mode, str) or mode.lower() not in _COMPAT_MODES:
        raise ValueError(
            f"gdsstore setting 'compat_mode' must be one of {', '.join(_COMPAT_MODES)}, got {mode!r}"
        )
    without = get("cufile_without_nvfs")
    if not isinstance(without, str) or without.lower() not in _WITHOUT_NVFS:
        raise ValueError(
            f"gdsstore setting 'cufile_without_nvfs' must be one of {', '.join(_WITHOUT_NVFS)}, got {without!r}"
        )
    return Settings(
        compat_mode=mode.lower(),  # type: ignore[arg-type]
        cufile_without_nvfs=without.lower(),  # type: ignore[arg-type]
        gds_threshold=_as_int("gds_threshold", get("gds_threshold"), minimum=0),
        task_size=_as_int("task_size", get("task_size"), minimum=1),
        num_threads=_as_int("num_threads", get("num_threads"), minimum=1),
        bounce_buffer_size=_as_int("bounce_buffer_size", get("bounce_buffer_size"), minimum=4096),
        direct_io_read=_as_bool("direct_io_read", get("direct_io_read")),
        direct_io_write=_as_bool("direct_io_write", get("direct_io_write")),
        fsync=_as_bool("fsync", get("fsync")),
        cufile_probe_timeout=_as_float("cufile_probe_timeout", get("cufile_probe_timeout")),
        cufile_handle_cache_size=_as_int(
            "cufile_handle_cache_size", get("cufile_handle_cache_size"), minimum=1
        ),
        cufile_stats_level=_cufile_stats_level(get("cufile_stats_level")),
        remote_max_attempts=_as_int("remote.max_attempts", get("remote.max_attempts"), minimum=1),
        remote_retry_status=_as_status_list("remote.retry_status", get("remote.retry_status")),
        remote_timeout=_as_float("remote.timeout", get("remote.timeout")),
        remote_connect_timeout=_as_float("remote.connect_timeout", get("remote.connect_timeout")),
        remote_concurrency=_as_int("remote.concurrency", get("remote.concurrency"), minimum=1),
        remote_max_range_size=_as_int("remote.max_range_size", get("remote.max_range_size"), minimum=1),
        remote_fast_http=_as_bool("remote.fast_http", get("remote.fast_http")),
        remote_backoff_base=_as_float("remote.backoff_base", get("remote.backoff_base"), positive=False),
        remote_backoff_max=_as_float("remote.backoff_max", get("remote.backoff_max"), positive=False),
        remote_multipart_threshold=_as_int(
            "remote.multipart_threshold", get("remote.multipart_threshold"), minimum=5 << 20
        ),
        remote_multipart_chunksize=_as_int(
            "remote.multipart_chunksize", get("remote.multipart_chunksize"), minimum=5 << 20
        ),
    )


def decide_local(
    *,
    device: bool,
    nbytes: int,
    cufile: CuFileProbeResult | None,
    s: Settings | None = None,
) -> Decision:
    """Choose the route of one local read or write.

    Args:
        device: the buffer is device memory.
        nbytes: size of the operation.
        cufile: the cuFile probe for this file (``None`` when not probed: host buffer or compat on).
        s: settings snapshot; read from ``gdsstore.config`` when omitted.

    Returns:
        ``Decision("cufile" | "posix", reason)``.

    Raises:
        CuFileRequiredError: ``compat_mode="off"`` and the cuFile probe failed.
    """
    s = s or settings()
    if not device:
        # cuFile gains nothing for host memory: the POSIX route reads straight into it.
        return Decision("posix", "host buffer")
    if s.compat_mode == "on":
        return Decision("posix", "compat_mode=on")
    if cufile is None:
        cufile = CuFileProbeResult(False, "cuFile not probed")
    if s.compat_mode == "off":
        if not cufile.ok:
            raise CuFileRequiredError(
                f"compat_mode='off' requires cuFile, but its probe failed: {cufile.reason}"
            )
        return Decision("cufile", f"compat_mode=off; {cufile.reason}")
    if not cufile.ok:
        return Decision("posix", cufile.reason)
    if nbytes < s.gds_threshold:
        return Decision("posix", f"below gds_threshold {fmt_bytes(s.gds_threshold)}")
    if cufile.nvfs is False and s.cufile_without_nvfs == "posix":
        return Decision("posix", "cuFile registered without nvidia-fs (compat mode); cufile_without_nvfs=posix")
    return Decision("cufile", cufile.reason)


#: A local read is cold when less than this fraction of its range is in the page cache.
COLD_RESIDENT_FRACTION = 0.5
#: Only reads of more than this many ``task_size`` pieces are probed for residency: smaller ones are
#: cut the same either way, and the probe (~0.1 ms) would be a visible share of a small warm read.
COLD_PROBE_PIECES = 4
#: Concurrent streams for a cold read from a rotational disk (each one a seek away from the others).
#: Measured on the 2-core virtio machine (rotational=1), 200 MB cold, 21 shuffled rounds, 8 MiB
#: calls: one stream 1.10 GB/s median (0.25-1.67), two 0.97 (0.42-1.38).
ROTATIONAL_STREAMS = 1


@dataclass(frozen=True)
class ReadPlan:
    """How a local POSIX read is cut across the engine's threads.

    Attributes:
        threads: pieces run at most this many at a time.
        piece: most bytes per ``pread`` call (a cold plan's covers its whole stretch).
        stretches: ``True``: one contiguous stretch per thread, each read on a file descriptor of
            its own (its own readahead state); ``False``: today's ``piece``-sized pieces handed
            round-robin to the threads on one fd.
        reason: why, for the trace (``""`` when nothing was decided: a read of a few pieces).
    """

    threads: int
    piece: int
    stretches: bool
    reason: str


def needs_residency_probe(nbytes: int, s: Settings | None = None) -> bool:
    """Whether :func:`decide_local_read` wants to know how much of an ``nbytes`` read is cached.

    Examples:
        >>> s = settings()
        >>> needs_residency_probe(s.task_size, s), needs_residency_probe(64 * s.task_size, s)
        (False, True)
    """
    s = s or settings()
    return nbytes > COLD_PROBE_PIECES * s.task_size


def decide_local_read(
    *,
    nbytes: int,
    resident: float | None,
    storage: StorageFacts | None,
    s: Settings | None = None,
) -> ReadPlan:
    """Cut one local POSIX read (host buffer, or device buffer through the bounce path).

    A read from the page cache is a memory copy: ``task_size`` pieces over ``num_threads`` threads
    balance best. A cold read is disk-bound, and pieces handed round-robin to threads on one file
    descriptor look random to the kernel, whose readahead then stops helping: on the 2-core virtio
    machine a cold 200 MB read ran at 0.61x ``numpy.fromfile`` that way. A cold read is cut into
    one stretch per thread, each read by one ``pread`` on a descriptor of its own: measured there
    (15 shuffled rounds, medians against numpy.fromfile) one whole-stretch read 0.96-1.02x, the same
    in 8 MiB calls 0.81x, and ``POSIX_FADV_SEQUENTIAL`` lowers both (0.89x one stream, 0.77x two).
    A rotational disk (as the kernel reports it: virtual disks often do) gets at most
    :data:`ROTATIONAL_STREAMS` streams.

    Args:
        nbytes: size of the read.
        resident: fraction of the range in the page cache (:func:`gdsstore.pagecache.resident_fraction`),
            ``None`` when not probed (see :func:`needs_residency_probe`) or when the probe failed.
        storage: the device under the file (:func:`gdsstore.engine.storage.storage_facts`), ``None``
            when not known.
        s: settings snapshot; read from ``gdsstore.config`` when omitted.

    Returns:
        The :class:`ReadPlan`; its reason names residency and device, never a per-call number (the
        trace keeps one row per route and reason).

    Examples:
        >>> from gdsstore.engine.storage import StorageFacts
        >>> plan = decide_local_read(nbytes=1 << 30, resident=0.0, storage=StorageFacts("rotational", "sda"))
        >>> plan.stretches, plan.reason
        (True, 'cold (under half in page cache), rotational sda: one stretch, read whole on its own fd')
        >>> decide_local_read(nbytes=1 << 30, resident=1.0, storage=None).stretches
        False
    """
    s = s or settings()
    today = ReadPlan(s.num_threads, s.task_size, False, "")
    if resident is None:
        return today
    if resident >= COLD_RESIDENT_FRACTION:
        return ReadPlan(s.num_threads, s.task_size, False, "in page cache: num_threads threads on one fd")
    where = storage.describe() if storage is not None else "unknown device"
    cold = f"cold (under half in page cache), {where}"
    whole = max(nbytes, s.task_size)  # one pread per stretch (the kernel splits it into I/Os)
    if storage is not None and storage.kind == "rotational":
        streams = min(s.num_threads, ROTATIONAL_STREAMS)
        how = "one stretch, read whole on its own fd" if streams == 1 else f"at most {streams} stretches, each read whole on its own fd"
        return ReadPlan(streams, whole, True, f"{cold}: {how}")
    return ReadPlan(s.num_threads, whole, True, f"{cold}: one stretch per thread, each read whole on its own fd")


def remote_range_size(nbytes: int, s: Settings | None = None) -> int:
    """Size of the ranges a remote read of ``nbytes`` is split into.

    One range per concurrent request (``nbytes / remote.concurrency``), but never smaller than
    ``task_size`` (tiny requests cost more than they transfer) nor larger than ``remote.max_range_size``
    (bounded pinned memory, balanced threads).

    Examples:
        >>> s = settings()
        >>> remote_range_size(1 << 30, s) == min(s.remote_max_range_size, max(s.task_size, (1 << 30) // s.remote_concurrency))
        True
    """
    s = s or settings()
    per_request = -(-nbytes // s.remote_concurrency)
    return max(s.task_size, min(s.remote_max_range_size, per_request))


def needs_cufile_probe(*, device: bool, s: Settings | None = None) -> bool:
    """Whether the route decision for a file depends on probing cuFile."""
    s = s or settings()
    return device and s.compat_mode != "on"


_REMOTE_ROUTES = {"s3": "s3", "http": "http", "https": "http", "webhdfs": "webhdfs", "swebhdfs": "webhdfs"}


def decide_remote(
    *, scheme: str, device: bool, op: str = "read", nbytes: int = 0, s: Settings | None = None
) -> Decision:
    """Choose the route of one remote read or write: the transport of ``scheme`` and how bytes move.

    Args:
        scheme: URL scheme (``s3``, ``http``, ``https``, ``webhdfs``, ``swebhdfs``).
        device: the buffer is device memory.
        op: ``"read"`` (concurrent ranges) or ``"write"`` (a whole-object upload).
        nbytes: size of the read (it sets the range size) or the write (S3 switches to multipart
            above ``remote.multipart_threshold``).
        s: settings snapshot; read from ``gdsstore.config`` when omitted.

    Returns:
        ``Decision("http" | "s3" | "webhdfs", reason)``.

    Examples:
        >>> decide_remote(scheme="https", device=False).route
        'http'
        >>> decide_remote(scheme="s3", device=False, op="write", nbytes=1024).reason
        'single PUT (<= remote.multipart_threshold 64 MiB)'
    """
    s = s or settings()
    route = _REMOTE_ROUTES.get(scheme.lower())
    if route is None:
        raise ValueError(f"decide_remote(): unsupported scheme {scheme!r}; use one of {', '.join(_REMOTE_ROUTES)}")
    if op == "write":
        src = "device buffer copied to host, " if device else ""
        if route == "webhdfs":
            return Decision(route, f"{src}CREATE via the datanode")
        limit = fmt_bytes(s.remote_multipart_threshold)
        if nbytes > s.remote_multipart_threshold:
            return Decision(
                route,
                f"{src}multipart upload (> remote.multipart_threshold {limit}, "
                f"parts of {fmt_bytes(s.remote_multipart_chunksize)})",
            )
        return Decision(route, f"{src}single PUT (<= remote.multipart_threshold {limit})")
    if op != "read":
        raise ValueError(f"decide_remote(): `op` must be 'read' or 'write', got {op!r}")
    # The range size follows the read's size (remote_range_size): the reason names its bounds.
    lo, hi = fmt_bytes(s.task_size), fmt_bytes(max(s.task_size, s.remote_max_range_size))
    plan = f"ranges of {lo if lo == hi else f'{lo}-{hi}'}, concurrency {s.remote_concurrency}"
    if device:
        # Sockets cannot write into device memory: bodies land in the pinned ring, then async H2D.
        return Decision(route, f"device buffer: {plan}, pinned bounce ring + async H2D")
    return Decision(route, f"host buffer: {plan}, read in place")


#: Chunk formats nvCOMP decodes bit-compatibly with numcodecs, and those the GPU also writes
#: (gzip writes on the CPU: its trailer needs a CRC-32 of the data, numcodecs' bytes are the norm).
GPU_DECODABLE = frozenset({"zstd", "gzip", "lz4"})
GPU_ENCODABLE = frozenset({"zstd", "lz4"})
_NVCOMP_ALGORITHM = {"zstd": "zstd", "gzip": "deflate", "lz4": "lz4"}
_CPU_ONLY_CODEC = {"blosc": "blosc framing (blocks, shuffle) has no nvCOMP decoder"}


def decide_codec(
    fmt: str, *, device: bool, encode: bool = False, gpu: bool = True, nvcomp_error: str | None = None
) -> Decision:
    """Route of one batched decode (or encode) of chunks in format ``fmt``.

    Args:
        fmt: ``"zstd"``, ``"gzip"``, ``"lz4"``, ``"blosc"``, ...
        device: the chunk bytes are (or are to be) in device memory.
        encode: decide for a write instead of a read.
        gpu: a CUDA GPU is usable (cupy and a driver).
        nvcomp_error: why nvCOMP cannot be used, or ``None`` when it loads.

    Returns:
        ``Decision("gpu-decode" | "gpu-encode" | "cpu-codec", reason)``.

    Examples:
        >>> decide_codec("zstd", device=True).reason
        'nvCOMP batched zstd'
        >>> decide_codec("zstd", device=False).reason
        'host buffer'
        >>> decide_codec("blosc", device=True).route
        'cpu-codec'
    """
    if not device:
        return Decision("cpu-codec", "host buffer")
    if fmt in _CPU_ONLY_CODEC:
        return Decision("cpu-codec", _CPU_ONLY_CODEC[fmt])
    if fmt not in (GPU_ENCODABLE if encode else GPU_DECODABLE):
        if encode and fmt == "gzip":
            return Decision("cpu-codec", "gzip writes on the CPU (trailer CRC-32; numcodecs-identical output)")
        return Decision("cpu-codec", f"no nvCOMP codec for {fmt!r}")
    if not gpu:
        return Decision("cpu-codec", "no CUDA GPU (cupy or the driver missing)")
    if nvcomp_error is not None:
        return Decision("cpu-codec", nvcomp_error)
    return Decision("gpu-encode" if encode else "gpu-decode", f"nvCOMP batched {_NVCOMP_ALGORITHM[fmt]}")
