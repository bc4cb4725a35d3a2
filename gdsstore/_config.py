"""The ``gdsstore`` settings: one table, from which the defaults, the validation and the docs come.

Every setting is one field of :class:`Settings`, declared once with :func:`_setting`: its key, its
default, its validator and the row of ``docs/settings.md`` that describes it. From that one table come

- :data:`DEFAULTS`, the nested defaults of :data:`config` (a donfig ``Config`` named ``"gdsstore"``);
- :func:`build_settings`, which reads and validates every key into a frozen :class:`Settings`;
- :func:`settings_table`, the Markdown table that ``docs/settings.md`` carries (a test compares them).

Environment variables (``GDSSTORE_<KEY>``, nested keys with a double underscore:
``GDSSTORE_REMOTE__MAX_ATTEMPTS``) are read when ``gdsstore`` is imported and on
``config.refresh()``. A value that cannot be right (``inf``, ``nan``, a dict where a list belongs) never
makes the import fail: it is kept as written and rejected by :func:`build_settings` with a message naming
the key and its variable. A misspelled ``GDSSTORE_*`` variable or config key is warned about once,
naming the closest valid key.
"""

# ruff: noqa: RUF009, RUF001
# (each Settings field is declared by a _setting() call, its row of the table; the rows keep the docs' dashes)
from __future__ import annotations

import ast
import difflib
import math
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from donfig import Config
from donfig.config_obj import merge

from gdsstore.errors import SettingError

__all__ = [
    "DEFAULTS",
    "Setting",
    "Settings",
    "build_settings",
    "config",
    "default_threads",
    "fmt_bytes",
    "settings_table",
    "unknown_names",
]

CompatMode = Literal["auto", "on", "off"]
WithoutNvfs = Literal["cufile", "posix"]


def fmt_bytes(n: float) -> str:
    """Format a byte count with binary units: ``fmt_bytes(8192) == '8 KiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if float(n).is_integer() else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask (dask-cuda pins each worker), else the core count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """``min(16, usable CPUs)``, at least 1.

    Measured: one thread leaves most of the page cache / NVMe bandwidth unused (kvikio's default of 1
    gives 6.3 GB/s where 16 give 45); more than 16 adds contention without throughput.
    """
    return max(1, min(16, usable_cpus()))


# -- validators: (setting, value as found) -> value of the Settings field ---------------------------


@dataclass(frozen=True)
class Setting:
    """One row of the settings table."""

    key: str  # "remote.timeout"
    default: object
    check: Callable[[Setting, object], object]
    doc: str  # the "what it changes" cell of docs/settings.md
    default_doc: str | None = None  # for defaults computed from the machine

    @property
    def env(self) -> str:
        """donfig's spelling: ``GDSSTORE_`` + key upper-cased, nesting as a double underscore."""
        return "GDSSTORE_" + self.key.upper().replace(".", "__")

    def fail(self, must: str, value: object) -> SettingError:
        return SettingError(f"gdsstore setting {self.key!r} ({self.source}) must be {must}, got {value!r}")

    @property
    def source(self) -> str:
        """Where a bad value came from, for messages: the environment variable when it is set."""
        if self.env in os.environ:
            return f"environment variable {self.env}"
        return f"gdsstore.config, a YAML config file or environment variable {self.env}"


