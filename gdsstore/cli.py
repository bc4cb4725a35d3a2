"""The ``gdsstore`` command: ``doctor``, ``demo``, ``bench``.

Exit status: 0 on success, 1 when ``doctor`` finds a problem (or ``demo`` reads back other bytes), 2 for
a usage error, which is printed as one line on stderr (``gdsstore bench: error: ...``), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

__all__ = ["doctor_problems", "main"]


def _doctor(args: argparse.Namespace) -> int:
    from gdsstore.doctor import doctor, format_report

    report = doctor(probe=not args.no_probe)
    print(json.dumps(report, indent=2, default=str) if args.json else format_report(report))
    problems = doctor_problems(report)
    for problem in problems:
        print(f"gdsstore doctor: problem: {problem}", file=sys.stderr)
    return 1 if problems else 0


def doctor_problems(report: dict[str, Any]) -> list[str]:
    """What in a :func:`gdsstore.doctor` report makes this installation unusable as configured.

    ``gdsstore doctor`` exits 1 when this list is not empty, so scripts and CI can rely on its status.
    A machine without a GPU is not a problem (host buffers work there); invalid settings, a
    ``cufile.json`` that is not JSON, a ``GDSSTORE_*`` variable that is no setting (a misspelling is
    otherwise ignored), device reads that ``compat_mode="off"`` would refuse and a probe
    read that fails or returns other bytes are.

    Args:
        report: the dict :func:`gdsstore.doctor` returns.

    Returns:
        One line per problem, each naming what is wrong and where to fix it.

    Examples:
        >>> doctor_problems({"settings_error": "gdsstore setting 'compat_mode' must be one of auto, on, off"})
        ["settings are invalid: gdsstore setting 'compat_mode' must be one of auto, on, off (fix the GDSSTORE_* variable or the config file that sets it)"]
    """
    problems = []
    if "settings_error" in report:
        problems.append(
            f"settings are invalid: {report['settings_error']} "
            "(fix the GDSSTORE_* variable or the config file that sets it)"
        )
    problems.extend(
        f"{unknown} (unset or rename it: docs/settings.md lists every variable)"
        for unknown in report.get("unknown_settings", [])
    )
    if report.get("gpu", {}).get("error"):
        problems.append(f"CuPy sees a GPU but cannot query it: {report['gpu']['error']}")
    cufile_json = report.get("cufile", {}).get("cufile_json", {})
    if cufile_json.get("error"):
        problems.append(
            f"{cufile_json['path']} is {cufile_json['error']} (cuFile reads it when its driver opens)"
        )
    for kind, decision in report.get("routes", {}).items():
        if decision["route"] == "error":
            problems.append(f"{kind} reads will fail: {decision['reason']}")
    probe = report.get("probe")
    if probe is not None:
        if "error" in probe:
            problems.append(f"the probe read failed: {probe['error']}")
        elif not probe.get("host_ok") or probe.get("device_ok") is False:
            problems.append("the probe read returned other bytes than it wrote")
    return problems


def _demo(args: argparse.Namespace) -> int:
    if args.n < 4:
        raise ValueError(f"--n must be at least 4 (the array is cut into 4 x 4 chunks), got {args.n}")
    if args.path:
        overwrite = _check_demo_path(args.path)
        return _demo_at(args.path, args.n, args.host, overwrite=overwrite)
    # Nothing is left behind: the array lives in a temporary directory removed on the way out.
    with tempfile.TemporaryDirectory(prefix="gdsstore-demo-") as tmp:
        return _demo_at(os.path.join(tmp, "demo.zarr"), args.n, args.host)


# The demo's arrays carry this attribute; ``--path`` replaces only an array that has it and nothing else.
_DEMO_MARK = "gdsstore_demo"


def _check_demo_path(path: str) -> bool:
    """Whether ``gdsstore demo --path`` may write at ``path``: True to replace the demo's own array there,
    False for a new or empty directory. Anything else raises ``ValueError`` (one line, exit 2): the demo
    never deletes or replaces what it did not create."""
    if not os.path.lexists(path):
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise ValueError(f"--path {path!r}: its parent directory {parent!r} does not exist")
        if not os.access(parent, os.W_OK):
            raise ValueError(f"--path {path!r}: cannot create it, {parent!r} is not writable")
        return False
    if not os.path.isdir(path) or os.path.islink(path):
        raise ValueError(f"--path {path!r} exists and is not a directory: give a new or empty directory")
    if not os.listdir(path):
        return False
    if _is_demo_array(path):
        return True
    raise ValueError(
        f"--path {path!r} is not empty and is not an array this demo wrote: give a new or empty "
        "directory (the demo never deletes or replaces what it did not create)"
    )


def _is_demo_array(path: str) -> bool:
    """``path`` holds a zarr array the demo wrote (its mark in zarr.json) and nothing but its chunks."""
    try:
        with open(os.path.join(path, "zarr.json")) as fh:
            meta = json.load(fh)
    except (OSError, ValueError):
        return False
    if not isinstance(meta, dict) or _DEMO_MARK not in (meta.get("attributes") or {}):
        return False
    for top, dirs, files in os.walk(path):
        rel = os.path.relpath(top, path)
        for name in files:
            inside = name if rel == "." else os.path.join(rel, name)
            if inside != "zarr.json" and not inside.startswith("c" + os.sep):
                return False
        if any(os.path.islink(os.path.join(top, d)) for d in dirs):
            return False
    return True


def _demo_at(root: str, n: int, host: bool, *, overwrite: bool = False) -> int:
    """Write an ``n`` x ``n`` float32 zarr array at ``root``, read it back traced, print what happened.

    ``overwrite`` only when ``root`` holds the demo's own array (:func:`_check_demo_path`).
    """
    import numpy as np
    import zarr

    import gdsstore
    from gdsstore.engine import cuda

    gpu = cuda.device_count() > 0 and not host
    data = np.arange(n * n, dtype="float32").reshape(n, n)
    store = gdsstore.GDSStore(root)
    try:
        z = zarr.create_array(
            store, shape=data.shape, chunks=(n // 4, n // 4), dtype=data.dtype, overwrite=overwrite,
            attributes={_DEMO_MARK: "written by `gdsstore demo`; the demo may replace it"},
        )
        z[:] = data
    except OSError as exc:  # a full disk, a read-only mount: one line, exit 2
        raise ValueError(f"cannot write the demo array at {root!r}: {exc}") from None
    print(f"wrote {data.nbytes} bytes as a {data.shape} float32 zarr array at {root} ({z.nchunks} chunks)")
    print(f"reading it back into {'GPU (cupy)' if gpu else 'host (numpy)'} memory through gdsstore")
    x: Any
    with gdsstore.trace() as t:
        if gpu:
            with gdsstore.enable_gpu():
                x = zarr.open_array(gdsstore.GDSStore(root, read_only=True), mode="r")[:]
            ok = bool((x.get() == data).all())
        else:
            x = zarr.open_array(gdsstore.GDSStore(root, read_only=True), mode="r")[:]
            ok = bool((x == data).all())
    print(f"result: {type(x).__module__}.{type(x).__name__} {x.shape}, equal to the source: {ok}")
    print(t)
    return 0 if ok else 1


def _bench(args: argparse.Namespace) -> int:
    from gdsstore.bench import bench_file, bench_zarr

    path = args.path
    device = False if args.host else None
    if path is not None and "://" in path and not path.startswith("file://"):
        return _bench_remote(args, path, device)
    if args.storage_option or args.endpoint_url:
        raise ValueError("--storage-option and --endpoint-url apply to URLs (s3://, http(s)://, webhdfs://), "
                         f"not to the local {'file' if path else 'temporary file'}")
    if path is not None:
        path = path.removeprefix("file://")
        _check_bench_path(path)
    if path is not None and os.path.isdir(path):
        results = bench_zarr(path, repeat=args.repeat, device=device)
        return _report(args, results, f"z[:] of the zarr array {path}")
    tmp = None
    if path is None:
        tmp = tempfile.NamedTemporaryFile(prefix="gdsstore-bench-", suffix=".bin", delete=False)  # noqa: SIM115
        chunk = os.urandom(1 << 20)
        for _ in range(args.size >> 20):
            tmp.write(chunk)
        tmp.close()
        path = tmp.name
    try:
        results = bench_file(path, repeat=args.repeat, cold=args.cold, threads=args.threads, device=device)
    finally:
        if tmp is not None:
            os.unlink(tmp.name)
    return _report(args, results, f"{'cold' if args.cold else 'warm'} read of {path}")


def _bench_remote(args: argparse.Namespace, url: str, device: bool | None) -> int:
    """A URL: a zarr array (a ``zarr.json`` under it) benchmarks as a local one does, else one object."""
    from gdsstore.bench import bench_url, bench_zarr, remote_zarr_node_type

    opts = _storage_options(args)
    try:
        node_type = remote_zarr_node_type(url, opts)
        if node_type == "array":
            results = bench_zarr(url.rstrip("/"), repeat=args.repeat, device=device, storage_options=opts)
            return _report(args, results, f"z[:] of the zarr array {url}")
        if node_type is not None:
            raise ValueError(f"{url!r} is a zarr {node_type}, not an array: give the URL of one of its arrays")
        results = bench_url(url, repeat=args.repeat, device=device, storage_options=opts)
    except OSError as exc:  # the URL itself: not found, refused, forbidden
        message = str(exc) if url in str(exc) else f"{url}: {exc}"
        if isinstance(exc, PermissionError) and url.startswith(("s3://", "s3a://")):
            message += f" ({_S3_OPTIONS_HINT})"
        raise ValueError(f"cannot read the URL: {message}") from None
    return _report(args, results, f"read of {url}")


_S3_OPTIONS_HINT = (
    "gdsstore bench takes them as --storage-option key=ID --storage-option secret=KEY (or profile=NAME, "
    "anon=true) and --endpoint-url URL, or from botocore's environment: AWS_ACCESS_KEY_ID, "
    "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, AWS_ENDPOINT_URL"
)


def _option_value(text: str) -> Any:
    """``true``/``false``, numbers and JSON lists or objects as such; anything else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _storage_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--storage-option KEY=VALUE`` (repeated) and ``--endpoint-url`` as the transport's options."""
    opts: dict[str, Any] = {}
    for item in args.storage_option or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--storage-option {item!r}: expected KEY=VALUE, such as endpoint_url=http://host:9000")
        opts[key.strip()] = _option_value(value)
    if args.endpoint_url:
        opts["endpoint_url"] = args.endpoint_url
    return opts


