"""``gdsstore.doctor()``: the environment, the resolved routes with their reasons, and a probe read.

One command for what GDS users otherwise piece together from ``gdscheck -p``, ``gds_stats`` and the
cuFile log: versions, libcufile, nvidia-fs, udev, cufile.json, the route each kind of buffer would
take and why, and a traced probe read. On a machine without a GPU it says so and returns in seconds.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import sys
import tempfile
import types
from importlib import metadata
from typing import Any

from gdsstore import policy
from gdsstore._config import config, unknown_names
from gdsstore._version import __version__
from gdsstore.engine.storage import read_text

__all__ = ["doctor", "format_report"]

_PACKAGES = ("numpy", "zarr", "fsspec", "numcodecs", "cupy-cuda13x", "cupy-cuda12x", "cuda-bindings",
             "nvidia-cufile", "nvidia-cufile-cu12", "kvikio-cu13", "kvikio-cu12", "nvidia-nvcomp-cu13",
             "nvidia-nvcomp-cu12", "botocore")


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "gdsstore": _pkg("gdsstore") or __version__}
    for name in _PACKAGES:
        v = _pkg(name)
        if v:
            out[name] = v
    return out


def _pkg(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cufile_json() -> dict[str, Any]:
    path = os.environ.get("CUFILE_ENV_PATH_JSON", "/etc/cufile.json")
    text = read_text(path)
    info: dict[str, Any] = {"path": path, "found": text is not None}
    if text is None:
        return info
    from gdsstore.engine.cufile import strip_json_comments

    try:
        data = json.loads(strip_json_comments(text))
    except ValueError as exc:
        info["error"] = f"not valid JSON: {exc}"
        return info
    props = data.get("properties", {})
    info["execution"] = data.get("execution", {})
    info["profile"] = data.get("profile", {})
    info["properties"] = {
        k: props[k]
        for k in ("allow_compat_mode", "force_compat_mode", "use_poll_mode", "max_direct_io_size_kb",
                  "max_device_cache_size_kb", "gds_rdma_write_support")
        if k in props
    }
    return info


def _gpu() -> dict[str, Any]:
    from gdsstore.engine import cuda

    n = cuda.device_count()
    info: dict[str, Any] = {"devices": n, "cupy": cuda.cupy_or_none() is not None}
    if n:
        cp = cuda.cupy_or_none()
        try:
            info["names"] = [cp.cuda.runtime.getDeviceProperties(i)["name"].decode() for i in range(n)]
            info["driver"] = cp.cuda.runtime.driverGetVersion()
            info["runtime"] = cp.cuda.runtime.runtimeGetVersion()
        except Exception as exc:
            info["error"] = str(exc)
    return info


def _cufile() -> dict[str, Any]:
    from gdsstore.engine import cufile

    nvfs = read_text("/proc/driver/nvidia-fs/version")
    udev = os.path.isdir("/run/udev/data") and bool(os.listdir("/run/udev/data"))
    lib = cufile.library_version()
    return {
        "bindings": cufile.bindings_version(),
        "libcufile": f"{lib // 1000}.{lib % 1000 // 10}" if lib else None,
        "nvidia_fs": nvfs or "absent (cuFile can only run in its compat mode)",
        "udev": "present" if udev else "absent (/run/udev/data empty: cuFile handle registration fails)",
        "proc_modules_readable": os.access("/proc/modules", os.R_OK),
        "cufile_json": _cufile_json(),
    }


#: Where the native core comes from (built into gdsstore's wheel from native/).
_CORE_HINT = ("reinstall gdsstore: `pip install gdsstore`, or `pip install -e .` in a clone, which compiles it "
              "with cargo (docs/install.md)")


def _native_core(s: policy.Settings | None) -> dict[str, Any]:
    """Whether the native core (``gdsstore._core``) loads, its version and file, and what that changes."""
    from gdsstore.engine import native

    info: dict[str, Any] = {"installed": native.load() is not None}
    if not info["installed"]:
        try:  # the trace says "not installed"; the doctor gives the import error and the way to build it
            importlib.import_module(native.MODULE)
        except ImportError as exc:
            detail = f"{type(exc).__name__}: {exc}"
        else:
            detail = "it imports now"
        info["reason"] = f"{native.unavailable_reason()}: {detail}; {_CORE_HINT}"
        info["effect"] = ("HTTP(S) and S3 cannot be read or written (the core is their only transport); local "
                          "chunk batches run on Python threads")
        return info
    mod = native.load()
    info["version"] = getattr(mod, "__version__", None) or _pkg("gdsstore")
    info["location"] = os.path.dirname(getattr(mod, "__file__", None) or "")
    info["effect"] = ("every HTTP(S) and S3 request goes through it; local chunk batches are read by it; each "
                      "call releases the GIL and runs many requests at once")
    return info


def _probe_read(gpu: bool) -> dict[str, Any]:
    """Write a small file, read it back through the engine into host (and device) memory, traced."""
    import numpy as np

    from gdsstore.engine import open as engine_open
    from gdsstore.trace import trace

    data = np.random.default_rng(0).integers(0, 255, 4 << 20, dtype=np.uint8)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="gdsstore-doctor-") as tmp:
        path = os.path.join(tmp, "probe.bin")
        with trace() as t:
            with engine_open(path, "wb") as f:
                f.write(data)
            with engine_open(path, "rb") as f:
                host = np.empty_like(data)
                f.read(host)
                out["host_ok"] = bool((host == data).all())
                if gpu:
                    import cupy as cp

                    dev = cp.empty(data.size, dtype=cp.uint8)
                    f.read(dev)
                    out["device_ok"] = bool((cp.asnumpy(dev) == data).all())
    out["trace"] = str(t)
    out["totals"] = t.totals
    return out


def doctor(probe: bool = True) -> dict[str, Any]:
    """Report on this machine's GPU/cuFile setup, the routes gdsstore will take, and (optionally) a
    traced probe read. Never opens the cuFile driver unguarded; returns in seconds without a GPU."""
    from gdsstore.engine import cufile

    report: dict[str, Any] = {"versions": _versions(), "platform": platform.platform()}
    gpu = _gpu()
    report["gpu"] = gpu
    report["cufile"] = _cufile()
    report["unknown_settings"] = unknown_names()  # a misspelled GDSSTORE_* variable is silently ignored
    try:
        s = policy.settings()
        report["settings"] = {k: v for k, v in config.config.items()}
    except ValueError as exc:
        report["settings_error"] = str(exc)
        report["native_core"] = _native_core(None)
        return report
    report["native_core"] = _native_core(s)
    drv = cufile.driver_probe() if gpu["devices"] else policy.CuFileProbeResult(False, "no CUDA device")
    report["cufile"]["driver"] = {"ok": drv.ok, "reason": drv.reason}
    if drv.ok:  # what a registered handle would report: whether cuFile runs without nvidia-fs
        drv = policy.CuFileProbeResult(True, drv.reason, nvfs=cufile.nvidia_fs_present())
    routes = {"host buffer": policy.decide_local(device=False, nbytes=s.task_size, cufile=None, s=s)}
    try:
        routes["device buffer, small"] = policy.decide_local(device=True, nbytes=4096, cufile=drv, s=s)
        routes["device buffer, large"] = policy.decide_local(device=True, nbytes=s.task_size * 4, cufile=drv, s=s)
    except policy.CuFileRequiredError as exc:
        routes["device buffer"] = policy.Decision("error", str(exc))
    report["routes"] = {k: {"route": d.route, "reason": d.reason} for k, d in routes.items()}
    report["compat_mode"] = s.compat_mode
    report["memory"] = _memory(s)
    report["hints"] = hints(drv, s)
    if probe:
        try:
            report["probe"] = _probe_read(gpu["devices"] > 0)
        except Exception as exc:  # the report is still useful without the probe
            report["probe"] = {"error": f"{type(exc).__name__}: {exc}"}
    return report


def _memory(s: policy.Settings) -> dict[str, Any]:
    """Pinned host memory now (bounce slots and pipeline staging, one account) and the device budget."""
    from gdsstore.engine.bounce import ring

    return {"pinned": ring.stats(), "gpu_memory_budget": s.gpu_memory_budget}


def hints(drv: policy.CuFileProbeResult, s: policy.Settings) -> list[str]:
    """Advice from the cuFile probe and the settings: what a user of this machine may want to change.

    Examples:
        >>> s = policy.settings()
        >>> hints(policy.CuFileProbeResult(True, "cuFile driver open", nvfs=False), s)[0][:40]
        'cuFile runs here without nvidia-fs (its '
        >>> hints(policy.CuFileProbeResult(True, "cuFile driver open", nvfs=True), s)
        []
    """
    out = []
    if drv.ok and drv.nvfs is False and s.compat_mode == "auto" and s.cufile_without_nvfs == "cufile":
        out.append(
            "cuFile runs here without nvidia-fs (its compat mode: its own pread and copy loop); "
            "gdsstore's POSIX route measured faster on such machines (docs: Performance). To use it "
            "for large device reads: GDSSTORE_CUFILE_WITHOUT_NVFS=posix"
        )
    return out


def format_report(r: dict[str, Any]) -> str:
    """Human-readable text for :func:`doctor`'s dict."""
    lines = ["gdsstore doctor", "==============="]
    lines.append("versions: " + ", ".join(f"{k} {v}" for k, v in r["versions"].items()))
    g = r["gpu"]
    if g["devices"]:
        lines.append(f"GPU: {g['devices']} device(s): {', '.join(g.get('names', []))}")
    else:
        why = "cupy not installed" if not g["cupy"] else "no CUDA device/driver visible"
        lines.append(f"GPU: none ({why}); host buffers only")
    c = r["cufile"]
    lines.append(f"cuFile: bindings {c['bindings']}, libcufile {c['libcufile'] or 'not found'}")
    lines.append(f"  nvidia-fs: {c['nvidia_fs']}")
    lines.append(f"  udev: {c['udev']}")
    lines.append(f"  /proc/modules readable: {c['proc_modules_readable']}")
    cj = c["cufile_json"]
    lines.append(f"  cufile.json: {cj['path']} ({'found' if cj['found'] else 'not found, defaults apply'})")
    for k in ("execution", "properties", "profile"):
        if cj.get(k):
            lines.append(f"    {k}: " + ", ".join(f"{a}={b}" for a, b in cj[k].items()))
    if "driver" in c:
        lines.append(f"  driver: {'open' if c['driver']['ok'] else 'not used'} — {c['driver']['reason']}")
    lines.extend(_format_core(r.get("native_core")))
    lines.extend(f"settings: {u}" for u in r.get("unknown_settings", []))
    if "settings_error" in r:
        lines.append(f"settings: INVALID — {r['settings_error']}")
        return "\n".join(lines)
    lines.append(f"compat_mode: {r['compat_mode']}")
    lines.append("routes:")
    for k, d in r["routes"].items():
        lines.append(f"  {k:<22} -> {d['route']:<7} ({d['reason']})")
    m = r.get("memory")
    if m:
        p, fb = m["pinned"], policy.fmt_bytes
        lines.append(
            f"pinned memory: {fb(p['total'])} of pinned_memory_limit {fb(p['limit'])} "
            f"(bounce slots {fb(p['slots'])}, GPU pipeline staging {fb(p['external'])})"
        )
        lines.append(f"device memory budget: gpu.memory_budget {fb(m['gpu_memory_budget'])} per pipeline call")
    for h in r.get("hints", []):
        lines.append(f"hint: {h}")
    p = r.get("probe")
    if p:
        if "error" in p:
            lines.append(f"probe read: FAILED {p['error']}")
        else:
            ok = "ok" if p.get("host_ok") and p.get("device_ok", True) else "MISMATCH"
            lines.append(f"probe read (4 MiB, write then read back): {ok}")
            lines.extend("  " + ln for ln in p["trace"].splitlines())
    return "\n".join(lines)


def _format_core(core: dict[str, Any] | None) -> list[str]:
    if core is None:
        return []
    if core["installed"]:
        head = f"native core: gdsstore._core {core['version'] or '(version unknown)'} at {core['location']}"
    else:
        head = f"native core: not installed ({core['reason']})"
    return [head, f"  what it changes: {core['effect']}"]


class _CallableModule(types.ModuleType):
    """Lets ``gdsstore.doctor`` be both this module and the ``doctor()`` function, whatever the import
    order (``import gdsstore.doctor`` binds the module to the package's name), as ``gdsstore.trace``."""

    def __call__(self, probe: bool = True) -> dict[str, Any]:
        return doctor(probe)


sys.modules[__name__].__class__ = _CallableModule


if __name__ == "__main__":  # pragma: no cover
    print(format_report(doctor()))
    sys.exit(0)
