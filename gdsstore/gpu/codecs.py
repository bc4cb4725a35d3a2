"""zarr codecs that decode and encode on the GPU with nvCOMP, and on the CPU exactly like zarr's own.

Each class subclasses zarr's codec of the same name, so the array metadata (``to_dict``) is the same
and data written by either is read by the other. Host buffers, or device buffers without nvCOMP or a
GPU, go through zarr's CPU code (numcodecs); the trace records each decode/encode with its route
(``gpu-decode``/``gpu-encode``/``cpu-codec``) and the reason.

=========================  ==================================  =========================================
zarr codec name            GPU decode                           GPU encode
=========================  ==================================  =========================================
``zstd``                   nvCOMP zstd (RAW frames)             nvCOMP zstd (when ``checksum`` is off)
``gzip``                   nvCOMP Deflate on the member's       CPU (numcodecs), see :mod:`.nvcomp`
                           deflate stream, size checked
``numcodecs.zstd``         as ``zstd``                          as ``zstd``
``numcodecs.lz4``          nvCOMP LZ4 on the raw block          nvCOMP LZ4 + numcodecs' size header
``crc32c``                 GPU kernel (:mod:`.kernels`)         GPU kernel
``bytes``, ``transpose``   cupy views (zarr's own code)         cupy
``blosc``                  frames parsed on the host, lz4/zstd  CPU
                           streams by nvCOMP, unshuffles on
                           the GPU (:mod:`.blosc`); blosclz,
                           snappy and zlib frames on the CPU
=========================  ==================================  =========================================
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from zarr.codecs import BloscCodec as _ZarrBlosc
from zarr.codecs import Crc32cCodec as _ZarrCrc32c
from zarr.codecs import GzipCodec as _ZarrGzip
from zarr.codecs import ZstdCodec as _ZarrZstd
from zarr.codecs.numcodecs import LZ4 as _ZarrLZ4
from zarr.codecs.numcodecs import Zstd as _ZarrNumcodecsZstd

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

__all__ = [
    "CODECS",
    "LZ4",
    "BloscCodec",
    "Crc32cCodec",
    "GzipCodec",
    "NumcodecsZstd",
    "ZstdCodec",
    "codec_format",
    "is_device_buffer",
    "quiet_records",
    "raw_nbytes",
    "upgrade",
]


_NBYTES: dict[int, tuple[Any, int]] = {}


def raw_nbytes(spec: ArraySpec) -> int:
    """Bytes of a decoded chunk of ``spec`` (here, below :mod:`gdsstore.gpu.decode`, which imports this
    module: the blosc codec needs it too)."""
    # Specs are shared by the chunks of a regular grid: remember the last few by identity.
    hit = _NBYTES.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    n = 1
    for d in spec.shape:
        n *= int(d)
    n *= int(spec.dtype.to_native_dtype().itemsize)
    if len(_NBYTES) > 64:
        _NBYTES.clear()
    _NBYTES[id(spec)] = (spec, n)
    return n


def is_device_buffer(buf: Any) -> bool:
    """Whether a zarr ``Buffer``/``NDBuffer`` holds device memory."""
    inner = buf.as_array_like() if hasattr(buf, "as_array_like") else buf.as_ndarray_like()
    return hasattr(inner, "__cuda_array_interface__")


def codec_format(codec: Any) -> str | None:
    """The chunk format of a bytes-to-bytes codec (``"zstd"``, ``"gzip"``, ``"lz4"``, ``"crc32c"``,
    ``"blosc"``), for zarr's classes and ours alike; ``None`` for any other codec."""
    from zarr.codecs import BloscCodec
    from zarr.codecs.numcodecs import Blosc

    if isinstance(codec, _ZarrZstd | _ZarrNumcodecsZstd):
        return "zstd"
    if isinstance(codec, _ZarrGzip):
        return "gzip"
    if isinstance(codec, _ZarrLZ4):
        return "lz4"
    if isinstance(codec, _ZarrCrc32c):
        return "crc32c"
    if isinstance(codec, BloscCodec | Blosc):
        return "blosc"
    return None


