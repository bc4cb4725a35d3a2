"""The ``gds`` file and bytes reads (gdsstore/adapters/fsspec/file.py): bytes filled in place by the
engine through public APIs, and writes published whole through the engine's AtomicWriter."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import fsspec
import numpy as np
import pytest

import gdsstore
from gdsstore.adapters.fsspec.file import BytesBuilder, read_bytes, resolve_range
from gdsstore.engine.localfs import TMP_SUFFIX

DATA = bytes(range(256)) * 64


def test_bytes_builder_hands_its_storage_over(tmp_path: Path) -> None:
    p = tmp_path / "x.bin"
    p.write_bytes(DATA)
    with gdsstore.open(str(p)) as f:
        b = BytesBuilder(len(DATA))
        assert f.read(b.view, len(DATA), 0) == len(DATA)
    out = b.to_bytes()
    assert type(out) is bytes and out == DATA and hash(out) == hash(DATA)
    # No copy: the BytesIO hands out the very object again (a copy would be a new object each time).
    assert b._io.getvalue() is out
    assert b.to_bytes() is out and b.to_bytes(3, 7) == DATA[3:7]


def test_bytes_builder_slices_before_handover_and_empty() -> None:
    b = BytesBuilder(10)
    b.view[:] = bytes(range(10))
    assert b.to_bytes(2, 5) == bytes([2, 3, 4])  # a copy; the view stays usable
    assert b.to_bytes() == bytes(range(10))
    assert BytesBuilder(0).to_bytes() == b""
    # A view still held elsewhere costs a copy, never wrong bytes.
    b = BytesBuilder(4)
    held = np.frombuffer(b.view, dtype="u1")
    held[:] = 9
    assert b.to_bytes() == b"\t" * 4
    del held


def test_read_bytes_and_resolve(tmp_path: Path) -> None:
    p = tmp_path / "x.bin"
    p.write_bytes(DATA)
    with gdsstore.open(str(p)) as f:
        assert read_bytes(f, 100, 50, "t") == DATA[100:150]
        assert read_bytes(f, 0, 0, "t") == b""
        with pytest.raises(OSError, match=r"t: short read: 10 of 20 bytes"):
            read_bytes(f, len(DATA) - 10, 20, "t")
    assert resolve_range(None, None, 10) == (0, 10)
    assert resolve_range(-100, 5, 10) == (0, 5)
    assert resolve_range(20, 30, 10) == (10, 0)


def test_write_publishes_through_atomic_writer(tmp_path: Path) -> None:
    fs = fsspec.filesystem("gds")
    p = str(tmp_path / "d" / "w.bin")
    with fs.open(p, "wb", block_size=1000) as f:
        f.write(DATA[:5000])
        f.flush()
        # Streaming into a temporary file beside the target: nothing at the target yet.
        names = os.listdir(tmp_path / "d")
        assert len(names) == 1 and names[0].endswith(TMP_SUFFIX) and not os.path.exists(p)
    assert Path(p).read_bytes() == DATA[:5000]
    assert os.listdir(tmp_path / "d") == ["w.bin"]
    with pytest.raises(FileExistsError):
        with fs.open(p, "xb") as f:
            f.write(b"x")
    assert Path(p).read_bytes() == DATA[:5000]


def test_exclusive_write_without_hard_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On filesystems without hard links (FAT, some FUSE/SMB mounts) "xb" stays exclusive."""

    def no_links(src: str, dst: str) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)  # no FAT mount here: the link call fails as it would there
    fs = fsspec.filesystem("gds")
    p = str(tmp_path / "x.bin")
    with fs.open(p, "xb") as f:
        f.write(b"first")
    assert Path(p).read_bytes() == b"first"
    Path(p).unlink()
    from gdsstore.engine.localfs import AtomicWriter

    w1 = AtomicWriter(p, exclusive=True)
    w2 = AtomicWriter(p, exclusive=True)
    assert w1.file is not None and w2.file is not None
    w1.file.write(b"one")
    w2.file.write(b"two")
    w1.commit()
    with pytest.raises(FileExistsError, match="already exists"):
        w2.commit()
    assert Path(p).read_bytes() == b"one"
    assert os.listdir(tmp_path) == ["x.bin"]


