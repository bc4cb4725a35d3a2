"""The cuFile (GPUDirect Storage) route through ``cuda.bindings.cufile``.

Guarded on purpose: ``cuFileDriverOpen`` hangs forever with libcufile >= 1.16 on machines without
``/proc/modules`` (CI), so the driver is only opened in-process after (1) the bindings import,
(2) the library loads, (3) a CUDA device is visible, (4) ``/proc/modules`` is readable, and
(5) a child process opened and closed the driver within ``cufile_probe_timeout``. Each failed step
becomes the reason string the policy records.

Registered handles are cached per file (LRU, bounded): zarr opens a file per chunk, and a
register per get would cost more than the read.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import gdsstore.trace as _trace
from gdsstore.engine import cuda
from gdsstore.errors import CuFileError
from gdsstore.policy import CuFileProbeResult, settings

__all__ = [
    "CuFileError",
    "CuFileHandle",
    "driver_probe",
    "handle_cache",
    "library_version",
    "read_stats",
]




def _bindings() -> Any:
    from gdsstore._optional import require

    return require("cuda.bindings.cufile", purpose="the cuFile route")


def library_version() -> int | None:
    """libcufile's version as 1000*major + 10*minor (1150 = 1.15), or None when unavailable."""
    try:
        return int(_bindings().get_version())
    except Exception:
        return None


def bindings_version() -> str | None:
    try:
        import cuda.bindings

        return str(cuda.bindings.__version__)
    except Exception:
        return None


_PROBE_CODE = "import cuda.bindings.cufile as c; c.driver_open(); c.driver_close(); print('ok')"


@dataclass
class _DriverState:
    probed: bool = False
    result: CuFileProbeResult = field(default_factory=lambda: CuFileProbeResult(False, "cuFile not probed"))


_driver = _DriverState()
_driver_lock = threading.Lock()