_BENCH_WHAT = "give a file, a zarr v3 array directory or a URL"


def _check_bench_path(path: str) -> None:
    """Raise ``ValueError`` with one clear line when ``path`` is nothing ``gdsstore bench`` can read."""
    if not os.path.exists(path):
        raise ValueError(f"{path!r}: no such file or directory ({_BENCH_WHAT})")
    if not os.path.isdir(path):
        if not os.access(path, os.R_OK):
            raise ValueError(f"{path!r}: permission denied (the file must be readable)")
        return
    node_type = _zarr_node_type(path)
    if node_type is None:
        raise ValueError(f"{path!r} is a directory without zarr.json: {_BENCH_WHAT}")
    if node_type != "array":
        arrays = _zarr_arrays_under(path)
        which = (
            f": give one of its arrays, e.g. {', '.join(arrays[:3])}" if arrays else " with no arrays in it"
        )
        raise ValueError(f"{path!r} is a zarr {node_type}, not an array{which}")


def _zarr_node_type(path: str) -> str | None:
    """``node_type`` of the zarr v3 node at ``path`` (``"array"``, ``"group"``); ``None`` if there is none."""
    try:
        with open(os.path.join(path, "zarr.json")) as fh:
            meta = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{os.path.join(path, 'zarr.json')!r} cannot be read as JSON: {exc}") from None
    return str(meta.get("node_type", "unknown node")) if isinstance(meta, dict) else "unknown node"