def _int(minimum: int, maximum: int | None = None) -> Callable[[Setting, object], int]:
    def check(row: Setting, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise row.fail("an integer", value)
        try:
            n = int(value)
        except ValueError:
            raise row.fail("an integer", value) from None
        if n < minimum or (maximum is not None and n > maximum):
            raise row.fail(f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]", n)
        return n

    return check


def _float(minimum: float, maximum: float, *, strict: bool = True) -> Callable[[Setting, object], float]:
    """A finite number in ``(minimum, maximum]`` (``[minimum, maximum]`` when not ``strict``)."""

    def check(row: Setting, value: object) -> float:
        must = f"a finite number {'>' if strict else '>='} {minimum:g} and <= {maximum:g}"
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise row.fail(must, value)
        try:
            x = float(value)
        except ValueError:
            raise row.fail(must, value) from None
        # inf would overflow every timeout deadline (OverflowError in each remote call); nan compares false.
        if not math.isfinite(x) or x > maximum or x < minimum or (strict and x == minimum):
            raise row.fail(must, value)
        return x

    return check


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _bool(row: Setting, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
        return value.lower() in _TRUE
    raise row.fail("a boolean (true/false, 1/0, yes/no, on/off)", value)


def _one_of(*choices: str) -> Callable[[Setting, object], str]:
    def check(row: Setting, value: object) -> str:
        if not isinstance(value, str) or value.lower() not in choices:
            raise row.fail(f"one of {', '.join(choices)}", value)
        return value.lower()

    return check


def _status_list(row: Setting, value: object) -> tuple[int, ...]:
    must = "a list of HTTP status codes (100-599), such as [500, 503] or 500,503"
    items: object = value
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "[(":
            try:
                items = ast.literal_eval(text)
            except (SyntaxError, ValueError):
                raise row.fail(must, value) from None
        else:
            items = [v for v in text.replace(",", " ").split() if v]
    if not isinstance(items, list | tuple):
        raise row.fail(must, value)
    codes = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int | str) or not str(v).strip().isdigit():
            raise row.fail(must, value)
        code = int(v)
        if not 100 <= code <= 599:
            raise row.fail(must, value)
        codes.append(code)
    return tuple(codes)


_ROWS: dict[str, Setting] = {}


def _setting(
    key: str, default: object, check: Callable[[Setting, object], object], doc: str, default_doc: str | None = None
) -> Any:
    """Declare one field of :class:`Settings` and its row of the table."""
    row = Setting(key, default, check, " ".join(doc.split()), default_doc)
    _ROWS[key] = row
    return field(metadata={"setting": row})


_THREADS_DOC = "min(16, CPU cores)"
_DAY = 86400.0


@dataclass(frozen=True)
class Settings:
    """A validated snapshot of ``gdsstore.config`` (the settings table; read once per operation)."""

    compat_mode: CompatMode = _setting(
        "compat_mode", "auto", _one_of("auto", "on", "off"),
        """Route for device buffers. `"auto"`: cuFile when its whole probe passes for the file (library, driver,
        handle registration), the POSIX route otherwise, with the reason in the trace. `"on"`: never cuFile.
        `"off"`: cuFile required: an error (`CuFileRequiredError`) naming the failed probe step instead of a
        fallback.""",
    )  # fmt: skip
    cufile_without_nvfs: WithoutNvfs = _setting(
        "cufile_without_nvfs", "cufile", _one_of("cufile", "posix"),
        """Under `compat_mode="auto"`, what a device read or write takes when its file's cuFile handle registers
        but the nvidia-fs module is not loaded, so that cuFile would only run its compat mode (its own `pread`
        and copy loop). `"cufile"`: the cuFile route, as AUTO's rule says. `"posix"`: gdsstore's POSIX route,
        with the reason in the trace. Measured on the H200 (no nvidia-fs), 1 GiB warm, `gdsstore bench`: POSIX
        route 45.7–49.8 GB/s, cuFile's compat path 42.3–45.3, in three runs
        ([Performance](performance.md#raw-files-into-gpu-memory-gdsstore-bench)). With nvidia-fs loaded this
        setting changes nothing.""",
    )  # fmt: skip
    gds_threshold: int = _setting(
        "gds_threshold", 1 << 20, _int(0),
        """Device reads and writes smaller than this take the POSIX route even when cuFile is usable: cuFile's
        per-call overhead dominates small I/O.""",
    )  # fmt: skip
    task_size: int = _setting(
        "task_size", 8 << 20, _int(1, 1 << 40),
        """Each local request is split into pieces of this size, run in parallel on the engine's thread pool (a
        POSIX read into device memory: into one stretch per thread, never smaller than this); remote reads use
        ranges of at least this size (see `remote.max_range_size`). Chosen by a sweep on the GPU machine
        (`benchmarks/sweep_raw.py`): 8 MiB beat 2, 4, 16 and 32 MiB on both local routes.""",
    )  # fmt: skip
    num_threads: int = _setting(
        "num_threads", default_threads(), _int(1, 4096),
        """Threads of the engine's pool for local reads and writes. One thread leaves most of the page cache's and
        NVMe's bandwidth unused. The CPU cores counted are those the process may run on (its affinity, as
        `os.sched_getaffinity` reports it: dask-cuda pins each worker to its GPU's cores).""",
        _THREADS_DOC,
    )  # fmt: skip
    bounce_buffer_size: int = _setting(
        "bounce_buffer_size", 8 << 20, _int(4096, 1 << 32),
        """Size of one pinned, page-aligned bounce buffer on the POSIX route to and from device memory (at most 2 ×
        `num_threads` of them). A file read into device memory holds one for its stretch and reads pieces of
        half of it into its two halves in turn, so one half's copy overlaps the read into the other; a write
        goes through whole buffers; a batched chunk read staged on the GPU reads pieces of up to this size
        (many small chunk files share one buffer and one copy). 8 MiB measured best for both: 4 MiB halves for
        file reads, 8 MiB pieces for chunk batches (`benchmarks/results/probe_raw.txt`). At least 4096.""",
    )  # fmt: skip
    pinned_memory_limit: int = _setting(
        "pinned_memory_limit", 1 << 30, _int(1 << 20),
        """Most pinned (page-locked) host memory gdsstore holds at once: the engine's bounce buffers, local and
        remote, and the GPU pipeline's staging buffers, in use or kept idle, all in one account. When a new
        bounce buffer would pass it, idle buffers (bounce buffers of other sizes, idle staging buffers) are
        freed first, then I/O waits for a buffer to come back; a staging buffer that still does not fit is
        not pinned: that window is staged in pageable memory, and the trace says so. The default holds what
        16 threads use (about 768 MiB) beside a window's staging; lower it where many processes share a
        machine (dask-cuda workers). `gdsstore doctor` shows the account. At least 1 MiB, and at least one
        bounce buffer.""",
    )  # fmt: skip
    gpu_memory_budget: int = _setting(
        "gpu.memory_budget", 4 << 30, _int(16 << 20),
        """Device memory one GPU pipeline read or write plans for beyond its output (or input): staging, decoded
        chunks and nvCOMP's scratch. Windows of chunks are sized to it (alive at once: the window's decoded
        bytes, nvCOMP's decode scratch, this window's and the next window's compressed staging; nvCOMP's
        bound on its zstd scratch is about three times the decoded bytes, large zstd chunks get what their
        frames need, 1.7x for 4 MiB chunks), a read that fits it whole is one window, and what the call
        allocated is given back when it returns: from a pool of its own (its free blocks given back between
        windows too) when CuPy's default pool is the current allocator, or through the allocator the user
        set (RMM's `rmm_cupy_allocator`, PyTorch's), which keeps it. A fixed default, not a share of free
        memory. Measured on the H200 (1 GiB reads, zstd): at 4 GiB the peak was 2.4-3.2 GiB, and 4 MiB
        chunks read at 9.5 GB/s, 256 KiB chunks 9.6, shards 11.8; at 1 GiB 256 KiB chunks and shards peaked at
        864-882 MiB and read at 5.9 and 6.1, and 4 MiB chunks decoded on the CPU (`gpu.host_decode_chunks`)
        at 3.5 with 128 MiB: nvCOMP decodes each chunk in one thread block, so its rate grows with the chunks
        decoded at once ([GPU pipeline](gpu-pipeline.md#device-memory)). Lower it beside a model
        that owns the GPU. Each concurrent call has its own budget. At least 16 MiB.""",
    )  # fmt: skip
    gpu_host_decode_bytes: int = _setting(
        "gpu.host_decode_bytes", 16 << 20, _int(0),
        """A GPU pipeline read of at most this many decoded bytes decodes its chunks on the CPU (the engine's
        threads) and copies them to the device, without nvCOMP: a process's first nvCOMP decode costs about
        20 ms and keeps 62 MiB of device memory (nvCOMP's kernels), and one nvCOMP call lasts about one
        chunk's decode however few chunks it has ([GPU pipeline](gpu-pipeline.md#small-reads)). The trace
        says `decode/cpu-codec "small read ..."`. 0: every compressed read decodes on the GPU.""",
    )  # fmt: skip
    gpu_host_decode_chunks: int = _setting(
        "gpu.host_decode_chunks", 64, _int(0),
        """A GPU pipeline read of zstd chunks whose nvCOMP calls would each decode fewer chunks than this
        (the memory budget's window holds few of them, or the read has few) decodes them on the CPU instead (the
        engine's threads) and copies them to the device: nvCOMP decodes each zstd chunk in one thread block,
        so a call lasts about one chunk's decode and its rate grows with the chunks in it
        ([GPU pipeline](gpu-pipeline.md#small-reads)). The trace says `decode/cpu-codec "few chunks per
        nvCOMP call ..."`. 0: only `gpu.host_decode_bytes` sends reads to the CPU.""",
    )  # fmt: skip
    gpu_split_decode_bytes: int = _setting(
        "gpu.split_decode_bytes", 4 << 20, _int(0),
        """A GPU pipeline read that `gpu.host_decode_chunks` sends to the CPU, of zstd chunks of at least this
        many decoded bytes, stays on nvCOMP alone where a model of both decoders' rates says no host thread
        could decode one of its chunks sooner (chunks of 16 MiB and more on an H100 with nvCOMP 6.0), else is
        decoded by the host's threads and nvCOMP at once: both take chunks from one queue as they free, and
        land them in the same device output ([GPU pipeline](gpu-pipeline.md#few-large-chunks-both-decoders-at-once)).
        The trace says `decode/gpu-decode "nvCOMP batched zstd, beside the CPU: ..."` and `decode/cpu-codec
        "beside nvCOMP: ..."`. 0: such reads decode on the CPU alone.""",
    )  # fmt: skip
    gpu_wave_copy_bytes: int = _setting(
        "gpu.wave_copy_bytes", 16 << 20, _int(0),
        """A GPU pipeline read of remote chunks copies its wave's bytes to the device in parts of about this many
        bytes, each once all of its requests have landed, while the rest of the wave is in flight: the copy of a
        window no longer starts after its last byte arrived ([GPU pipeline](gpu-pipeline.md)). The trace says
        `h2d/pinned-copy "N copies, M of them during the wave"`. 0: one copy of the whole window after its wave.
        Measured on an H100: ahead of 0 on every remote zarr row of a four-round pass (1.02-1.61x), and 64 MiB
        within the noise of 16 MiB ([Performance](performance.md)).""",
    )  # fmt: skip
    pause_gc: bool = _setting(
        "pause_gc", True, _bool,
        """Pause Python's cyclic garbage collector for each zarr read or write through gdsstore's pipeline (one
        call at a time holds the pause; where it was already off, it is left alone). A read of thousands of
        chunks keeps tens of thousands of small objects alive for the whole call, and the collector then
        scans the whole heap in the middle of it: on the H200, reads of 4,096 chunks of 64 KiB from S3 met a
        full collection every second read, 41-58 ms each, a third of the read's time
        ([Performance](performance.md)). Reference counting frees the call's objects as usual; garbage cycles
        made meanwhile are collected once the call returns. Off: the collector runs as Python decides.""",
    )  # fmt: skip
    direct_io_read: bool = _setting(
        "direct_io_read", False, _bool,
        """Open files with `O_DIRECT` for POSIX-route reads into device memory, bypassing the page cache.
        Filesystems that refuse `O_DIRECT` (tmpfs) are read buffered.""",
    )  # fmt: skip
    direct_io_write: bool = _setting(
        "direct_io_write", False, _bool, "`O_DIRECT` for POSIX-route writes from device memory."
    )
    fsync: bool = _setting(
        "fsync", False, _bool,
        """Local atomic writes (`GDSStore` `set`) `fsync` the temporary file before renaming it into place:
        durable across power loss, slower.""",
    )  # fmt: skip
    cufile_probe_timeout: float = _setting(
        "cufile_probe_timeout", 30.0, _float(0.0, _DAY),
        """Seconds allowed for the one-time, out-of-process cuFile driver probe (`driver_open` can hang; see
        [Install](install.md#5-libcufile-116-and-procmodules)).""",
    )  # fmt: skip
    cufile_handle_cache_size: int = _setting(
        "cufile_handle_cache_size", 128, _int(1, 1 << 20),
        """Most registered cuFile file handles kept open (LRU). zarr opens one file per chunk; re-registering on
        every read would cost more than the read.""",
    )  # fmt: skip
    cufile_stats_level: int = _setting(
        "cufile_stats_level", 3, _int(0, 3),
        """Level (0–3) of cuFile's own counters, which the trace reports as `cufile stats` (the nvfs/posix split
        needs 3). When the active `cufile.json` asks for less, gdsstore points libcufile at a copy of it with
        only `profile.cufile_stats` raised, before opening the driver. `0` leaves `cufile.json` untouched.""",
    )  # fmt: skip
    remote_max_attempts: int = _setting(
        "remote.max_attempts", 5, _int(1, 1000),
        "Attempts per remote request, the first included, before the error is raised.",
    )
    remote_retry_status: tuple[int, ...] = _setting(
        "remote.retry_status", [408, 429, 500, 502, 503, 504], _status_list,
        "HTTP status codes that are retried (timeouts and connection resets always are).",
    )  # fmt: skip
    remote_timeout: float = _setting(
        "remote.timeout", 10.0, _float(0.0, _DAY),
        """Seconds of silence that fail an attempt: no answer to a request, or no byte between two pieces of
        its body (an idle timeout, not a limit on the whole request: a large body that keeps arriving is never
        cut). A failed attempt is retried (`remote.max_attempts`), the first retry logged as a warning
        (logger `gdsstore.remote`): with the defaults a silent server fails the call within a minute. Writes
        get this plus a second per MiB of each request's body.""",
    )  # fmt: skip
    remote_connect_timeout: float = _setting(
        "remote.connect_timeout", 10.0, _float(0.0, _DAY),
        "Seconds to wait for a connection (TCP and TLS handshakes); a failed connect is retried.",
    )  # fmt: skip
    remote_concurrency: int = _setting(
        "remote.concurrency", default_threads(), _int(1, 4096),
        "Range requests in flight at once for one remote read.", _THREADS_DOC,
    )  # fmt: skip
    remote_wave_concurrency: int = _setting(
        "remote.wave_concurrency", 256, _int(1, 4096),
        """Requests in flight at once when many remote objects or ranges are read together (a zarr
        selection through the pipeline, `GDSStore.get_partial_values`, the fsspec `cat_ranges` and `cat` of
        many paths): one wave, each whole object one GET with no size lookup first, touching ranges of an
        object one request. Higher than `remote.concurrency` (ranges of one large object), because the wave's
        requests are small and each mostly waits on the server. Measured on the H200 (the native core): 256 in
        flight sent 3.4x the requests per second of 64 behind a server answering after 20 ms, and read as
        fast or faster on loopback; 1,024 was slower. On two cores shared with a server on the same machine,
        256 connections cost 25-45 % more CPU per request than 64: lower it there. The pure-Python transport
        sends at most 64 at once (its threads: more were slower).""",
    )  # fmt: skip
    remote_max_range_size: int = _setting(
        "remote.max_range_size", 32 << 20, _int(1, 1 << 40),
        """Largest range one remote request asks for. A read is split into `remote.concurrency` ranges of
        size/concurrency, kept between `task_size` and this; remote device reads land in pinned slots of half
        this size (or `bounce_buffer_size` if larger), two per worker, so the first half of a range is copied to
        the GPU while the second arrives. Fewer, larger requests scale better: each costs Python work under the
        GIL.""",
    )  # fmt: skip
    remote_backoff_base: float = _setting(
        "remote.backoff_base", 0.1, _float(0.0, 3600.0, strict=False),
        """Seconds: the first retry waits up to this long; each further retry doubles the cap (exponential
        backoff with full jitter).""",
    )  # fmt: skip
    remote_backoff_max: float = _setting(
        "remote.backoff_max", 5.0, _float(0.0, 3600.0, strict=False),
        "Seconds: the largest wait between two attempts.",
    )
    remote_multipart_threshold: int = _setting(
        "remote.multipart_threshold", 64 << 20, _int(5 << 20),
        "S3 writes larger than this use a multipart upload instead of one PUT. At least 5 MiB.",
    )
    remote_multipart_chunksize: int = _setting(
        "remote.multipart_chunksize", 16 << 20, _int(5 << 20, 5 << 30),
        "Part size of S3 multipart uploads. At least 5 MiB (S3's minimum part size).",
    )


#: Every row, in table order (the fields of :class:`Settings`).
ROWS: tuple[Setting, ...] = tuple(f.metadata["setting"] for f in fields(Settings))
assert [r.key for r in ROWS] == list(_ROWS), "every Settings field is declared with _setting()"


def _nest(flat: Mapping[str, object]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def _nest_keys(d: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted keys (``{"remote.timeout": 5}``) nested as donfig stores them, nested ones kept."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        out = merge(out, _nest({str(key): value}))
    return out


def _flat(d: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, object]]:
    for k, v in d.items():
        if isinstance(v, Mapping) and f"{prefix}{k}" not in _ROWS:
            yield from _flat(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


DEFAULTS: dict[str, Any] = _nest({r.key: r.default for r in ROWS})

# -- reading the environment -----------------------------------------------------------------------

# Variables donfig itself reads (YAML locations, its serialised config for subprocesses): not settings.
# The scripts' own (scripts/bootstrap.sh: which Python, which extras) are not settings either.
_NOT_SETTINGS = frozenset({"GDSSTORE_CONFIG", "GDSSTORE_ROOT_CONFIG", "GDSSTORE_INTERNAL_INHERIT_CONFIG",
                           "GDSSTORE_PYTHON", "GDSSTORE_EXTRAS"})
_warned: set[str] = set()
_warn_lock = threading.Lock()


def _unknown_message(name: str, what: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else f"; known: see docs/settings.md ({len(known)} settings)"
    return f"unknown {what} {name!r} ignored{hint}"


def _warn_unknown(name: str, what: str, known: list[str]) -> None:
    """Warn once per process that ``name`` is no setting, naming the closest one."""
    with _warn_lock:
        if name in _warned:
            return
        _warned.add(name)
    warnings.warn(f"gdsstore: {_unknown_message(name, what, known)}", UserWarning, stacklevel=3)


def unknown_names(env: Mapping[str, str] | None = None, cfg: Mapping[str, Any] | None = None) -> list[str]:
    """One line per ``GDSSTORE_*`` variable of ``env`` and key of ``cfg`` that is no setting (what
    ``gdsstore doctor`` reports; the same names are warned about once when read).

    Examples:
        >>> unknown_names({"GDSSTORE_NUM_THREAD": "4", "HOME": "/root"}, {})
        ["unknown environment variable 'GDSSTORE_NUM_THREAD' ignored; did you mean GDSSTORE_NUM_THREADS?"]
    """
    env = os.environ if env is None else env
    cfg = config.config if cfg is None else cfg
    by_env = [r.env for r in ROWS]
    out = [
        _unknown_message(name, "environment variable", by_env)
        for name in sorted(env)
        if name.startswith("GDSSTORE_") and name not in _NOT_SETTINGS and name not in by_env
    ]
    out += [_unknown_message(key, "config key", list(_ROWS)) for key, _ in _flat(cfg) if key not in _ROWS]
    return out


def _parse_env(value: str) -> object:
    """As donfig parses: a Python literal where the text is one, else the text. A container is kept as
    the text (no setting takes a dict, and donfig's merge raises TypeError on one where a list was)."""
    try:
        parsed = ast.literal_eval(value)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return value
    return value if isinstance(parsed, dict | set) else parsed


def collect_env(env: Mapping[str, str]) -> dict[str, Any]:
    """The settings named by ``GDSSTORE_*`` variables in ``env`` (nested dict); unknown names warned about."""
    found: dict[str, object] = {}
    by_env = {r.env: r for r in ROWS}
    for name, value in env.items():
        if not name.startswith("GDSSTORE_") or name in _NOT_SETTINGS:
            continue
        row = by_env.get(name)
        if row is None:
            _warn_unknown(name, "environment variable", list(by_env))
            continue
        found[row.key] = _parse_env(value)
    return _nest(found)


def check_keys(cfg: Mapping[str, Any]) -> None:
    """Warn once for each key of ``cfg`` that is no setting (``config.set({"num_thread": 4})``)."""
    for key, _ in _flat(cfg):
        if key not in _ROWS:
            _warn_unknown(key, "config key", list(_ROWS))


def check_values(updates: Mapping[str, Any]) -> None:
    """Validate the settings ``config.set`` is given (flat or nested keys) before any is applied.

    Raises:
        SettingError: naming the first bad key and its value.
    """
    for key, value in _flat(updates):
        row = _ROWS.get(key)
        if row is None:
            continue  # not a setting: warned about once where settings are read
        try:
            row.check(row, value)
        except SettingError as exc:
            must = str(exc).partition(" must be ")[2]
            raise SettingError(f"gdsstore.config.set(): setting {key!r} must be {must}") from None


class _Config(Config):  # type: ignore[misc]
    """donfig's ``Config`` with the environment read through the settings table (see the module doc), and
    ``set`` refusing a bad value at once, naming its key (rather than at first use)."""

    def set(self, arg: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        updates = {**(arg or {}), **{k.replace("__", "."): v for k, v in kwargs.items()}}
        check_values(_nest_keys(updates))
        return super().set(arg, **kwargs)

    def collect(self, paths: list[str] | None = None, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        from_files = super().collect(paths=paths, env={})  # YAML files only
        from_env = collect_env(self.env if env is None else env)
        # A YAML mapping where a value belongs would break donfig's merge: keep it for validation to reject.
        for key, value in list(_flat(from_files)):
            if key in _ROWS and isinstance(value, Mapping):
                from_files = merge(from_files, _nest({key: repr(dict(value))}))
        return merge(from_files, from_env)  # type: ignore[no-any-return]


config = _Config("gdsstore", defaults=[DEFAULTS])


def build_settings(cfg: Config = config) -> Settings:
    """Read and validate every setting of ``cfg``.

    Raises:
        SettingError: a ``ValueError`` naming the first bad key, its environment variable and the value.
    """
    values: dict[str, Any] = {}
    for f in fields(Settings):
        row: Setting = f.metadata["setting"]
        try:
            raw = cfg.get(row.key)
        except (KeyError, TypeError):  # a parent replaced by a scalar: config.set({"remote": 5})
            raw = row.default
        values[f.name] = row.check(row, raw)
    return Settings(**values)


def _fmt_default(row: Setting) -> str:
    value = row.default
    if row.default_doc is not None:
        return row.default_doc
    if isinstance(value, bool) or value is None:
        return f"`{value}`"
    if isinstance(value, int) and value >= 1024 and value % 1024 == 0:
        return f"`{value}` ({fmt_bytes(value)})"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value}`"


def settings_table() -> str:
    """The Markdown table of every setting, as ``docs/settings.md`` carries it."""
    lines = ["| key | environment variable | default | what it changes |", "|---|---|---|---|"]
    lines += [f"| `{r.key}` | `{r.env}` | {_fmt_default(r)} | {r.doc} |" for r in ROWS]
    return "\n".join(lines)
