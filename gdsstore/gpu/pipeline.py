"""``GDSCodecPipeline``: a zarr codec pipeline that reads a selection's chunks in batches.

Per-chunk Python work is what limits zarr on the GPU. This pipeline takes the whole list of chunks a
selection needs, plans the reads (:mod:`gdsstore.gpu.plan`: chunk objects, or the shard indexes and
then the coalesced byte ranges of the inner chunks), and runs the plan (:mod:`gdsstore.gpu.execute`)
one window at a time: one staging buffer per window (pinned, or on the GPU through the bounce ring),
one batched decode (nvCOMP on the GPU, numcodecs threads on the host), one scatter into the output,
while the next window is read.

Writes go the same way (:mod:`gdsstore.gpu.write`): the chunks or shards a selection touches are
encoded as one batch (nvCOMP on the GPU, codec threads on the host) and published in parallel through
the engine. Codec chains it cannot batch (nested sharding, codecs without synchronous support, byte
getters that are not gdsstore store paths) go to zarr's own ``FusedCodecPipeline`` (the delegate), and
the trace says why.

This module is the ``zarr.codec_pipeline`` entry point, loaded by every ``zarr.open_array`` of an
environment where gdsstore is installed: it imports only zarr's pipeline base classes; the planner,
the executor and the GPU codecs load on first use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from zarr.abc.codec import CodecPipeline
from zarr.core.codec_pipeline import FusedCodecPipeline

if TYPE_CHECKING:
    from typing import Self

    from zarr.abc.codec import Codec, GetResult
    from zarr.abc.store import ByteGetter, ByteSetter
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, NDBuffer
    from zarr.core.dtype.wrapper import TBaseDType, TBaseScalar, ZDType
    from zarr.core.indexing import SelectorTuple
    from zarr.core.metadata.v3 import ChunkGridMetadata

__all__ = ["BatchItem", "GDSCodecPipeline"]

#: One item of zarr's read or write batch: ``(byte getter or setter, chunk spec, chunk selection, output or
#: value selection, is complete)``.
BatchItem = tuple[Any, "ArraySpec", "SelectorTuple", "SelectorTuple", bool]


def _upgrade(codecs: Iterable[Codec]) -> list[Codec]:
    """zarr's codecs swapped for gdsstore's GPU-capable equivalents (loaded only when one is there): the
    pipeline's copies; the array's metadata keeps zarr's own."""
    from zarr.codecs import BloscCodec, Crc32cCodec, GzipCodec, ShardingCodec, ZstdCodec
    from zarr.codecs.numcodecs import LZ4, Zstd

    codecs = list(codecs)
    if not any(
        isinstance(c, BloscCodec | Crc32cCodec | GzipCodec | ShardingCodec | ZstdCodec | LZ4 | Zstd) for c in codecs
    ):
        return codecs
    from gdsstore.gpu.codecs import upgrade

    return [upgrade(c) for c in codecs]


class GDSCodecPipeline(CodecPipeline):
    """Batched reads + GPU decode; zarr's ``FusedCodecPipeline`` for everything it does not batch.

    Selected by :func:`gdsstore.enable_gpu` (``codec_pipeline.path``), or directly::

        zarr.config.set({"codec_pipeline.path": "gdsstore.gpu.pipeline.GDSCodecPipeline"})

    Immutable, equal and hashed by its delegate. Written out rather than a frozen dataclass: zarr loads
    this module through its entry point on every first array open, and the dataclass machinery alone
    cost 1.2 ms of that import.
    """

    __slots__ = ("delegate",)
    delegate: FusedCodecPipeline

    def __init__(self, delegate: FusedCodecPipeline) -> None:
        object.__setattr__(self, "delegate", delegate)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"GDSCodecPipeline is immutable: cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.delegate == self.delegate  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self.delegate))

    def __repr__(self) -> str:
        return f"GDSCodecPipeline(delegate={self.delegate!r})"

    def __reduce__(self) -> tuple[type[GDSCodecPipeline], tuple[FusedCodecPipeline]]:
        return type(self), (self.delegate,)  # pickled for dask workers: rebuilt through __init__

    # -- construction (zarr's CodecPipeline contract) --

    @classmethod
    def from_codecs(cls, codecs: Iterable[Codec], *, batch_size: int | None = None) -> Self:
        return cls(FusedCodecPipeline.from_codecs(_upgrade(codecs), batch_size=batch_size))

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Self:
        return type(self)(self.delegate.evolve_from_array_spec(array_spec))

    def __iter__(self) -> Iterator[Codec]:
        return iter(self.delegate.codecs)

    @property
    def codecs(self) -> tuple[Codec, ...]:
        return self.delegate.codecs

    @property
    def supports_partial_decode(self) -> bool:
        return self.delegate.supports_partial_decode

    @property
    def supports_partial_encode(self) -> bool:
        return self.delegate.supports_partial_encode

    def validate(
        self, *, shape: tuple[int, ...], dtype: ZDType[TBaseDType, TBaseScalar], chunk_grid: ChunkGridMetadata
    ) -> None:
        self.delegate.validate(shape=shape, dtype=dtype, chunk_grid=chunk_grid)

    def compute_encoded_size(self, byte_length: int, array_spec: ArraySpec) -> int:
        return self.delegate.compute_encoded_size(byte_length, array_spec)

    async def decode(
        self, chunk_bytes_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]
    ) -> Iterable[NDBuffer | None]:
        return await self.delegate.decode(chunk_bytes_and_specs)

    async def encode(
        self, chunk_arrays_and_specs: Iterable[tuple[NDBuffer | None, ArraySpec]]
    ) -> Iterable[Buffer | None]:
        return await self.delegate.encode(chunk_arrays_and_specs)

    async def write(
        self,
        batch_info: Iterable[tuple[ByteSetter, ArraySpec, SelectorTuple, SelectorTuple, bool]],
        value: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> None:
        from gdsstore.gpu import write as _write

        await _write.write(self, batch_info, value, drop_axes)

    # -- reads: plan, then execute --

    def read_plan(self, byte_getter: object = None) -> tuple[str, str]:
        """``(plan, reason)``: ``"chunks"``, ``"shards"`` or ``"delegate"`` for this pipeline's codecs
        (:func:`gdsstore.gpu.routes.read_route`)."""
        from gdsstore.gpu.routes import read_route

        return read_route(self.delegate, byte_getter)

    async def read(
        self,
        batch_info: Iterable[tuple[ByteGetter, ArraySpec, SelectorTuple, SelectorTuple, bool]],
        out: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> tuple[GetResult, ...]:
        batch = list(batch_info)
        if not batch:
            return ()
        plan, reason = self.read_plan(batch[0][0])
        if plan == "delegate":
            import gdsstore.trace as _trace

            _trace.record("read-plan", "zarr-pipeline", reason, 0, 0.0)
            return await self.delegate.read(batch, out, drop_axes)
        from gdsstore.gpu import execute, read_shards
        from gdsstore.gpu.fetch import StoreFetcher, fetcher_for

        fetch = fetcher_for([item[0] for item in batch])
        sharding = self.delegate.array_bytes_codec
        codecs = self.delegate.codecs if plan == "chunks" else (sharding,)
        if isinstance(fetch, StoreFetcher):  # awaited on the loop, step by step: see read_loaded
            return await execute.read_loaded(plan, codecs, batch, out, drop_axes, fetch)
        run = execute.one_call
        if plan == "chunks":
            return await asyncio.to_thread(run, execute.read_chunks, codecs, batch, out, drop_axes, fetch)
        return await asyncio.to_thread(run, read_shards.read_shards, sharding, batch, out, drop_axes, fetch)