_quiet = threading.local()


@contextmanager
def quiet_records() -> Iterator[None]:
    """Silence the codecs' per-chunk trace records (a batching caller records once per batch)."""
    prev = getattr(_quiet, "on", False)
    _quiet.on = True
    try:
        yield
    finally:
        _quiet.on = prev


def _record(op: str, route: str, reason: str, nbytes: int, t0: float) -> None:
    import gdsstore.trace as _trace

    if _trace.active() and not getattr(_quiet, "on", False):
        _trace.record(op, route, reason, nbytes, time.perf_counter() - t0)


def _on_host(fn: Any, buf: Buffer, spec: ArraySpec) -> Any:
    """Run zarr's CPU codec code on ``buf``; device buffers are staged through host memory (numcodecs
    cannot read device memory), and the result goes back to ``spec``'s prototype."""
    if not is_device_buffer(buf):
        return fn(buf, spec)
    import dataclasses

    from zarr.core.buffer.cpu import Buffer as HostBuffer
    from zarr.core.buffer.cpu import numpy_buffer_prototype

    r = fn(
        HostBuffer.from_bytes(buf.to_bytes()), dataclasses.replace(spec, prototype=numpy_buffer_prototype())
    )
    return None if r is None else spec.prototype.buffer.from_bytes(r.to_bytes())


def _over_present(
    items: Iterable[tuple[Buffer | None, ArraySpec]],
    many: Callable[[list[Buffer], list[ArraySpec]], Sequence[Buffer | None]],
) -> list[Buffer | None]:
    """Run ``many`` once over the present chunks of a batch; absent ones stay ``None`` in place."""
    batch = list(items)
    present = [(i, b, s) for i, (b, s) in enumerate(batch) if b is not None]
    out: list[Buffer | None] = [None] * len(batch)
    for (i, _, _), r in zip(present, many([b for _, b, _ in present], [s for _, _, s in present])):
        out[i] = r
    return out


def _cupy() -> Any:
    from gdsstore.engine import cuda

    return cuda.cupy_or_none()


def _as_device_bytes(buf: Buffer) -> Any:
    return _cupy().asarray(buf.as_array_like()).view("u1").reshape(-1)


def gpu_decode_bytes(fmt: str, chunks: list[Any]) -> list[Any]:
    """Decode device byte arrays in numcodecs format ``fmt`` on the GPU; ``None`` entries mark chunks
    whose framing nvCOMP cannot take (the caller decodes those on the CPU)."""
    from gdsstore.gpu import nvcomp  # on first use: zarr loads this module for its codec names

    out: list[Any] = [None] * len(chunks)
    idx: list[int] = []
    srcs: list[Any] = []
    sizes: list[int] = []
    for i, c in enumerate(chunks):
        try:
            if fmt == "gzip":
                head = c[: min(512, c.size)].get().tobytes()
                fr = nvcomp.frame_of(fmt, head, int(c.size))
                size = nvcomp.gzip_isize(c[-4:].get().tobytes())
            elif fmt == "lz4":
                fr = nvcomp.frame_of(fmt, c[:4].get().tobytes(), int(c.size))
                size = fr.size
            else:
                fr = nvcomp.frame_of(fmt, b"", int(c.size))
                size = -1
        except ValueError:
            continue
        idx.append(i)
        srcs.append(c[fr.start : fr.stop])
        sizes.append(size)
    if srcs:
        try:
            decoded = nvcomp.decode_batch(fmt, srcs, sizes)
        except ValueError:
            # A size mismatch (e.g. a multi-member gzip): decode those one by one to find the odd ones.
            decoded = []
            for s, n in zip(srcs, sizes):
                try:
                    decoded.extend(nvcomp.decode_batch(fmt, [s], [n]))
                except ValueError:
                    decoded.append(None)
        for i, d in zip(idx, decoded):
            out[i] = d
    return out


