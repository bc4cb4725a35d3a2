"""Local engine, host buffers: equal to a reference for random ranges; bad input loses nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gdsstore

SIZE = 3 * (64 << 10) + 12345  # > task_size * threads with the small settings below


@pytest.fixture(scope="module")
def ref_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    p = tmp_path_factory.mktemp("local") / "ref.bin"
    data = np.random.default_rng(1).integers(0, 256, SIZE, dtype=np.uint8).tobytes()
    p.write_bytes(data)
    return p, data


SMALL = {"task_size": 4096 + 17, "num_threads": 3}  # unaligned pieces, many of them


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    offset=st.integers(0, SIZE + 5000),
    size=st.integers(0, SIZE + 5000),
    kind=st.sampled_from(["numpy", "bytearray", "memoryview"]),
    small=st.booleans(),
)
def test_read_matches_reference(ref_file: tuple[Path, bytes], offset: int, size: int, kind: str, small: bool) -> None:
    path, data = ref_file
    buf: object
    arr = np.full(size, 0xAB, dtype=np.uint8)
    buf = {"numpy": arr, "bytearray": bytearray(arr.tobytes()), "memoryview": memoryview(bytearray(arr.tobytes()))}[kind]
    with gdsstore.config.set(SMALL if small else {}), gdsstore.open(path) as f:
        n = f.read(buf, size, offset)
    expected = data[offset : offset + size]
    assert n == len(expected)  # past EOF clamps
    got = bytes(memoryview(buf).cast("B")[:n])  # type: ignore[arg-type]
    assert got == expected
    assert bytes(memoryview(buf).cast("B")[n:]) == b"\xab" * (size - n)  # type: ignore[arg-type]  # no over-read


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    writes=st.lists(st.tuples(st.integers(0, 300_000), st.binary(min_size=0, max_size=70_000)), min_size=1, max_size=5),
    small=st.booleans(),
)
def test_writes_match_reference(tmp_path: Path, writes: list[tuple[int, bytes]], small: bool) -> None:
    path = tmp_path / "w.bin"
    path.unlink(missing_ok=True)
    ref = bytearray()
    with gdsstore.config.set(SMALL if small else {}), gdsstore.open(path, "wb") as f:
        for off, payload in writes:
            assert f.write(np.frombuffer(payload, dtype=np.uint8), offset=off) == len(payload)
            if payload:
                if len(ref) < off + len(payload):
                    ref.extend(b"\0" * (off + len(payload) - len(ref)))
                ref[off : off + len(payload)] = payload
    assert path.read_bytes() == bytes(ref)


def test_pread_pwrite_futures_and_size(tmp_path: Path) -> None:
    p = tmp_path / "f.bin"
    data = np.arange(1 << 20, dtype=np.uint8)
    with gdsstore.config.set({"task_size": 1 << 16}), gdsstore.open(p, "wb") as f:
        fut = f.pwrite(data)
        assert fut.result() == data.nbytes
        assert f.size == data.nbytes
    out = np.zeros_like(data)
    with gdsstore.open(f"file://{p}") as f:
        assert f.pread(out, 1000, 10).result() == 1000
    assert (out[:1000] == data[10:1010]).all() and not out[1000:].any()


def test_r_plus_b_keeps_content(tmp_path: Path) -> None:
    p = tmp_path / "f.bin"
    p.write_bytes(b"abcdef")
    with gdsstore.open(p, "r+b") as f:
        f.write(b"XY", offset=2)
    assert p.read_bytes() == b"abXYef"


def test_zero_length(tmp_path: Path) -> None:
    p = tmp_path / "empty.bin"
    p.write_bytes(b"")
    with gdsstore.open(p) as f:
        assert f.size == 0
        assert f.read(bytearray(0)) == 0
        assert f.read(bytearray(10)) == 0


def test_trace_records_reads_and_writes(tmp_path: Path) -> None:
    p = tmp_path / "t.bin"
    with gdsstore.trace() as t:
        with gdsstore.open(p, "wb") as f:
            f.write(bytes(1000))
        with gdsstore.open(p) as f:
            f.read(bytearray(1000))
    assert set(t.totals) == {"posix"}
    assert t.totals["posix"]["ops"] == 2 and t.totals["posix"]["bytes"] == 2000
    assert {e.op for e in t.events} == {"read", "write"}
    # each event timed; one after the other, within the trace's wall clock
    assert all(e.seconds > 0 for e in t.events)
    assert t.totals["posix"]["seconds"] == pytest.approx(sum(e.seconds for e in t.events))
    assert t.totals["posix"]["seconds"] <= t.wall_seconds
    assert all(e.reason == "host buffer" and e.device is None for e in t.events)
    text = str(t)
    assert "posix" in text and "host buffer" in text and "GB/s" in text


def test_no_trace_records_nothing(tmp_path: Path) -> None:
    from gdsstore import trace as tr

    p = tmp_path / "t.bin"
    with gdsstore.open(p, "wb") as f:
        f.write(bytes(10))
    assert not tr.active()


def test_import_does_not_load_gpu_modules() -> None:
    # What gdsstore's import loads: cuda-bindings 12's .pth file imports `cuda` at interpreter start.
    code = ("import sys; before = set(sys.modules); import gdsstore; "
            "bad = sorted(m for m in set(sys.modules) - before if m.split('.')[0] in ('cupy', 'cuda', 'zarr', 'kvikio')); "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- bad input: clear errors naming the argument, nothing written ---------------------------------------


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    p = tmp_path / "victim.bin"
    p.write_bytes(b"0123456789")
    return p


def test_non_contiguous_buffer(victim: Path) -> None:
    arr = np.zeros((4, 4), dtype=np.uint8)[:, ::2]
    with gdsstore.open(victim, "r+b") as f:
        with pytest.raises(ValueError, match="`buf` must be C-contiguous"):
            f.read(arr)
        with pytest.raises(ValueError, match="`buf` must be C-contiguous"):
            f.write(arr)
    assert victim.read_bytes() == b"0123456789"


def test_buffer_too_small(victim: Path) -> None:
    with gdsstore.open(victim, "r+b") as f:
        with pytest.raises(ValueError, match="buffer too small"):
            f.read(bytearray(4), size=8)
        with pytest.raises(ValueError, match="buffer too small"):
            f.write(b"ab", size=3)
    assert victim.read_bytes() == b"0123456789"


def test_read_only_destination(victim: Path) -> None:
    ro = np.zeros(4, dtype=np.uint8)
    ro.flags.writeable = False
    with gdsstore.open(victim) as f:
        with pytest.raises(TypeError, match="read-only"):
            f.read(ro)
        with pytest.raises(TypeError, match="read-only"):
            f.read(b"abcd")


def test_negative_offset_and_size(victim: Path) -> None:
    with gdsstore.open(victim, "r+b") as f:
        with pytest.raises(ValueError, match="`offset` must be >= 0"):
            f.read(bytearray(2), offset=-1)
        with pytest.raises(ValueError, match="`offset` must be >= 0"):
            f.write(b"zz", offset=-3)
        with pytest.raises(ValueError, match="`size` must be >= 0"):
            f.read(bytearray(2), size=-1)
        with pytest.raises(TypeError, match="`offset` must be an int"):
            f.read(bytearray(2), offset=1.5)  # type: ignore[arg-type]
    assert victim.read_bytes() == b"0123456789"


def test_not_a_buffer(victim: Path) -> None:
    with gdsstore.open(victim) as f, pytest.raises(TypeError, match="`buf` must be a host buffer"):
        f.read([1, 2, 3])


def test_directory_and_missing(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match="is a directory"):
        gdsstore.open(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        gdsstore.open(tmp_path / "missing.bin")
    with pytest.raises(FileNotFoundError):
        gdsstore.open(tmp_path / "missing.bin", "r+b")
    assert not (tmp_path / "missing.bin").exists()


def test_write_through_read_only_file(victim: Path) -> None:
    with gdsstore.open(victim) as f, pytest.raises(PermissionError, match="read-only"):
        f.write(b"xx")
    assert victim.read_bytes() == b"0123456789"


def test_closed_file(victim: Path) -> None:
    f = gdsstore.open(victim)
    f.close()
    with pytest.raises(ValueError, match="closed file"):
        f.read(bytearray(2))


def test_bad_mode_and_scheme(victim: Path) -> None:
    with pytest.raises(ValueError, match="unsupported mode 'rt'"):
        gdsstore.open(victim, "rt")
    with pytest.raises(ValueError, match="unsupported URL scheme 'ftp'"):
        gdsstore.open("ftp://host/x")
    with pytest.raises(TypeError, match="no storage options"):
        gdsstore.open(victim, foo=1)


def test_invalid_settings_write_nothing(victim: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A bad value given to config.set is refused there; one from the environment is found at first use.
    for key, bad in (("task_size", 0), ("compat_mode", "maybe")):
        with pytest.raises(ValueError, match=key):
            gdsstore.config.set({key: bad})
    monkeypatch.setenv("GDSSTORE_TASK_SIZE", "0")
    gdsstore.config.refresh()
    try:
        with gdsstore.open(victim, "r+b") as f, pytest.raises(ValueError, match="GDSSTORE_TASK_SIZE"):
            f.write(b"zz")
    finally:
        monkeypatch.delenv("GDSSTORE_TASK_SIZE")
        gdsstore.config.refresh()
    assert victim.read_bytes() == b"0123456789"


def test_xb_is_exclusive(tmp_path: Path) -> None:
    p = tmp_path / "x.bin"
    with gdsstore.open(p, "xb") as f:
        f.write(b"1")
    with pytest.raises(FileExistsError):
        gdsstore.open(p, "xb")
    assert p.read_bytes() == b"1"


def test_large_file_many_pieces(tmp_path: Path) -> None:
    p = tmp_path / "big.bin"
    data = np.random.default_rng(2).integers(0, 256, 24 << 20, dtype=np.uint8)
    with gdsstore.config.set({"task_size": 1 << 20, "num_threads": 4}):
        with gdsstore.open(p, "wb") as f:
            f.write(data)
        out = np.empty_like(data)
        with gdsstore.open(p) as f:
            assert f.read(out) == data.nbytes
    assert np.array_equal(out, data)
    assert os.path.getsize(p) == data.nbytes
