"""Throughput of each route on one file (or URL, or zarr array), next to the anchors users compare with.

Used by ``gdsstore bench``. Every measurement reads the whole object into one destination (cupy when a
GPU is present, numpy otherwise), best of ``repeat`` runs; ``cold=True`` drops the file's pages
before each run (``posix_fadvise``) and checks they are gone.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from gdsstore import pagecache
from gdsstore._config import config
from gdsstore.engine import cuda

if TYPE_CHECKING:
    from obstore.store import ClientConfig  # a TypedDict of the stubs only

__all__ = [
    "BenchOptions",
    "BenchResult",
    "bench_file",
    "bench_url",
    "bench_zarr",
    "format_table",
    "remote_zarr_node_type",
]


@dataclass
class BenchResult:
    """One measured route: what it read, its best time, and a note (why it failed, settings it used).

    Examples:
        >>> r = BenchResult("gdsstore (defaults)", nbytes=1 << 30, seconds=0.5)
        >>> round(r.gbps, 2)
        2.15
        >>> r.as_dict()["gbps"]
        2.147
    """

    name: str
    nbytes: int
    seconds: float  # best of the runs; 0.0 when the route failed (the note says why)
    note: str = ""

    @property
    def gbps(self) -> float:
        """Throughput in GB/s (10⁹ bytes per second); 0.0 for a failed route."""
        return self.nbytes / self.seconds / 1e9 if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The fields and ``gbps`` (rounded to 3 places), as ``gdsstore bench --json`` prints them."""
        return {**asdict(self), "gbps": round(self.gbps, 3)}


def _dest(nbytes: int, device: bool) -> Any:
    if device:
        import cupy as cp

        return cp.empty(nbytes, dtype=cp.uint8)
    import numpy as np

    return np.empty(nbytes, dtype=np.uint8)


def _sync(device: bool) -> None:
    if device:
        import cupy as cp

        cp.cuda.runtime.deviceSynchronize()


@contextlib.contextmanager
def _settings(**kw: Any) -> Iterator[None]:
    with config.set(kw):
        yield


def _measure(fn: Callable[[], int], path: str | None, cold: bool, repeat: int, device: bool) -> tuple[float, str]:
    best = float("inf")
    note = ""
    for _ in range(repeat):
        if cold and path:
            left = pagecache.drop(path)
            if left.resident_pages:
                note = f"{left.fraction:.0%} still cached after drop"
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best, note