def gpu_encode_bytes(fmt: str, chunks: list[Any]) -> list[Any]:
    """Encode device byte arrays on the GPU into numcodecs format ``fmt`` (``zstd`` or ``lz4``)."""
    from gdsstore.gpu import nvcomp  # on first use: zarr loads this module for its codec names

    cp = _cupy()
    enc = nvcomp.encode_batch(fmt, chunks)
    if fmt == "lz4":
        # numcodecs' LZ4 framing: the uncompressed size as a little-endian uint32, then the block.
        enc = [
            cp.concatenate([cp.asarray(np.frombuffer(int(c.size).to_bytes(4, "little"), "u1")), e])
            for c, e in zip(chunks, enc)
        ]
    return enc


class GPUBytesCodec:
    """Shared GPU/CPU dispatch of the compressor codecs below (mixed in before zarr's class)."""

    _fmt: ClassVar[str]

    def _gpu_encodable(self) -> bool:
        return True

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return self._decode_many([chunk_bytes], [chunk_spec])[0]

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return self._encode_many([chunk_bytes], [chunk_spec])[0]

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return self._decode_sync(chunk_bytes, chunk_spec)

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return self._encode_sync(chunk_bytes, chunk_spec)

    async def decode(
        self, chunks_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]
    ) -> list[Buffer | None]:
        # One nvCOMP call for the whole batch, instead of zarr's one coroutine per chunk.
        return _over_present(chunks_and_specs, self._decode_many)

    async def encode(
        self, chunks_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]
    ) -> list[Buffer | None]:
        return _over_present(chunks_and_specs, self._encode_many)

    def _decode_many(self, bufs: list[Buffer], specs: list[ArraySpec]) -> list[Buffer]:
        from gdsstore.gpu import nvcomp  # on first use: zarr loads this module for its codec names

        if not bufs:
            return []
        t0 = time.perf_counter()
        device = all(is_device_buffer(b) for b in bufs)
        d = nvcomp.route_codec(self._fmt, device=device)
        out: list[Buffer | None] = [None] * len(bufs)
        if d.route == "gpu-decode":
            decoded = gpu_decode_bytes(self._fmt, [_as_device_bytes(b) for b in bufs])
            for i, (x, spec) in enumerate(zip(decoded, specs)):
                if x is not None:
                    out[i] = spec.prototype.buffer.from_array_like(x)
            n = sum(len(o) for o in out if o is not None)
            _record("decode", "gpu-decode", d.reason, n, t0)
            t0 = time.perf_counter()
        rest = [i for i, o in enumerate(out) if o is None]
        if rest:
            reason = d.reason if d.route == "cpu-codec" else f"{self._fmt} framing not decodable by nvCOMP"
            nbytes = 0
            for i in rest:
                dec: Buffer = _on_host(super()._decode_sync, bufs[i], specs[i])  # type: ignore[misc]
                out[i] = dec
                nbytes += len(dec)
            _record("decode", "cpu-codec", reason, nbytes, t0)
        return out  # type: ignore[return-value]

    def _encode_many(self, bufs: list[Buffer], specs: list[ArraySpec]) -> list[Buffer | None]:
        from gdsstore.gpu import nvcomp  # on first use: zarr loads this module for its codec names

        if not bufs:
            return []
        t0 = time.perf_counter()
        device = all(is_device_buffer(b) for b in bufs)
        d = nvcomp.route_codec(self._fmt, device=device, encode=True)
        if d.route == "gpu-encode" and not self._gpu_encodable():
            d = type(d)("cpu-codec", f"{self._fmt} with checksum=True writes on the CPU")
        if d.route == "gpu-encode" and nvcomp.encode_chunk_size([len(b) for b in bufs]) is None:
            d = type(d)("cpu-codec", f"chunk larger than nvCOMP's {nvcomp.MAX_ENCODE_CHUNK >> 20} MiB limit")
        nbytes = sum(len(b) for b in bufs)
        if d.route == "gpu-encode":
            enc = gpu_encode_bytes(self._fmt, [_as_device_bytes(b) for b in bufs])
            out: list[Buffer | None] = [s.prototype.buffer.from_array_like(e) for e, s in zip(enc, specs)]
        else:
            out = [_on_host(super()._encode_sync, b, s) for b, s in zip(bufs, specs)]  # type: ignore[misc]
        _record("encode", d.route, d.reason, nbytes, t0)
        return out


