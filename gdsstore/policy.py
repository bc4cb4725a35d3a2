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
from typing import Any, Literal

from gdsstore._config import CompatMode, Settings, WithoutNvfs, build_settings, check_keys, config, fmt_bytes
from gdsstore.engine.registry import REMOTE_SCHEMES, known_implementations
from gdsstore.errors import CuFileRequiredError

__all__ = [
    "CompatMode",
    "CuFileProbeResult",
    "CuFileRequiredError",
    "Decision",
    "ReadPlan",
    "Settings",
    "Sharding",
    "StorageFacts",
    "StorageKind",
    "WithoutNvfs",
    "ZarrBatchFacts",
    "decide_codec",
    "decide_local",
    "decide_local_batch",
    "decide_local_read",
    "decide_remote",
    "decide_zarr_read",
    "decide_zarr_write",
    "fmt_bytes",
    "needs_residency_probe",
    "python_wave_concurrency",
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
    if nbytes < s.gds_threshold:  # POSIX whatever cuFile could do: no probe needed (needs_cufile_probe)
        return Decision("posix", f"below gds_threshold {fmt_bytes(s.gds_threshold)}")
    if not cufile.ok:
        return Decision("posix", cufile.reason)
    if cufile.nvfs is False and s.cufile_without_nvfs == "posix":
        return Decision("posix", "cuFile registered without nvidia-fs (compat mode); cufile_without_nvfs=posix")
    return Decision("cufile", cufile.reason)


#: A local read is cold when less than this fraction of its range is in the page cache.
COLD_RESIDENT_FRACTION = 0.5
#: Only reads of more than this many ``task_size`` pieces are probed for residency: smaller ones are
#: cut the same either way, and the probe (~0.1 ms) would be a visible share of a small warm read.
COLD_PROBE_PIECES = 4
#: Concurrent streams for a cold read from a rotational disk: each one is a seek away from the others, so
#: a second stream reads no faster (docs/performance.md, "Measurements behind the engine's choices").
ROTATIONAL_STREAMS = 1


StorageKind = Literal["nvme", "ssd", "rotational", "unknown"]


@dataclass(frozen=True)
class StorageFacts:
    """The block device under a file (``gdsstore.engine.storage.storage_facts`` reads it from sysfs).

    Attributes:
        kind: ``"nvme"``, ``"ssd"`` (other non-rotational), ``"rotational"`` (as the kernel reports it:
            a virtual disk may say so too) or ``"unknown"`` (no block device found).
        name: the kernel's name of the whole disk (``"vda"``, ``"nvme0n1"``), ``""`` when unknown.
        virtio: the disk is a virtio (virtual machine) disk.
    """

    kind: StorageKind
    name: str = ""
    virtio: bool = False

    def describe(self) -> str:
        """A few words for a trace reason, e.g. ``"rotational virtio vda"``.

        Examples:
            >>> StorageFacts("rotational", "vda", virtio=True).describe()
            'rotational virtio vda'
            >>> StorageFacts("unknown").describe()
            'unknown device'
        """
        if self.kind == "unknown":
            return "unknown device"
        words: list[str] = [self.kind if self.kind != "nvme" else "NVMe"]
        if self.virtio:
            words.append("virtio")
        words.append(self.name)
        return " ".join(w for w in words if w)


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
    descriptor look random to the kernel, whose readahead then stops helping. A cold read is cut into
    one stretch per thread, each read by one ``pread`` on a descriptor of its own, which reads as fast
    as ``numpy.fromfile`` (the measurements are in docs/performance.md, "Measurements behind the
    engine's choices"). A rotational disk (as the kernel reports it: virtual disks often do) gets at
    most ``ROTATIONAL_STREAMS`` streams.

    Args:
        nbytes: size of the read.
        resident: fraction of the range in the page cache (``gdsstore.pagecache.resident_fraction``),
            ``None`` when not probed (see :func:`needs_residency_probe`) or when the probe failed.
        storage: the device under the file (``gdsstore.engine.storage.storage_facts``), ``None``
            when not known.
        s: settings snapshot; read from ``gdsstore.config`` when omitted.

    Returns:
        The :class:`ReadPlan`; its reason names residency and device, never a per-call number (the
        trace keeps one row per route and reason).

    Examples:
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


def needs_cufile_probe(*, device: bool, s: Settings | None = None, nbytes: int | None = None) -> bool:
    """Whether the route decision for a file depends on probing cuFile: not for host buffers, nor under
    ``compat_mode="on"``, nor (under ``"auto"``) for an operation of ``nbytes`` below ``gds_threshold``,
    which takes the POSIX route anyway. The first probe of a process costs about a second, which a GPU write
    of a few-hundred-byte ``zarr.json`` paid before its chunks."""
    s = s or settings()
    if not device or s.compat_mode == "on":
        return False
    return not (s.compat_mode == "auto" and nbytes is not None and nbytes < s.gds_threshold)


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
    impl = known_implementations.get(scheme.lower())
    if impl is None or scheme.lower() not in REMOTE_SCHEMES:
        raise ValueError(f"decide_remote(): unsupported scheme {scheme!r}; use one of {', '.join(REMOTE_SCHEMES)}")
    route = impl.route
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


#: Requests the pure-Python wave sends at once, at most (its threads): more threads sent fewer requests per
#: second behind a slow server (docs/performance.md, "Measurements behind the engine's choices").
PYTHON_WAVE_MAX = 64


def python_wave_concurrency(s: Settings | None = None) -> int:
    """Requests in flight in a wave sent the pure-Python way: ``remote.wave_concurrency``, at most
    ``PYTHON_WAVE_MAX`` (64)."""
    return min((s or settings()).remote_wave_concurrency, PYTHON_WAVE_MAX)


#: Chunk formats nvCOMP decodes bit-compatibly with numcodecs, and those the GPU also writes
#: (gzip writes on the CPU: its trailer needs a CRC-32 of the data, numcodecs' bytes are the norm).
#: blosc: frames parsed on the host, their lz4/zstd streams by nvCOMP (frames of other compressors
#: decode on the CPU, per chunk, with the reason: gdsstore.gpu.blosc).
GPU_DECODABLE = frozenset({"zstd", "gzip", "lz4", "blosc"})
GPU_ENCODABLE = frozenset({"zstd", "lz4"})
_NVCOMP_ALGORITHM = {"zstd": "zstd", "gzip": "deflate", "lz4": "lz4", "blosc": "lz4/zstd of blosc frames, unshuffled on the GPU"}


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
        >>> decide_codec("blosc", device=True).reason
        'nvCOMP batched lz4/zstd of blosc frames, unshuffled on the GPU'
        >>> decide_codec("blosc", device=True, encode=True).route
        'cpu-codec'
    """
    if not device:
        return Decision("cpu-codec", "host buffer")
    if fmt not in (GPU_ENCODABLE if encode else GPU_DECODABLE):
        if encode and fmt == "gzip":
            return Decision("cpu-codec", "gzip writes on the CPU (trailer CRC-32; numcodecs-identical output)")
        return Decision("cpu-codec", f"no nvCOMP codec for {fmt!r}")
    if not gpu:
        return Decision("cpu-codec", "no CUDA GPU (cupy or the driver missing)")
    if nvcomp_error is not None:
        return Decision("cpu-codec", nvcomp_error)
    return Decision("gpu-encode" if encode else "gpu-decode", f"nvCOMP batched {_NVCOMP_ALGORITHM[fmt]}")


#: How a batch's array-to-bytes codec shards, one of ``"none"``, ``"sharded"``, ``"outside"`` (other codecs
#: beside the sharding codec) and ``"nested"`` (a sharding codec inside it).
Sharding = Literal["none", "sharded", "outside", "nested"]


@dataclass(frozen=True)
class ZarrBatchFacts:
    """What the zarr pipeline's route for one read or write batch depends on (gathered from zarr's
    codecs and byte getters or setters by ``gdsstore.gpu.routes.batch_facts``).

    Attributes:
        sync: every codec has a synchronous decode and encode (zarr's ``sync_transform``).
        sharding: how the array-to-bytes codec shards (:data:`Sharding`).
        v2_filters: zarr v2 filters the pipeline cannot separate from the decode (a numcodecs filter such
            as ``Delta`` may change a chunk's size or make objects of its bytes).
        zero_d: the batch has a 0-d array.
        not_store_path: the type of a byte getter (or setter) that is no zarr ``StorePath``; ``""`` when
            every one is.
        store: the type of the store the batch's bytes live in.
        engine: the store has a gdsstore engine backend.
        one_store: every byte setter is on the same store.
        writable: the store takes writes (not opened read-only, and its backend writes).

    Examples:
        >>> decide_zarr_read(ZarrBatchFacts(sync=True, sharding="none")).route
        'chunks'
        >>> decide_zarr_write(ZarrBatchFacts(sync=True, sharding="nested")).reason
        'nested sharding'
    """

    sync: bool
    sharding: Sharding
    v2_filters: bool = False
    zero_d: bool = False
    not_store_path: str = ""
    store: str = ""
    engine: bool = True
    one_store: bool = True
    writable: bool = True


def decide_zarr_read(facts: ZarrBatchFacts) -> Decision:
    """Route of one batch of zarr's chunk reads: ``"chunks"`` (whole chunk objects, batched), ``"shards"``
    (the shard indexes, then coalesced inner-chunk ranges) or ``"delegate"`` (zarr's own pipeline).

    Examples:
        >>> decide_zarr_read(ZarrBatchFacts(sync=True, sharding="sharded")).reason
        'sharded: batched index reads + coalesced inner-chunk ranges'
        >>> decide_zarr_read(ZarrBatchFacts(sync=True, sharding="none", not_store_path="bytes")).reason
        'byte getter bytes is not a store path'
    """
    if facts.not_store_path:
        return Decision("delegate", f"byte getter {facts.not_store_path} is not a store path")
    if not facts.sync:
        return Decision("delegate", "a codec has no synchronous decode")
    if facts.sharding != "none":
        return _sharded(facts, "sharded: batched index reads + coalesced inner-chunk ranges")
    if facts.v2_filters:
        return Decision("delegate", "zarr v2 filters")
    return Decision("chunks", "whole chunk objects, batched")


def decide_zarr_write(facts: ZarrBatchFacts) -> Decision:
    """Route of one batch of zarr's chunk writes, the reverse of :func:`decide_zarr_read`: ``"chunks"``
    (encoded as one batch, published in parallel), ``"shards"`` (every changed inner chunk encoded as one
    batch, each shard written once) or ``"delegate"``. A write also needs the store's engine backend,
    writable, and one store for the whole batch.

    Examples:
        >>> decide_zarr_write(ZarrBatchFacts(sync=True, sharding="none", store="MemoryStore", engine=False)).reason
        'store MemoryStore has no gdsstore engine backend'
        >>> decide_zarr_write(ZarrBatchFacts(sync=True, sharding="none", zero_d=True)).reason
        '0-d array'
    """
    if facts.not_store_path:
        return Decision("delegate", f"byte setter {facts.not_store_path} is not a store path")
    if not facts.engine:
        return Decision("delegate", f"store {facts.store} has no gdsstore engine backend")
    if not facts.one_store:
        return Decision("delegate", "byte setters on more than one store")
    if not facts.writable:
        return Decision("delegate", "store not writable (zarr's pipeline raises the error)")
    if not facts.sync:
        return Decision("delegate", "a codec has no synchronous encode")
    if facts.zero_d:
        return Decision("delegate", "0-d array")
    if facts.sharding != "none":
        return _sharded(facts, "sharded: inner chunks encoded as one batch, each shard written once")
    return Decision("chunks", "chunks encoded as one batch, published in parallel")


def _sharded(facts: ZarrBatchFacts, batched: str) -> Decision:
    """A sharded batch: ``"shards"`` (``batched``: how), or zarr's pipeline for shardings it does not batch."""
    if facts.sharding == "outside":
        return Decision("delegate", "codecs outside the sharding codec")
    if facts.sharding == "nested":
        return Decision("delegate", "nested sharding")
    return Decision("shards", batched)


def decide_local_batch(*, core_missing: str | None, reads: int, overlapping: bool = False) -> Decision:
    """Choose who runs a batch of local reads into one buffer (or its staging slots): the native core
    (``"core"``: ``open``/``pread``/``close`` in Rust, the GIL released for the whole batch or slot) or
    the engine's Python threads (``"python"``).

    Args:
        core_missing: why ``gdsstore._core`` cannot be loaded; None when it loads.
        reads: the batch's reads (after cutting large ones into pieces).
        overlapping: two reads land on the same destination bytes (the core writes slots concurrently and
            takes only disjoint ones).

    Examples:
        >>> decide_local_batch(core_missing=None, reads=4096).reason
        'native core, GIL released'
        >>> decide_local_batch(core_missing="not built", reads=4096).reason
        'python threads: native core unavailable (not built)'
    """
    if core_missing is not None:
        return Decision("python", f"python threads: native core unavailable ({core_missing})")
    if reads < 1:
        return Decision("python", "python threads: an empty batch")
    if overlapping:
        return Decision("python", "python threads: reads overlap in the destination")
    return Decision("core", "native core, GIL released")
