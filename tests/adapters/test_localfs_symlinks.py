"""Symbolic links under a local root (issue 16): reads follow them as zarr's LocalStore does; writes
and deletes never go through a link that leads outside the root; ``follow_symlinks=False`` refuses
every key that passes through a link."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
from zarr.core.buffer import cpu, default_buffer_prototype
from zarr.core.sync import _collect_aiterator

from gdsstore import GDSStore
from gdsstore.engine.localfs import LocalBackend

PROTO = default_buffer_prototype()


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """``root/`` with ``linkdir -> outside/``, ``filelink -> outside/secret.bin``, ``inlink -> root/real``."""
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "keep.bin").write_bytes(b"keep")
    (outside / "secret.bin").write_bytes(b"secret")
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "real" / "r.bin").write_bytes(b"real")
    (root / "plain.bin").write_bytes(b"plain")
    os.symlink(outside, root / "linkdir")
    os.symlink(outside / "secret.bin", root / "filelink")
    os.symlink(root / "real", root / "inlink")
    return root, outside


def _outside_files(outside: Path) -> dict[str, bytes]:
    return {str(p.relative_to(outside)): p.read_bytes() for p in sorted(outside.rglob("*")) if p.is_file()}


async def test_reads_follow_links_like_localstore(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    store = GDSStore(str(root))
    assert (await store.get("linkdir/sub/keep.bin", PROTO)).to_bytes() == b"keep"  # type: ignore[union-attr]
    assert (await store.get("filelink", PROTO)).to_bytes() == b"secret"  # type: ignore[union-attr]
    assert await store.exists("inlink/r.bin") and await store.getsize("filelink") == 6
    # Links to files are keys; links to directories are not walked (a link to an ancestor would loop).
    assert sorted(await _collect_aiterator(store.list())) == ["filelink", "plain.bin", "real/r.bin"]


async def test_writes_and_deletes_never_leave_the_root(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    before = _outside_files(outside)
    store = GDSStore(str(root))
    value = cpu.Buffer.from_bytes(b"EVIL")
    for call in (
        lambda: store.delete("linkdir/sub"),  # the case: it removed a tree outside the root
        lambda: store.delete("linkdir/secret.bin"),
        lambda: store.delete_dir("linkdir/sub"),
        lambda: store.set("linkdir/new.bin", value),
        lambda: store.set("linkdir/sub/keep.bin", value),
        lambda: store.set_if_not_exists("linkdir/x/y.bin", value),
    ):
        with pytest.raises(PermissionError, match="outside the root"):
            await call()
    assert _outside_files(outside) == before and sorted(os.listdir(outside)) == ["secret.bin", "sub"]
    # A link at the key's own name is replaced or removed itself, never what it points to.
    await store.set("filelink", cpu.Buffer.from_bytes(b"mine"))
    assert not (root / "filelink").is_symlink() and (root / "filelink").read_bytes() == b"mine"
    await store.delete_dir("linkdir")
    assert not os.path.lexists(root / "linkdir")
    assert _outside_files(outside) == before


async def test_links_inside_the_root_are_written_through(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    store = GDSStore(str(root))
    await store.set("inlink/w.bin", cpu.Buffer.from_bytes(b"w"))
    assert (root / "real" / "w.bin").read_bytes() == b"w"
    await store.delete("inlink/r.bin")
    assert not (root / "real" / "r.bin").exists()


async def test_clear_removes_links_not_their_targets(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    before = _outside_files(outside)
    await GDSStore(str(root)).clear()
    assert os.listdir(root) == [] and _outside_files(outside) == before


async def test_follow_symlinks_false_refuses_every_link(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    before = _outside_files(outside)
    store = GDSStore(str(root), storage_options={"follow_symlinks": False})
    assert store.backend == LocalBackend(root, follow_symlinks=False) != LocalBackend(root)
    value = cpu.Buffer.from_bytes(b"EVIL")
    for call in (
        lambda: store.get("linkdir/sub/keep.bin", PROTO),
        lambda: store.get("filelink", PROTO),
        lambda: store.get("inlink/r.bin", PROTO),
        lambda: store.exists("filelink"),
        lambda: store.set("inlink/w.bin", value),
        lambda: store.set("filelink", value),
        lambda: store.delete("linkdir"),
    ):
        with pytest.raises(PermissionError, match="follow_symlinks=False"):
            await call()
    assert sorted(await _collect_aiterator(store.list())) == ["plain.bin", "real/r.bin"]
    assert sorted(await _collect_aiterator(store.list_dir(""))) == ["plain.bin", "real"]
    assert (await store.get("real/r.bin", PROTO)).to_bytes() == b"real"  # type: ignore[union-attr]
    assert _outside_files(outside) == before and (root / "filelink").is_symlink()
    # The option survives pickling (dask workers refuse links too).
    assert pickle.loads(pickle.dumps(store)).backend.follow_symlinks is False


def test_option_is_checked(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="follow_symlinks must be True or False, got 'no'"):
        LocalBackend(tmp_path, follow_symlinks="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"only the storage options \['follow_symlinks'\], got \['anon'\]"):
        GDSStore(str(tmp_path), storage_options={"anon": True})