class ZstdCodec(GPUBytesCodec, _ZarrZstd):
    """zarr's ``zstd`` codec, decoded/encoded by nvCOMP on device buffers."""

    _fmt = "zstd"

    def _gpu_encodable(self) -> bool:
        # nvCOMP writes no content checksum; keep the CPU when the user asked for one.
        return not self.checksum


class NumcodecsZstd(GPUBytesCodec, _ZarrNumcodecsZstd):  # type: ignore[misc]
    """zarr's ``numcodecs.zstd`` codec on the GPU."""

    _fmt = "zstd"

    def _gpu_encodable(self) -> bool:
        return not self.codec_config.get("checksum", False)


class GzipCodec(GPUBytesCodec, _ZarrGzip):
    """zarr's ``gzip`` codec: nvCOMP Deflate decode on device buffers; encode on the CPU."""

    _fmt = "gzip"


class LZ4(GPUBytesCodec, _ZarrLZ4):  # type: ignore[misc]
    """zarr's ``numcodecs.lz4`` codec on the GPU (numcodecs' 4-byte size header + raw LZ4 block)."""

    _fmt = "lz4"


class Crc32cCodec(_ZarrCrc32c):
    """zarr's ``crc32c`` codec with the checksum computed by a GPU kernel on device buffers."""

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        if not is_device_buffer(chunk_bytes):
            return super()._decode_sync(chunk_bytes, chunk_spec)
        from gdsstore.gpu.kernels import crc32c_device

        t0 = time.perf_counter()
        data = _as_device_bytes(chunk_bytes)
        if data.size < 4:
            raise ValueError(f"Crc32cCodec._decode_sync(): chunk of {data.size} bytes holds no checksum")
        inner = data[:-4]
        stored = int(np.frombuffer(data[-4:].get().tobytes(), "<u4")[0])
        computed = int(crc32c_device([inner])[0])
        if stored != computed:
            raise ValueError(
                f"Crc32cCodec._decode_sync(): stored and computed checksum do not match. "
                f"Stored: {stored:#010x}. Computed: {computed:#010x}."
            )
        _record("decode", "gpu-decode", "crc32c GPU kernel", int(inner.size), t0)
        return chunk_spec.prototype.buffer.from_array_like(inner)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        if not is_device_buffer(chunk_bytes):
            return super()._encode_sync(chunk_bytes, chunk_spec)
        from gdsstore.gpu.kernels import crc32c_device

        cp = _cupy()
        data = _as_device_bytes(chunk_bytes)
        crc = crc32c_device([data])[0]
        tail = cp.asarray(np.array([crc], dtype="<u4").view("u1"))
        return chunk_spec.prototype.buffer.from_array_like(cp.concatenate([data, tail]))


