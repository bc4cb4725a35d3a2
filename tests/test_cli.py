"""The ``gdsstore`` command (``gdsstore/cli.py``) on a machine without a GPU.

doctor says what it found and exits non-zero when the installation is broken; bench and demo print
their tables; every usage error is one line on stderr with exit status 2, never a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gdsstore.cli import doctor_problems, main
from gdsstore.engine import cuda, cufile


def _cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gdsstore.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def _one_line_error(out: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit status 2 and one clear line on stderr (no traceback) that contains every needle."""
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# -- doctor ------------------------------------------------------------------------------------------


def test_doctor_reports() -> None:
    out = _cli("doctor", timeout=60)  # never opens the cuFile driver, which hangs without a GPU
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    text = out.stdout
    assert "gdsstore doctor" in text
    assert "compat_mode: auto" in text
    assert "host buffer" in text and "-> posix" in text
    assert "probe read (4 MiB, write then read back): ok" in text
    if cuda.device_count() == 0:
        assert "GPU: none" in text
        assert "no CUDA device" in text


def test_doctor_json() -> None:
    out = _cli("doctor", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["routes"]["host buffer"] == {"route": "posix", "reason": "host buffer"}
    assert report["probe"]["host_ok"] is True
    assert report["probe"]["totals"]["posix"]["ops"] == 2
    assert "settings" in report and report["settings"]["compat_mode"] == "auto"
    assert report["hints"] == []  # no cuFile driver on this machine: nothing to advise
    assert doctor_problems(report) == []


def test_doctor_exits_1_on_invalid_settings() -> None:
    """The report still prints (it is how the user finds the bad value), and the status says it failed."""
    for extra in ([], ["--json"]):
        out = _cli("doctor", *extra, env={"GDSSTORE_COMPAT_MODE": "maybe"})
        assert out.returncode == 1, out.stdout
        assert "maybe" in out.stdout
        assert "problem: settings are invalid" in out.stderr and "compat_mode" in out.stderr
        assert "Traceback" not in out.stderr
    assert "settings: INVALID" in _cli("doctor", env={"GDSSTORE_COMPAT_MODE": "maybe"}).stdout


def test_doctor_exits_1_when_cufile_json_is_not_json(tmp_path: Path) -> None:
    bad = tmp_path / "cufile.json"
    bad.write_text('{"properties": {"allow_compat_mode": true,')
    out = _cli("doctor", "--no-probe", env={"CUFILE_ENV_PATH_JSON": str(bad)})
    assert out.returncode == 1
    assert f"problem: {bad} is not valid JSON" in out.stderr


def test_doctor_exits_1_when_compat_mode_off_cannot_be_met() -> None:
    if cufile.driver_probe().ok:
        pytest.skip("cuFile is usable here: compat_mode=off is satisfied")
    out = _cli("doctor", "--no-probe", env={"GDSSTORE_COMPAT_MODE": "off"})
    assert out.returncode == 1
    assert "problem: device buffer reads will fail: compat_mode='off' requires cuFile" in out.stderr


def test_doctor_problems_from_the_probe() -> None:
    ok = {"routes": {"host buffer": {"route": "posix", "reason": "host buffer"}}, "probe": {"host_ok": True}}
    assert doctor_problems(ok) == []
    assert doctor_problems({**ok, "probe": {"host_ok": True, "device_ok": False}}) == [
        "the probe read returned other bytes than it wrote"
    ]
    assert doctor_problems({**ok, "probe": {"error": "OSError: disk full"}}) == [
        "the probe read failed: OSError: disk full"
    ]
    assert doctor_problems({"gpu": {"devices": 1, "error": "cudaErrorInsufficientDriver"}}) == [
        "CuPy sees a GPU but cannot query it: cudaErrorInsufficientDriver"
    ]


# -- bench -------------------------------------------------------------------------------------------


def test_bench_table(tmp_path: Path) -> None:
    p = tmp_path / "b.bin"
    p.write_bytes(os.urandom(8 << 20))
    out = _cli("bench", str(p), "--repeat", "1", "--threads", "2")
    assert out.returncode == 0, out.stderr
    assert "gdsstore (defaults)" in out.stdout and "numpy.fromfile" in out.stdout
    assert "gdsstore (2 threads)" in out.stdout
    out = _cli("bench", f"file://{p}", "--repeat", "1", "--json", "--cold")
    rows = json.loads(out.stdout)
    assert {r["name"] for r in rows} >= {"gdsstore (defaults)"}
    assert all(r["gbps"] > 0 for r in rows)


def test_bench_rejects_bad_setting(tmp_path: Path) -> None:
    """Issue 26: a bad setting gave a "failed" row and exit 0 for a file or an array; now one line, exit 2."""
    import zarr

    p = tmp_path / "b.bin"
    p.write_bytes(b"x" * 100)
    zarr.create_array(str(tmp_path / "a.zarr"), shape=(8,), dtype="f4")
    for target in (str(p), str(tmp_path / "a.zarr")):
        for var, value in (("GDSSTORE_TASK_SIZE", "0"), ("GDSSTORE_NUM_THREADS", "0")):
            out = _cli("bench", target, "--repeat", "1", env={var: value})
            _one_line_error(out, "gdsstore bench: error:", var)
            assert out.stdout == ""  # refused before any route ran
    _one_line_error(_cli("demo", "--n", "8", env={"GDSSTORE_NUM_THREADS": "0"}), "gdsstore demo: error:")


def test_version() -> None:
    from gdsstore import __version__

    out = _cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"gdsstore {__version__}", out


def test_bench_missing_file_is_one_line() -> None:
    _one_line_error(
        _cli("bench", "/nonexistent.bin"), "gdsstore bench: error:", "'/nonexistent.bin'", "no such file"
    )


def test_bench_bad_arguments_are_one_line(tmp_path: Path) -> None:
    _one_line_error(_cli("bench", str(tmp_path), "--repeat", "1"), "without zarr.json")
    out = _cli("bench", "--repeat", "0", str(tmp_path))
    assert out.returncode == 2 and "argument --repeat: must be at least 1, got 0" in out.stderr
    _one_line_error(_cli("demo", "--n", "2"), "gdsstore demo: error: --n must be at least 4")


def test_bench_zarr_group_names_its_arrays(tmp_path: Path) -> None:
    import zarr

    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    group.create_array("temperature", shape=(8,), dtype="f4")
    group.create_group("sub")
    line = _one_line_error(_cli("bench", str(tmp_path / "g.zarr")), "is a zarr group, not an array")
    assert line.endswith(f"give one of its arrays, e.g. {tmp_path / 'g.zarr' / 'temperature'}")
    assert "node_type" not in line
    (tmp_path / "j.zarr").mkdir()
    (tmp_path / "j.zarr" / "zarr.json").write_text("{not json")
    _one_line_error(_cli("bench", str(tmp_path / "j.zarr")), "zarr.json", "cannot be read as JSON")


def test_bench_zarr_array(tmp_path: Path) -> None:
    import numpy as np
    import zarr

    root = tmp_path / "a.zarr"
    zarr.create_array(str(root), shape=(256, 256), chunks=(64, 64), dtype="f4")[:] = np.ones((256, 256), "f4")
    out = _cli("bench", str(root), "--repeat", "1", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert set(rows) == {"gdsstore GDSStore + pipeline, host buffers", "zarr LocalStore"}
    assert all(r["nbytes"] == 256 * 256 * 4 and r["gbps"] > 0 for r in rows.values()), rows


def test_bench_url(tmp_path: Path) -> None:
    from servers.faults import FaultServer

    srv = FaultServer()
    try:
        srv.objects["o.bin"] = os.urandom(3 << 20)
        out = _cli("bench", srv.url("o.bin"), "--repeat", "1", "--json")
        missing = _cli("bench", srv.url("missing.bin"))
    finally:
        srv.close()
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["gdsstore (defaults)"]["nbytes"] == 3 << 20 and rows["gdsstore (defaults)"]["gbps"] > 0
    assert "fsspec" in rows
    _one_line_error(missing, "gdsstore bench: error: cannot read the URL:", "missing.bin", "404")


def test_bench_remote_zarr_array_as_a_local_one(tmp_path: Path) -> None:
    """Issue 26: `bench http://HOST/array.zarr` on a plain nginx (no directory listing) failed with 403."""
    import numpy as np
    import zarr
    from servers.nginx import NginxServer, nginx_binary

    if nginx_binary() is None:
        pytest.skip("nginx is not installed (scripts/test.sh installs it)")
    zarr.create_array(str(tmp_path / "a.zarr"), shape=(128, 128), chunks=(32, 32), dtype="f4")[:] = np.ones(
        (128, 128), "f4"
    )
    zarr.open_group(str(tmp_path / "g.zarr"), mode="w").create_array("t", shape=(4,), dtype="f4")
    srv = NginxServer(str(tmp_path))
    try:
        out = _cli("bench", srv.url("a.zarr"), "--repeat", "1", "--json")
        group = _cli("bench", srv.url("g.zarr/"))
        missing = _cli("bench", srv.url("nope.zarr"))
    finally:
        srv.close()
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert set(rows) == {"gdsstore GDSStore + pipeline, host buffers", "zarr ObjectStore(obstore HTTPStore)"}
    assert all(r["nbytes"] == 128 * 128 * 4 and r["seconds"] > 0 and not r["note"] for r in rows.values()), rows
    _one_line_error(group, "is a zarr group, not an array")
    _one_line_error(missing, "cannot read the URL:", "nope.zarr", "404")


def test_bench_unreachable_url_is_one_line() -> None:
    from servers.net import closed_port

    url = f"http://127.0.0.1:{closed_port()}/x.bin"  # nothing listens there
    out = _cli("bench", url, env={"GDSSTORE_REMOTE__MAX_ATTEMPTS": "1"})
    _one_line_error(out, "cannot read the URL:", url)


# -- demo --------------------------------------------------------------------------------------------


def test_demo_runs_and_prints_the_trace(tmp_path: Path) -> None:
    out = _cli("demo", "--n", "128", "--path", str(tmp_path / "demo.zarr"))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "equal to the source: True" in text
    assert "route" in text and "reason" in text  # the trace table
    assert (tmp_path / "demo.zarr" / "zarr.json").exists()  # --path: the array stays where asked
    if cuda.device_count() == 0:
        assert "host (numpy)" in text and "posix" in text


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_demo_never_deletes_what_it_did_not_create(tmp_path: Path) -> None:
    """`gdsstore demo --path .` in a directory of the user's deleted its files (exit 0)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "src" / "code.py").write_text("print(1)")
    before = _tree(tmp_path)
    _one_line_error(_cli("demo", "--path", str(tmp_path), "--n", "8"), "is not empty", "never deletes")
    assert _tree(tmp_path) == before
    # A user's own array, and the demo's array with a user's file put inside it: both left as they were.
    import zarr

    zarr.create_array(str(tmp_path / "precious.zarr"), shape=(4,), dtype="i4")[:] = 7
    before = _tree(tmp_path)
    _one_line_error(_cli("demo", "--path", str(tmp_path / "precious.zarr"), "--n", "8"), "is not empty")
    assert _tree(tmp_path) == before
    demo = tmp_path / "demo.zarr"
    assert _cli("demo", "--path", str(demo), "--n", "8").returncode == 0
    assert _cli("demo", "--path", str(demo), "--n", "8").returncode == 0  # its own array: replaced
    (demo / "NOTES.txt").write_text("mine too")
    before = _tree(tmp_path)
    _one_line_error(_cli("demo", "--path", str(demo), "--n", "8"), "not an array this demo wrote")
    assert _tree(tmp_path) == before


def test_demo_bad_paths_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "existing-file").write_text("x")
    _one_line_error(_cli("demo", "--path", str(tmp_path / "existing-file")), "is not a directory")
    assert (tmp_path / "existing-file").read_text() == "x"
    _one_line_error(_cli("demo", "--path", str(tmp_path / "no" / "such")), "does not exist")
    _one_line_error(_cli("demo", "--path", "/proc/nope", "--n", "8"), "/proc/nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _cli("demo", "--path", str(empty), "--n", "8").returncode == 0  # an empty directory is fine


def test_demo_leaves_nothing_in_the_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["demo", "--n", "64"]) == 0
    assert "equal to the source: True" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_doctor_fails_on_an_unusable_setting_naming_its_variable() -> None:
    """Issue 18: doctor printed `settings: INVALID` and exited 0."""
    out = _cli("doctor", "--no-probe", env={"GDSSTORE_REMOTE__TIMEOUT": "inf"}, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "settings: INVALID" in out.stdout and "GDSSTORE_REMOTE__TIMEOUT" in out.stdout and "'inf'" in out.stdout


def test_doctor_reports_a_misspelled_variable() -> None:
    """Issue 26: a misspelled GDSSTORE_* variable was ignored with a warning, and doctor exited 0."""
    out = _cli("doctor", "--no-probe", env={"GDSSTORE_NUM_THREAD": "4"}, timeout=60)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "settings: unknown environment variable 'GDSSTORE_NUM_THREAD'" in out.stdout
    problems = [ln for ln in out.stderr.splitlines() if ln.startswith("gdsstore doctor: problem:")]
    assert len(problems) == 1 and "did you mean GDSSTORE_NUM_THREADS?" in problems[0], out.stderr
    assert doctor_problems({"unknown_settings": ["unknown config key 'num_thread' ignored"]}) == [
        "unknown config key 'num_thread' ignored (unset or rename it: docs/settings.md lists every variable)"
    ]
