"""The zarr pipeline's route for a batch of chunk reads or writes: gdsstore's batched pipeline or zarr's own.

The policy decides both, side by side (:func:`gdsstore.policy.decide_zarr_read`,
:func:`gdsstore.policy.decide_zarr_write`), from the facts gathered here from zarr's codecs and byte getters
or setters (:func:`batch_facts`). Loaded on a pipeline's first read or write, not with the entry point.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from zarr.codecs import ShardingCodec
from zarr.codecs._v2 import V2Codec  # private: zarr's v2 codec has no public name
from zarr.storage import StorePath

from gdsstore import policy
from gdsstore.gpu.fetch import backend_of
from gdsstore.policy import Sharding, ZarrBatchFacts

if TYPE_CHECKING:
    from zarr.core.codec_pipeline import FusedCodecPipeline

    from gdsstore.gpu.pipeline import BatchItem

__all__ = ["batch_facts", "read_route", "write_route"]


def read_route(delegate: FusedCodecPipeline, byte_getter: object = None) -> tuple[str, str]:
    """``(route, reason)`` of a read batch whose first byte getter is ``byte_getter`` (``None``: not known):
    ``"chunks"``, ``"shards"`` or ``"delegate"`` (zarr's own pipeline, ``delegate``)."""
    decision = policy.decide_zarr_read(batch_facts(delegate, [] if byte_getter is None else [byte_getter]))
    return decision.route, decision.reason


def write_route(delegate: FusedCodecPipeline, batch: Sequence[BatchItem]) -> tuple[str, str]:
    """``(route, reason)`` of a write batch, the reverse of :func:`read_route`: ``"chunks"``, ``"shards"`` or
    ``"delegate"``."""
    shapes = [tuple(item[1].shape) for item in batch]
    decision = policy.decide_zarr_write(batch_facts(delegate, [item[0] for item in batch], write=True, shapes=shapes))
    return decision.route, decision.reason


def batch_facts(
    delegate: FusedCodecPipeline, targets: Sequence[Any], *, write: bool = False, shapes: Sequence[tuple[int, ...]] = ()
) -> ZarrBatchFacts:
    """The facts :func:`gdsstore.policy.decide_zarr_read` and :func:`~gdsstore.policy.decide_zarr_write` route a
    batch by: how ``delegate``'s codecs shard and whether they run synchronously, and whether ``targets`` (the
    batch's byte getters or setters) are store paths; for a ``write`` also the store's engine backend (the
    same for every target, writable) and whether a chunk of ``shapes`` is 0-d."""
    ab = delegate.array_bytes_codec
    sharding: Sharding = "none"
    if isinstance(ab, ShardingCodec):
        outside = delegate.array_array_codecs or delegate.bytes_bytes_codecs
        nested = any(isinstance(c, ShardingCodec) for c in ab.codecs)
        sharding = "outside" if outside else "nested" if nested else "sharded"
    # numcodecs filters (Delta, ...) may change a chunk's size or make objects of its bytes
    v2_filters = isinstance(ab, V2Codec) and bool(ab.filters)
    facts = ZarrBatchFacts(delegate.sync_transform is not None, sharding, v2_filters, any(len(s) == 0 for s in shapes))
    if not targets:
        return facts
    if not isinstance(targets[0], StorePath):
        return dataclasses.replace(facts, not_store_path=type(targets[0]).__name__)
    if not write:
        return facts
    store, backend = targets[0].store, backend_of(targets[0])
    if backend is None:
        return dataclasses.replace(facts, store=type(store).__name__, engine=False)
    return dataclasses.replace(
        facts,
        store=type(store).__name__,
        one_store=all(backend_of(t) is backend for t in targets),
        writable=not store.read_only and backend.writable,
    )