def bench_file(
    path: str,
    *,
    repeat: int = 3,
    cold: bool = False,
    threads: int | None = None,
    device: bool | None = None,
    progress: bool = True,
) -> list[BenchResult]:
    """Measure every available route reading ``path`` whole into device (or host) memory.

    Routes: gdsstore with its defaults (and at ``threads``), its POSIX and cuFile routes on a GPU,
    ``numpy.fromfile`` (+ ``cupy.asarray``), and ``kvikio.CuFile`` where kvikio is installed (each in its
    own process). A route that fails is reported with ``seconds=0`` and the error in its note.

    Args:
        path: the file to read.
        repeat: runs per route; the best counts.
        cold: drop the file's pages from the page cache before each run (and note any that stay).
        threads: also measure gdsstore and kvikio at this thread count.
        device: read into GPU memory (``None``: when a GPU is present).
        progress: show a progress bar on stderr.

    Returns:
        One :class:`BenchResult` per route, in the order measured.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    device = cuda.device_count() > 0 if device is None else device
    size = os.path.getsize(path)
    n_threads = threads or int(config.get("num_threads"))
    cases = _file_cases(path, _dest(size, device), device, n_threads if threads else None)
    results = _run_cases(cases, size, repeat, device, progress, path=path, cold=cold)
    if device and importlib.util.find_spec("kvikio") is not None:
        # In its own process: kvikio and gdsstore each open the cuFile driver their own way.
        # kvikio's cuFile path opens files O_DIRECT (page cache bypassed); its compat (POSIX) mode
        # does not, so it is measured too: the anchor is kvikio's best configuration.
        for nthreads, compat in ((None, None), (n_threads, None), (n_threads, "ON")):
            label = f"{nthreads} threads" if nthreads else "defaults"
            name = f"kvikio.CuFile ({label}{', KVIKIO_COMPAT_MODE=ON' if compat else ''})"
            results.append(_kvikio_subprocess(name, path, size, nthreads, repeat, cold, compat))
    return results


def _file_cases(path: str, buf: Any, device: bool, threads: int | None) -> list[tuple[str, Callable[[], Any]]]:
    """The routes :func:`bench_file` measures in this process, each a call reading ``path`` whole."""
    import numpy as np

    import gdsstore

    n_threads = threads or int(config.get("num_threads"))

    def engine_read(**kw: Any) -> Callable[[], int]:
        def run() -> int:
            with _settings(**kw), gdsstore.open(path) as f:
                return int(f.read(buf))

        return run

    cases = [("gdsstore (defaults)", engine_read())]
    if threads:
        cases.append((f"gdsstore ({n_threads} threads)", engine_read(num_threads=n_threads)))
    if device:
        cases.append(("gdsstore posix route", engine_read(compat_mode="on", num_threads=n_threads)))
        from gdsstore.engine import cufile

        if cufile.driver_probe().ok:
            cases.append(("gdsstore cufile route", engine_read(compat_mode="off", num_threads=n_threads)))

    def np_fromfile() -> int:
        arr = np.fromfile(path, dtype=np.uint8)
        if device:
            import cupy as cp

            cp.asarray(arr)
        return arr.size

    cases.append(("numpy.fromfile" + (" + cupy.asarray" if device else ""), np_fromfile))
    return cases


_KVIKIO_CODE = """
import sys, time, cupy as cp, kvikio, kvikio.defaults
from gdsstore import pagecache
path, nthreads, repeat, cold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
if nthreads:
    try:
        kvikio.defaults.set({"num_threads": nthreads})
    except TypeError:
        kvikio.defaults.set("num_threads", nthreads)
buf = cp.empty(int(sys.argv[5]), dtype=cp.uint8)
best = float("inf")
for _ in range(repeat):
    if cold:
        pagecache.drop(path)
    cp.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    with kvikio.CuFile(path, "r") as f:
        f.read(buf)
    cp.cuda.runtime.deviceSynchronize()
    best = min(best, time.perf_counter() - t0)