def _probe_steps(timeout: float) -> CuFileProbeResult:
    try:
        _bindings()
    except Exception as exc:
        return CuFileProbeResult(False, f"cuda.bindings.cufile not importable ({type(exc).__name__})")
    version = library_version()
    if version is None:
        return CuFileProbeResult(False, "libcufile not found")
    if cuda.device_count() == 0:
        return CuFileProbeResult(False, "no CUDA device")
    try:
        with open("/proc/modules", "rb") as fh:
            fh.read(1)
    except OSError:
        # libcufile >= 1.16 loops forever reading /proc/modules in driver_open.
        return CuFileProbeResult(False, "/proc/modules unreadable (cuFile driver_open would hang)")
    try:
        out = subprocess.run(
            [sys.executable, "-c", _PROBE_CODE],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return CuFileProbeResult(False, f"cuFile driver_open did not return within {timeout:g} s")
    if out.returncode != 0 or "ok" not in out.stdout:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return CuFileProbeResult(False, f"cuFile driver_open failed: {last[:200]}")
    c = _bindings()
    _enable_stats_in_config(settings().cufile_stats_level)
    try:
        c.driver_open()
    except Exception as exc:
        return CuFileProbeResult(False, f"cuFile driver_open failed: {exc}")
    _start_stats(c)
    atexit.register(_shutdown)
    return CuFileProbeResult(True, f"cuFile driver open (libcufile {version // 1000}.{version % 1000 // 10})")


def nvidia_fs_present() -> bool:
    """Whether the nvidia-fs kernel module is loaded (without it cuFile only does compat I/O)."""
    return os.path.exists("/proc/driver/nvidia-fs/version")


def registered_reason() -> str:
    """The route reason for a file whose cuFile handle registered, saying which cuFile path runs."""
    if nvidia_fs_present():
        return "cuFile handle registered (nvidia-fs loaded)"
    return "cuFile handle registered (no nvidia-fs: cuFile's compat POSIX path)"


def _shutdown() -> None:
    # Deregister handles and close the driver before CUDA and the bindings are torn down at exit.
    if not (_driver.probed and _driver.result.ok):
        return  # not opened by this process (a forked child inherits the parent's atexit hook)
    handle_cache.clear()
    try:
        _bindings().driver_close()
    except Exception:
        pass


def driver_probe() -> CuFileProbeResult:
    """Open the cuFile driver once per process, guarded; the result is cached."""
    if _driver.probed:
        return _driver.result
    with _driver_lock:
        if not _driver.probed:
            _driver.result = _probe_steps(settings().cufile_probe_timeout)
            _driver.probed = True
    return _driver.result


def strip_json_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(re.sub(r"^\s*//.*$", "", line) for line in text.splitlines())


def _enable_stats_in_config(level: int) -> None:
    """Point libcufile at a copy of the active cufile.json with ``profile.cufile_stats = level``.

    Only when the active config asks for less (the GPU machine's ships 0) and before the in-process
    driver_open, which is when libcufile reads it. Every other setting is kept.
    """
    if level <= 0:
        return
    src = os.environ.get("CUFILE_ENV_PATH_JSON", "/etc/cufile.json")
    try:
        with open(src) as fh:
            data = json.loads(strip_json_comments(fh.read()))
    except (OSError, ValueError):
        return
    profile = data.setdefault("profile", {})
    if int(profile.get("cufile_stats", 0)) >= level:
        return
    profile["cufile_stats"] = level
    fd, path = tempfile.mkstemp(prefix="gdsstore-cufile-", suffix=".json")
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    os.environ["CUFILE_ENV_PATH_JSON"] = path


def _start_stats(c: Any) -> None:
    # Level 3 holds the per-GPU nvfs/posix split the trace reports.
    try:
        c.set_stats_level(settings().cufile_stats_level)
        c.stats_start()
    except Exception:
        pass


# --- stats -------------------------------------------------------------------------------------------

# cuFile 1.19 appended the readv/writev counters (112 bytes) to CUfileStatsLevel1_t; older libraries
# (1.15 on the GPU machine) use the shorter struct. We read level 3 into an oversized buffer and decode
# it by the library's version, never by the bindings' struct size (the two can disagree: cuda-bindings 13.3.1
# with libcufile 1.20 aborts in get_stats_l1).
_L1_NEW = 624
_L1_OLD = 512


def _stats_level(c: Any) -> int:
    try:
        return int(c.get_stats_level())
    except Exception:
        return -1


def read_stats() -> dict[str, Any] | None:
    """cuFile's own counters (level 3, summed over GPUs), or None when the driver is not open."""
    if not (_driver.probed and _driver.result.ok):
        return None
    import numpy as np

    c = _bindings()
    version = library_version() or 0
    l1_size = _L1_NEW if version >= 1190 else _L1_OLD
    buf = np.zeros(1 << 16, dtype=np.uint8)
    try:
        c.get_stats_l3(buf.ctypes.data)
    except Exception:
        return None
    l3 = c.stats_level3_dtype
    shift = _L1_NEW - l1_size
    ng_off = l3.fields["num_gpus"][1] - shift
    pg_off = l3.fields["per_gpu_stats"][1] - shift
    num_gpus = int(buf[ng_off : ng_off + 4].view(np.uint32)[0])
    pg = c.per_gpu_stats_dtype
    l1 = c.stats_level1_dtype  # leading fields: same offsets in the old and new layouts
    u64 = buf[: l1_size - l1_size % 8].view(np.uint64)
    out: dict[str, Any] = {
        "level": str(_stats_level(c)),  # strings: the trace keeps them as they are (no delta)
        "read_ops": int(u64[l1.fields["read_ops"][1] // 8]),
        "write_ops": int(u64[l1.fields["write_ops"][1] // 8]),
        "bytes_read": int(u64[l1.fields["read_bytes"][1] // 8]),
        "gpus": str(num_gpus),
        "nvfs_reads": 0,
        "posix_reads": 0,
        "nvfs_writes": 0,
        "posix_writes": 0,
        "read_bytes": 0,
    }
    for i in range(min(num_gpus, 16)):
        rec = buf[pg_off + i * pg.itemsize : pg_off + (i + 1) * pg.itemsize].view(pg)[0]
        out["nvfs_reads"] += int(rec["n_nvfs_reads"])
        out["posix_reads"] += int(rec["n_posix_reads"])
        out["nvfs_writes"] += int(rec["n_nvfs_writes"])
        out["posix_writes"] += int(rec["n_posix_writes"])
        out["read_bytes"] += int(rec["read_bytes"])
    if num_gpus == 0:
        out["split"] = "per-GPU nvfs/posix counts not reported by this libcufile"
    return out


_trace.register_stats_source("cufile", read_stats)


# --- handles -----------------------------------------------------------------------------------------


def _status_name(exc: BaseException) -> str:
    text = str(exc)
    return text.split(":")[-1].strip() or type(exc).__name__


class CuFileHandle:
    """A file descriptor registered with cuFile. Owns the descriptor; ``close()`` deregisters."""

    def __init__(self, path: str, fd: int) -> None:
        c = _bindings()
        self.path = path
        self.fd = fd
        self.handle: int = 0
        self._users = 0
        self._evicted = False
        # CUfileDescr_t built by hand: {int type; union {int fd; void* handle}; void* fs_ops}, 24 bytes,
        # zeroed. The bindings' Descr wrapper differs between releases (13.3.1 crashed here with it).
        import numpy as np

        descr = np.zeros(3, dtype=np.int64)
        descr[0] = 1  # CU_FILE_HANDLE_TYPE_OPAQUE_FD
        descr[1] = fd
        self._descr = descr
        try:
            self.handle = int(c.handle_register(descr.ctypes.data))
        except Exception as exc:
            raise CuFileError(f"handle register failed: {_status_name(exc)}") from exc

    def read(self, dev_ptr: int, nbytes: int, file_offset: int, dev_offset: int) -> int:
        c = _bindings()
        try:
            n = int(c.read(self.handle, dev_ptr, nbytes, file_offset, dev_offset))
        except (ValueError, Exception) as exc:  # cuda.bindings raises ValueError for POSIX errnos
            raise CuFileError(f"cuFileRead({self.path!r}, offset={file_offset}, size={nbytes}) failed: {exc}") from exc
        if n < 0:
            raise CuFileError(f"cuFileRead({self.path!r}, offset={file_offset}, size={nbytes}) returned {n}")
        return n

    def write(self, dev_ptr: int, nbytes: int, file_offset: int, dev_offset: int) -> int:
        c = _bindings()
        try:
            n = int(c.write(self.handle, dev_ptr, nbytes, file_offset, dev_offset))
        except (ValueError, Exception) as exc:
            raise CuFileError(f"cuFileWrite({self.path!r}, offset={file_offset}, size={nbytes}) failed: {exc}") from exc
        if n < 0:
            raise CuFileError(f"cuFileWrite({self.path!r}, offset={file_offset}, size={nbytes}) returned {n}")
        return n

    def close(self) -> None:
        if self.handle:
            try:
                _bindings().handle_deregister(self.handle)
            except Exception:
                pass
            self.handle = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class HandleCache:
    """Registered read handles keyed by file identity (device, inode, size, mtime); LRU, bounded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[int, int, int, int], CuFileHandle] = OrderedDict()
        # Files whose registration failed, with the reason, so AUTO does not retry per read.
        self._failed: OrderedDict[tuple[int, int, int, int], str] = OrderedDict()

    @staticmethod
    def key(st: os.stat_result) -> tuple[int, int, int, int]:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def acquire(self, path: str, st: os.stat_result, flags: int) -> CuFileHandle | str:
        """A registered handle for ``path`` (user count incremented), or the failure reason."""
        key = self.key(st)
        with self._lock:
            h = self._entries.get(key)
            if h is not None:
                self._entries.move_to_end(key)
                h._users += 1
                return h
            failed = self._failed.get(key)
            if failed is not None:
                return failed
        fd = os.open(path, flags)
        try:
            h = CuFileHandle(path, fd)
        except CuFileError as exc:
            os.close(fd)
            with self._lock:
                self._failed[key] = str(exc)
                while len(self._failed) > 1024:
                    self._failed.popitem(last=False)
            return str(exc)
        with self._lock:
            h._users += 1
            other = self._entries.get(key)
            if other is not None:  # another thread registered meanwhile
                other._users += 1
                h._users -= 1
                h.close()
                return other
            self._entries[key] = h
            limit = settings().cufile_handle_cache_size
            for k in list(self._entries):
                if len(self._entries) <= limit:
                    break
                old = self._entries[k]
                if old._users == 0:
                    del self._entries[k]
                    old.close()
        return h

    def release(self, h: CuFileHandle) -> None:
        with self._lock:
            h._users -= 1
            if h._evicted and h._users == 0:
                h.close()

    def clear(self) -> None:
        with self._lock:
            for h in self._entries.values():
                if h._users == 0:
                    h.close()
                else:
                    h._evicted = True
            self._entries.clear()
            self._failed.clear()


handle_cache = HandleCache()


def _forget_after_fork() -> None:
    """In a forked child: a fresh driver state and handle cache (cuFile's state is the parent's). The
    inherited descriptors are closed; nothing is deregistered, which would act on the parent's driver."""
    global _driver, _driver_lock, handle_cache
    stale = handle_cache
    _driver, _driver_lock, handle_cache = _DriverState(), threading.Lock(), HandleCache()
    for h in list(stale._entries.values()):
        h.handle = 0
        h.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