def _zarr_arrays_under(group: str) -> list[str]:
    """Paths of the arrays directly under a zarr v3 group directory, sorted."""
    arrays = []
    for name in sorted(os.listdir(group)):
        child = os.path.join(group, name)
        if os.path.isdir(child):
            try:
                if _zarr_node_type(child) == "array":
                    arrays.append(child)
            except ValueError:
                continue
    return arrays


def _report(args: argparse.Namespace, results: Any, title: str) -> int:
    from gdsstore.bench import format_table

    if args.json:
        print(json.dumps([r.as_dict() for r in results], indent=2))
    else:
        print(format_table(results, title))
    return 0


def _positive_int(text: str) -> int:
    """argparse ``type=`` for counts and sizes: an integer >= 1 (argparse reports the error and exits 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``gdsstore`` command.

    Args:
        argv: the arguments after the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 on success; 1 when ``doctor`` finds a problem or ``demo`` reads back other
        bytes; 2 for a usage error (a bad argument, a path or URL that cannot be read, an invalid
        setting), reported in one line on stderr without a traceback.
    """
    from gdsstore._version import __version__

    p = argparse.ArgumentParser(prog="gdsstore", description="gdsstore: storage <-> GPU I/O with provenance")
    p.add_argument("--version", action="version", version=f"gdsstore {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("doctor", help="versions, cuFile/nvidia-fs/udev, resolved routes, traced probe read")
    d.add_argument("--json", action="store_true", help="machine-readable output")
    d.add_argument("--no-probe", action="store_true", help="skip the probe read")
    d.set_defaults(fn=_doctor)
    m = sub.add_parser(
        "demo", help="write a small zarr array, read it back through gdsstore, print the trace"
    )
    m.add_argument("--path", help="where to write the array (default: a temp dir)")
    m.add_argument("--n", type=_positive_int, default=1024, help="array is n x n float32 (default 1024)")
    m.add_argument("--host", action="store_true", help="host buffers even when a GPU is present")
    m.set_defaults(fn=_demo)
    b = sub.add_parser(
        "bench",
        help="throughput of each route reading a file, a zarr array or a URL, next to the usual anchors",
    )
    b.add_argument(
        "path",
        nargs="?",
        help="file, zarr v3 array directory, or s3:// / http(s):// / webhdfs:// URL "
        "(default: a temporary file of --size bytes)",
    )
    b.add_argument(
        "--size", type=_positive_int, default=256 << 20, help="size of the temporary file (default 256 MiB)"
    )
    b.add_argument(
        "--repeat", type=_positive_int, default=3, help="runs per measurement; the best is reported"
    )
    b.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        help="also measure gdsstore and kvikio at this thread count",
    )
    b.add_argument("--cold", action="store_true", help="drop the file's page cache before each run")
    b.add_argument("--host", action="store_true", help="read into host memory even when a GPU is present")
    b.add_argument("--json", action="store_true", help="print the results as JSON")
    b.add_argument(
        "-o", "--storage-option", action="append", metavar="KEY=VALUE",
        help="an option of the URL's transport, repeated for more: key=, secret=, profile=, anon=true, "
        "endpoint_url= for S3 (botocore's AWS_* variables work too)",
    )
    b.add_argument("--endpoint-url", help="the S3 endpoint (MinIO, Ceph, moto): storage option endpoint_url")
    b.set_defaults(fn=_bench)
    args = p.parse_args(argv)
    try:
        if args.cmd != "doctor":  # doctor reports bad settings; the others refuse them before any work
            from gdsstore._config import build_settings

            build_settings()
        return int(args.fn(args))
    except ValueError as exc:  # invalid settings and arguments: one clear line, no traceback
        print(f"gdsstore {args.cmd}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gdsstore {args.cmd}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
