"""The write side of :class:`~gdsstore.adapters.zarr_store.GDSStore`, the reverse of
:mod:`~gdsstore.adapters.zarr_reads`: a zarr Buffer's own memory, host or device, handed to the engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zarr.core.buffer import Buffer

from gdsstore.engine.backend import Backend, BatchResult


def engine_array(value: Buffer) -> Any:
    """The memory behind a zarr Buffer, as the engine takes it (device array or host buffer)."""
    arr = value.as_array_like()
    if hasattr(arr, "__cuda_array_interface__"):
        return arr
    try:
        memoryview(arr)  # type: ignore[arg-type]
    except TypeError:
        return value.as_numpy_array()
    return arr


def put_key(backend: Backend, key: str, value: Buffer, exclusive: bool) -> None:
    """Publish one key (atomic); ``exclusive``: an existing key is kept, silently (zarr's
    ``set_if_not_exists``)."""
    try:
        backend.put(key, engine_array(value), exclusive=exclusive)
    except FileExistsError:
        if not exclusive:
            raise


def put_batch(backend: Backend, items: Sequence[tuple[str, Buffer, bool]]) -> BatchResult:
    """The sets of one event-loop tick, published in parallel (each atomic on its own)."""
    return backend.put_batch(
        [key for key, _, _ in items], [engine_array(v) for _, v, _ in items], [x for _, _, x in items]
    )