class BloscCodec(_ZarrBlosc):
    """zarr's ``blosc`` codec: device buffers decode as one batch (:func:`gdsstore.gpu.blosc.decode_frames`:
    nvCOMP for lz4 and zstd frames, unshuffles on the GPU); host buffers and frames of other
    compressors through numcodecs."""

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return self._decode_sync(chunk_bytes, chunk_spec)

    async def decode(
        self, chunks_and_specs: Iterable[tuple[Buffer | None, ArraySpec]]
    ) -> list[Buffer | None]:
        return _over_present(chunks_and_specs, self._decode_many)  # one batch, not a coroutine per chunk

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return self._decode_many([chunk_bytes], [chunk_spec])[0]

    def _decode_many(self, bufs: list[Buffer], specs: list[ArraySpec]) -> list[Buffer]:
        from gdsstore.gpu import blosc, nvcomp  # on first use: zarr loads this module for its codec names

        t0 = time.perf_counter()
        d = nvcomp.route_codec("blosc", device=bool(bufs) and all(is_device_buffer(b) for b in bufs))
        if d.route != "gpu-decode":
            out = [_on_host(super()._decode_sync, b, s) for b, s in zip(bufs, specs)]
            _record("decode", "cpu-codec", d.reason, sum(len(o) for o in out), t0)
            return out
        arrays = [_as_device_bytes(b) for b in bufs]
        lengths = np.array([int(a.size) for a in arrays], dtype=np.int64)
        src = _cupy().concatenate(arrays)
        want = np.array([raw_nbytes(s) for s in specs], dtype=np.int64)
        dec = blosc.decode_frames(src, np.cumsum(lengths) - lengths, lengths, want, host=src.get())
        done = dec.sizes >= 0
        _record("decode", "gpu-decode", d.reason, dec.nbytes, t0)
        t0 = time.perf_counter()
        res = [s.prototype.buffer.from_array_like(dec.item(k)) if done[k] else None for k, s in enumerate(specs)]
        for k in np.flatnonzero(~done).tolist():
            res[k] = _on_host(super()._decode_sync, bufs[k], specs[k])
        if not done.all():
            _record("decode", "cpu-codec", dec.absent_reason or "blosc", int(want[~done].sum()), t0)
        return res  # type: ignore[return-value]


#: zarr codec name -> our class (registered with zarr by :func:`gdsstore.enable_gpu`, selectable by name
#: through zarr's ``codecs`` config; the pipeline upgrades zarr's own instances, :func:`upgrade`).
CODECS: dict[str, type] = {
    "blosc": BloscCodec,
    "zstd": ZstdCodec,
    "gzip": GzipCodec,
    "crc32c": Crc32cCodec,
    "numcodecs.zstd": NumcodecsZstd,
    "numcodecs.lz4": LZ4,
}

_UPGRADES: dict[type, type] = {
    _ZarrBlosc: BloscCodec,
    _ZarrZstd: ZstdCodec,
    _ZarrGzip: GzipCodec,
    _ZarrCrc32c: Crc32cCodec,
    _ZarrNumcodecsZstd: NumcodecsZstd,
    _ZarrLZ4: LZ4,
}


def upgrade(codec: Any) -> Any:
    """gdsstore's GPU-capable equivalent of a zarr codec instance, for the pipeline's own use, recursing
    into sharding codecs (its ``subchunk_write_order`` kept); other codecs are returned as they are.

    The array's metadata keeps zarr's own objects (users compare, pickle and write them back, as xarray's
    encodings do); only the pipeline's copies are gdsstore's classes, so that they run on the GPU.
    """
    from zarr.codecs.sharding import ShardingCodec

    if isinstance(codec, ShardingCodec):
        return ShardingCodec(
            chunk_shape=codec.chunk_shape,
            codecs=[upgrade(c) for c in codec.codecs],
            index_codecs=[upgrade(c) for c in codec.index_codecs],
            index_location=codec.index_location,
            subchunk_write_order=codec.subchunk_write_order,
        )
    cls = _UPGRADES.get(type(codec))
    return codec if cls is None else _retyped(codec, cls)


def _retyped(codec: Any, cls: type) -> Any:
    """``codec`` as an instance of ``cls``, a subclass of its class that adds GPU routes and no state:
    every attribute kept as it is (``from_dict(to_dict())`` would pin blosc's tunable ``typesize`` and
    ``shuffle``, which zarr leaves open until the array's dtype is known)."""
    new: Any = object.__new__(cls)
    new.__dict__.update(codec.__dict__)
    return new