print(best, kvikio.defaults.get("num_threads"), kvikio.defaults.get("compat_mode"))
"""


def _kvikio_subprocess(
    name: str, path: str, size: int, nthreads: int | None, repeat: int, cold: bool, compat: str | None
) -> BenchResult:
    args = [sys.executable, "-c", _KVIKIO_CODE, path, str(nthreads or 0), str(repeat), "1" if cold else "0", str(size)]
    env = dict(os.environ)
    if nthreads:
        env["KVIKIO_NTHREADS"] = str(nthreads)
    if compat:
        env["KVIKIO_COMPAT_MODE"] = compat
    out = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False, env=env)
    if out.returncode != 0:
        code = out.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return BenchResult(name, size, 0.0, f"failed ({how}): {last[:160]}")
    seconds, threads, compat = out.stdout.split()[:3]
    return BenchResult(name, size, float(seconds), f"kvikio num_threads={threads}, compat_mode={compat}")


def _run_cases(
    cases: list[tuple[str, Callable[[], Any]]],
    nbytes: int,
    repeat: int,
    device: bool,
    progress: bool,
    *,
    path: str | None = None,
    cold: bool = False,
) -> list[BenchResult]:
    """Measure each case (the best of ``repeat`` runs; ``cold``: ``path``'s pages dropped before each);
    a case that fails is reported with ``seconds=0`` and the error in its note."""
    it: Any = cases
    if progress:
        from tqdm import tqdm

        it = tqdm(cases, desc="bench", unit="route", leave=False)
    results = []
    for name, fn in it:
        try:
            seconds, note = _measure(fn, path, cold, repeat, device)
            results.append(BenchResult(name, nbytes, seconds, note))
        except Exception as exc:
            results.append(BenchResult(name, nbytes, 0.0, f"failed: {type(exc).__name__}: {exc}"))
    return results


class BenchOptions(TypedDict, total=False):
    """The keyword arguments of :func:`bench_url` and :func:`bench_zarr`: how every contender reads.

    Attributes:
        repeat: runs per contender; the best counts (default 3).
        device: read into GPU memory (default ``None``: when a GPU is present).
        storage_options: for a URL, passed to gdsstore and to the contender (endpoint, credentials).
        progress: show a progress bar on stderr (default ``True``).
    """

    repeat: int
    device: bool | None
    storage_options: dict[str, Any] | None
    progress: bool


#: What one benchmark measures: the bytes each contender reads, and each contender's (name, read).
_Contenders = tuple[int, list[tuple[str, Callable[[], Any]]]]


def _bench_contenders(
    who: str, options: BenchOptions, contenders: Callable[[bool, dict[str, Any]], _Contenders]
) -> list[BenchResult]:
    """Measure what ``contenders(device, storage_options)`` builds, as ``options`` say.

    Raises:
        TypeError: ``options`` has a key :class:`BenchOptions` does not name.
    """
    unknown = sorted(set(options) - BenchOptions.__optional_keys__)
    if unknown:
        known = ", ".join(sorted(BenchOptions.__optional_keys__))
        raise TypeError(f"{who}() got unexpected keyword arguments {unknown}; it takes {known}")
    device = options.get("device")
    device = cuda.device_count() > 0 if device is None else device
    nbytes, cases = contenders(device, dict(options.get("storage_options") or {}))
    return _run_cases(cases, nbytes, options.get("repeat", 3), device, options.get("progress", True))


def bench_url(url: str, **options: Unpack[BenchOptions]) -> list[BenchResult]:
    """Read one remote object whole through gdsstore, next to fsspec (+ ``cupy.asarray``) and, for
    HTTP(S) on a GPU, ``kvikio.RemoteFile`` when installed.

    Args:
        url: an ``s3://``, ``http(s)://`` or ``webhdfs://`` URL.
        **options: how each contender reads (:class:`BenchOptions`).

    Returns:
        One :class:`BenchResult` per contender.

    Raises:
        OSError: the object cannot be reached or does not exist (``FileNotFoundError`` for a 404).
    """
    return _bench_contenders("bench_url", options, functools.partial(_url_contenders, url))


def _url_contenders(url: str, device: bool, opts: dict[str, Any]) -> _Contenders:
    import gdsstore

    with gdsstore.open(url, **opts) as f:
        size = f.size
    buf = _dest(size, device)

    def engine() -> int:
        with gdsstore.open(url, **opts) as f:
            return int(f.read(buf))

    def via_fsspec() -> int:
        import fsspec
        import numpy as np

        with fsspec.open(url, "rb", **opts) as fh:
            data = fh.read()
        if device:
            import cupy as cp

            cp.asarray(np.frombuffer(data, dtype=np.uint8))
        return len(data)

    cases: list[tuple[str, Callable[[], Any]]] = [
        ("gdsstore (defaults)", engine),
        ("fsspec" + (" + cupy.asarray" if device else ""), via_fsspec),
    ]
    if device and url.startswith(("http://", "https://")) and importlib.util.find_spec("kvikio") is not None:

        def kvikio_remote() -> int:
            import kvikio

            with kvikio.RemoteFile.open_http(url) as rf:
                return int(rf.read(buf))

        cases.append(("kvikio.RemoteFile (its defaults)", kvikio_remote))
    return size, cases


def remote_zarr_node_type(url: str, storage_options: dict[str, Any] | None = None) -> str | None:
    """``node_type`` of the zarr v3 node at ``url`` (its ``zarr.json``); ``None`` where there is none.

    Raises:
        OSError: the server cannot be reached or refuses (anything but "not found").
        ValueError: ``zarr.json`` is there but is not JSON.
    """
    import json

    import numpy as np

    import gdsstore

    meta_url = url.rstrip("/") + "/zarr.json"
    try:
        with gdsstore.open(meta_url, **(storage_options or {})) as f:
            raw = np.empty(f.size, dtype=np.uint8)
            f.read(raw)
    except FileNotFoundError:
        return None
    try:
        meta = json.loads(raw.tobytes())
    except ValueError as exc:
        raise ValueError(f"{meta_url} cannot be read as JSON: {exc}") from None
    return str(meta.get("node_type", "unknown node")) if isinstance(meta, dict) else "unknown node"


def _zarr_anchor(path: str, storage_options: dict[str, Any]) -> tuple[str, Callable[[], Any]]:
    """zarr's own store for ``path``, as a user of plain zarr would open it: (label, store factory)."""
    import zarr

    if "://" not in path or path.startswith("file://"):
        local = path.removeprefix("file://")
        return "zarr LocalStore", lambda: zarr.storage.LocalStore(local, read_only=True)
    if path.startswith(("http://", "https://")) and not storage_options and importlib.util.find_spec("obstore"):
        from obstore.store import HTTPStore  # zarr's ObjectStore needs obstore (not a dependency of gdsstore)

        client: ClientConfig = {"allow_http": path.startswith("http://")}
        return "zarr ObjectStore(obstore HTTPStore)", lambda: zarr.storage.ObjectStore(
            HTTPStore.from_url(path, client_options=client), read_only=True
        )
    return "zarr FsspecStore", lambda: zarr.storage.FsspecStore.from_url(
        path, storage_options=storage_options or None, read_only=True
    )


def bench_zarr(path: str, **options: Unpack[BenchOptions]) -> list[BenchResult]:
    """Read a zarr array whole (``z[:]``) through gdsstore's store and pipeline, next to zarr's own
    store for it: ``LocalStore`` for a directory, ``ObjectStore`` (obstore) for an HTTP(S) URL,
    ``FsspecStore`` for other URLs (GPU buffers on both sides when a GPU is present).

    Args:
        path: a zarr v3 array (not a group): a local directory or a URL.
        **options: how each contender reads (:class:`BenchOptions`; ``storage_options`` go to ``GDSStore``
            and to zarr's store for a URL).

    Returns:
        One :class:`BenchResult` per contender.
    """
    return _bench_contenders("bench_zarr", options, functools.partial(_zarr_contenders, path))


def _zarr_contenders(path: str, device: bool, opts: dict[str, Any]) -> _Contenders:
    import zarr

    import gdsstore

    def open_ours() -> Any:
        return zarr.open_array(gdsstore.GDSStore(path, read_only=True, storage_options=opts or None), mode="r")

    nbytes = int(open_ours().nbytes)
    anchor, anchor_store = _zarr_anchor(path, opts)

    def ours() -> int:
        with gdsstore.enable_gpu(buffers=device):
            x: Any = open_ours()[:]
            return int(x.nbytes)

    def theirs() -> int:
        with zarr.config.enable_gpu() if device else contextlib.nullcontext():
            x: Any = zarr.open_array(anchor_store(), mode="r")[:]
            return int(x.nbytes)

    cases: list[tuple[str, Callable[[], Any]]] = [
        ("gdsstore GDSStore + " + ("enable_gpu()" if device else "pipeline, host buffers"), ours),
        (anchor + (" + zarr.config.enable_gpu()" if device else ""), theirs),
    ]
    return nbytes, cases


def format_table(results: list[BenchResult], title: str = "") -> str:
    """The table ``gdsstore bench`` prints: one row per route, columns aligned.

    Examples:
        >>> print(format_table([BenchResult("numpy.fromfile", 1 << 20, 0.001)], "warm read of f.bin"))
        warm read of f.bin
        route           bytes    seconds  GB/s  note
        --------------  -------  -------  ----  ----
        numpy.fromfile  1048576  0.0010   1.05
    """
    rows = [("route", "bytes", "seconds", "GB/s", "note")]
    for r in results:
        rows.append((r.name, str(r.nbytes), f"{r.seconds:.4f}", f"{r.gbps:.2f}", r.note))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [title] if title else []
    for i, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
