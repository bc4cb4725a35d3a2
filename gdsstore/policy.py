"""The policy: validated settings and every routing decision, each with its reason.

Every route gdsstore takes is chosen here and nowhere else. A decision is a :class:`Decision`:
the route name and a sentence a user can read in the trace ("size 8 KiB < gds_threshold 1 MiB").

Examples:
    >>> from gdsstore import policy
    >>> policy.decide_local(device=False, nbytes=1 << 20, cufile=None).route
    'posix'
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from gdsstore._config import CompatMode, Settings, WithoutNvfs, build_settings, check_keys, config, fmt_bytes
from gdsstore.engine.registry import REMOTE_SCHEMES, known_implementations
from gdsstore.errors import CuFileRequiredError

__all__ = [
    "CompatMode",
    "CuFileProbeResult",
    "CuFileRequiredError",
    "Decision",
    "Settings",
    "WithoutNvfs",
    "decide_codec",
    "decide_local",
    "decide_remote",
    "fmt_bytes",
    "remote_range_size",
    "settings",
]


def settings() -> Settings:
    """Read and validate every setting (the table in ``gdsstore._config``).

    Called on every engine operation, so the validated snapshot is reused while ``gdsstore.config``
    compares equal to the values it was built from (a dict comparison, ~1 µs, not a re-validation).
    Unknown keys are warned about once, naming the closest setting.

    Raises:
        SettingError: a ``ValueError`` naming the first bad key, its environment variable and the value.
    """
    global _cache
    current = config.config
    cached = _cache
    if cached is not None and cached[0] == current:
        return cached[1]
    check_keys(current)
    s = build_settings(config)
    _cache = (copy.deepcopy(current), s)
    return s


_cache: tuple[dict[str, Any], Settings] | None = None


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
        return Decision("posix", f"size {fmt_bytes(nbytes)} < gds_threshold {fmt_bytes(s.gds_threshold)}")
    if cufile.nvfs is False and s.cufile_without_nvfs == "posix":
        return Decision("posix", "cuFile registered without nvidia-fs (compat mode); cufile_without_nvfs=posix")
    return Decision("cufile", cufile.reason)


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
        'single PUT: 1 KiB <= remote.multipart_threshold 64 MiB'
    """
    s = s or settings()
    impl = known_implementations.get(scheme.lower())
    if impl is None or scheme.lower() not in REMOTE_SCHEMES:
        raise ValueError(f"decide_remote(): unsupported scheme {scheme!r}; use one of {', '.join(REMOTE_SCHEMES)}")
    route = impl.route
    if op == "write":
        src = "device buffer copied to host, " if device else ""
        if route == "webhdfs":
            return Decision(route, f"{src}CREATE via the datanode")
        if nbytes > s.remote_multipart_threshold:
            parts = -(-nbytes // s.remote_multipart_chunksize)
            return Decision(
                route,
                f"{src}multipart upload: {fmt_bytes(nbytes)} > remote.multipart_threshold "
                f"{fmt_bytes(s.remote_multipart_threshold)}, {parts} parts",
            )
        return Decision(
            route, f"{src}single PUT: {fmt_bytes(nbytes)} <= remote.multipart_threshold {fmt_bytes(s.remote_multipart_threshold)}"
        )
    if op != "read":
        raise ValueError(f"decide_remote(): `op` must be 'read' or 'write', got {op!r}")
    rng = remote_range_size(nbytes, s) if nbytes else s.task_size
    plan = f"{fmt_bytes(rng)} ranges, concurrency {s.remote_concurrency}"
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