def test_copies_publish_through_atomic_writer(tmp_path: Path) -> None:
    """cp_file, put_file and get_file copy in the kernel into a temporary file, published whole."""
    fs = fsspec.filesystem("gds")
    src, dst = tmp_path / "src.bin", tmp_path / "out" / "dst.bin"
    src.write_bytes(DATA)
    dst.parent.mkdir()
    dst.write_bytes(b"old")
    fs.cp_file(str(src), str(dst))
    assert dst.read_bytes() == DATA and os.listdir(dst.parent) == ["dst.bin"]
    with pytest.raises(FileExistsError, match="already exists"):
        fs.put_file(str(src), str(dst), mode="create")
    dst.write_bytes(b"old")
    with pytest.raises(FileNotFoundError):
        fs.put_file(str(tmp_path / "missing.bin"), str(dst))
    assert dst.read_bytes() == b"old" and os.listdir(dst.parent) == ["dst.bin"]  # no temp left
    fs.get_file(str(src), str(tmp_path / "got.bin"))
    assert (tmp_path / "got.bin").read_bytes() == DATA
    with gdsstore.config.set({"fsync": True}):
        fs.put_file(str(src), str(tmp_path / "new" / "p.bin"), mode="create")
    assert (tmp_path / "new" / "p.bin").read_bytes() == DATA


# Failed reads through the fsspec file must leave no buffer export behind: CPython 3.12 crashed
# (SIGSEGV, after "deallocated BytesIO object has exported buffers") when the garbage collector freed a
# failed read's traceback together with a BytesIO view. Run in a child: a crash must fail the test,
# not end the test session.
_FAILING_READS = r"""
import functools, gc, http.server, sys, threading
import fsspec

root, n = sys.argv[1], int(sys.argv[2])
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
handler.log_message = lambda *a: None
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)  # answers 200 to every Range
threading.Thread(target=srv.serve_forever, daemon=True).start()
url = f"gds::http://127.0.0.1:{srv.server_address[1]}/table.parquet"
fs, path = fsspec.core.url_to_fs(url)
failed = 0
for i in range(n):
    f = fs.open(path)
    f.seek(4)
    try:
        f.read(100 if i % 2 else 5 << 20)  # a cached block, then a read straight from the engine
    except Exception as exc:
        failed += type(exc).__name__ == "RangeNotSupportedError"
    try:
        fs.cat_file(path, start=10, end=1000)
    except Exception as exc:
        failed += type(exc).__name__ == "RangeNotSupportedError"
    gc.collect()
print("failed", failed)
"""


def test_failed_ranged_reads_leave_no_export_behind(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "table.parquet").write_bytes(os.urandom(6 << 20))
    proc = subprocess.run(
        [sys.executable, "-c", _FAILING_READS, str(tmp_path), "20"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, f"rc {proc.returncode}: {proc.stderr[-2000:]}"
    assert "exported buffers" not in proc.stderr
    assert proc.stdout.split() == ["failed", "40"]  # each read failed with the clear error


def test_failed_remote_write_leaves_no_export_behind(tmp_path: Path) -> None:
    """A put that fails on close (nothing listens there) must not crash the collector later."""
    import subprocess
    import sys

    script = r"""
import gc, socket, fsspec
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
import gdsstore
gdsstore.config.set({"remote.max_attempts": 1})
errors = 0
for i in range(10):
    f = fsspec.open(f"gds::http://127.0.0.1:{port}/x.bin", "wb").open()
    f.write(b"x" * 100000)
    try:
        f.close()
    except Exception:
        errors += 1
    gc.collect()
print("errors", errors)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"rc {proc.returncode}: {proc.stderr[-2000:]}"
    assert "exported buffers" not in proc.stderr
    assert proc.stdout.split() == ["errors", "10"]
