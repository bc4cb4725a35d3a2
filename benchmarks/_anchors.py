"""Readers for the benchmark table: gdsstore and the anchors it is compared with.

Each reader is ``read(path) -> array`` (cupy on a GPU machine, numpy in host mode). A reader whose
library is missing raises :class:`Missing` with the reason, and the table shows a note instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

Reader = Callable[[str], Any]


class Missing(RuntimeError):
    """An anchor cannot run here (library not installed, no GPU...)."""


def _cupy() -> Any:
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        raise Missing(f"no GPU/cupy ({type(exc).__name__})") from None
    return cupy


def sync(device: bool) -> None:
    if device:
        _cupy().cuda.runtime.deviceSynchronize()


# -- raw file -> memory --------------------------------------------------------------------------------


def raw_gdsstore(device: bool) -> Reader:
    import gdsstore

    def read(path: str) -> Any:
        n = os.path.getsize(path)
        buf = _cupy().empty(n, dtype="u1") if device else np.empty(n, dtype="u1")
        with gdsstore.open(path) as f:
            got = f.read(buf)
        assert got == n, (got, n)
        return buf

    return read


def raw_kvikio(device: bool, threads: int | None = 16) -> Reader:
    if not device:
        raise Missing("kvikio anchor needs a GPU (host mode)")
    try:
        import kvikio
        import kvikio.defaults
    except Exception as exc:
        raise Missing(f"kvikio not installed ({type(exc).__name__})") from None
    cp = _cupy()

    def read(path: str) -> Any:
        n = os.path.getsize(path)
        buf = cp.empty(n, dtype="u1")
        ctx = kvikio.defaults.set({"num_threads": threads}) if threads else _null()
        with ctx, kvikio.CuFile(path, "r") as f:
            got = f.read(buf)
        assert got == n, (got, n)
        return buf

    return read


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# -- zarr arrays -> memory -----------------------------------------------------------------------------


def zarr_gdsstore(device: bool) -> Reader:
    import zarr

    import gdsstore

    def read(path: str) -> Any:
        with gdsstore.enable_gpu(buffers=device):
            return zarr.open_array(gdsstore.GDSStore(path), mode="r")[:]

    return read


def zarr_localstore(device: bool) -> Reader:
    import zarr
    from zarr.storage import LocalStore

    def read(path: str) -> Any:
        if device:
            with zarr.config.enable_gpu():
                return zarr.open_array(LocalStore(path), mode="r")[:]
        return zarr.open_array(LocalStore(path), mode="r")[:]

    return read


def zarr_kvikio(device: bool) -> Reader:
    if not device:
        raise Missing("kvikio anchor needs a GPU (host mode)")
    try:
        from kvikio.zarr import GDSStore as KvikioStore
    except Exception as exc:
        raise Missing(f"kvikio.zarr not available ({type(exc).__name__}: {exc})") from None
    import zarr

    def read(path: str) -> Any:
        with zarr.config.enable_gpu():
            return zarr.open_array(KvikioStore(path), mode="r")[:]

    return read


def zarr_tensorstore(device: bool) -> Reader:
    try:
        import tensorstore as ts
    except Exception as exc:
        raise Missing(f"tensorstore not installed ({type(exc).__name__})") from None
    cp = _cupy() if device else None

    def read(path: str) -> Any:
        arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}, open=True).result()
        host = arr.read().result()
        return cp.asarray(host) if cp is not None else host

    return read


def zarr_zarrs(device: bool) -> Reader:
    """zarr with zarrs' Rust codec pipeline (decodes on the host), then ``cupy.asarray`` on a GPU."""
    try:
        import zarrs  # noqa: F401
    except Exception as exc:
        raise Missing(f"zarrs not installed ({type(exc).__name__})") from None
    import zarr
    from zarr.storage import LocalStore

    cp = _cupy() if device else None

    def read(path: str) -> Any:
        with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"}):
            host = zarr.open_array(LocalStore(path), mode="r")[:]
        return cp.asarray(host) if cp is not None else host

    return read


def _czarr() -> Any:
    try:
        import czarr
    except Exception as exc:  # czarr imports cupy, rmm and nvCOMP at import: any of them may be missing
        raise Missing(f"czarr not importable ({type(exc).__name__}: {str(exc)[:200]})") from None
    return czarr


def zarr_czarr(device: bool) -> Reader:
    """czarr's zarr route: ``czarr.configure_gpu()`` (its codec pipeline, GPU buffers), then zarr."""
    if not device:
        raise Missing("czarr needs a GPU (host mode)")
    czarr = _czarr()
    import zarr

    def read(path: str) -> Any:
        # The context form restores zarr's config on exit: nothing of czarr outlives the read.
        with czarr.configure_gpu():
            return zarr.open_array(path, mode="r")[:]

    return read


def zarr_czarr_core(device: bool) -> Reader:
    """czarr's own API: ``czarr.core.Array.open(path)[...]`` (cuFile reads, one nvCOMP batch)."""
    if not device:
        raise Missing("czarr needs a GPU (host mode)")
    _czarr()
    from czarr.core import Array

    def read(path: str) -> Any:
        return Array.open(path)[...]

    return read
