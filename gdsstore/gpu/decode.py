"""Decoding a window of staged chunks: the codec chain split for batching, the batched GPU decode of
the bytes-to-bytes stage (nvCOMP, crc32c kernel), and the host (numcodecs) decode.

A chain such as ``bytes -> zstd -> crc32c`` runs its bytes-to-bytes stage once per window on the GPU
(one nvCOMP call for every chunk of the window); the rest (``bytes``, ``transpose``) runs per chunk as
views. Chunks whose framing nvCOMP cannot take, and chains it cannot batch, decode on the CPU.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.core.chunk_utils import ChunkTransform

import gdsstore.trace as _trace
from gdsstore import policy
from gdsstore.engine import native
from gdsstore.engine.landing import Landed, device_pointer, empty_slots, slot_layout
from gdsstore.engine.pool import map_all
from gdsstore.gpu import codecs as _codecs
from gdsstore.gpu import nvcomp, staging
from gdsstore.gpu.codecs import raw_nbytes
from gdsstore.gpu.plan import Layout, c_order_layout

if TYPE_CHECKING:
    from zarr.abc.codec import Codec
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import NDBuffer

__all__ = [
    "CodecChain", "bytes_swap_width", "decode_on_device", "decode_window", "device_pointer",
    "is_device_spec", "raw_nbytes", "swap_bytes",
]


def is_device_spec(spec: ArraySpec) -> bool:
    """Whether chunks of ``spec`` land in device buffers (zarr's GPU buffer prototype)."""
    try:
        from zarr.core.buffer import gpu
    except Exception:
        return False
    return issubclass(spec.prototype.buffer, gpu.Buffer)


@dataclass(frozen=True)
class CodecChain:
    """A chunk codec chain split for batching: the bytes-to-bytes stage runs batched on the GPU when
    :meth:`device_plan` names a format, the rest (``bytes``, ``transpose``) per chunk as views."""

    transform: ChunkTransform  # the whole chain
    array_part: ChunkTransform  # array->array + array->bytes only
    bb_codecs: tuple[Any, ...]  # bytes->bytes, encode order
    bb_formats: tuple[str | None, ...]  # encode order
    host_reason: str | None = None  # set: the bytes-to-bytes stage runs on the CPU, for this reason
    split_reason: str | None = None  # set: zstd decoded by the host's threads and nvCOMP at once, for this reason

    def on_host(self, reason: str) -> CodecChain:
        """This chain with its bytes-to-bytes stage on the CPU (staged in host memory), for ``reason``."""
        return dataclasses.replace(self, host_reason=reason)

    def split(self, reason: str) -> CodecChain:
        """This zstd chain decoded by the host's threads and nvCOMP at once (staged in host memory, where the
        host's threads read it; :mod:`gdsstore.gpu.decode_split`), for ``reason``."""
        return dataclasses.replace(self, split_reason=reason)

    @classmethod
    def of(cls, codecs: Sequence[Codec]) -> CodecChain:
        from zarr.abc.codec import BytesBytesCodec

        from gdsstore.gpu import zarr_v2

        bb = [c for c in codecs if isinstance(c, BytesBytesCodec)]
        rest = [c for c in codecs if not isinstance(c, BytesBytesCodec)]
        # a v2 array's compressor: a bytes-to-bytes stage like a v3 one (the rest a view)
        bb, rest = zarr_v2.split(codecs) or (bb, rest)
        return cls(
            ChunkTransform(codecs=tuple(codecs)),
            ChunkTransform(codecs=tuple(rest)),
            tuple(bb),
            tuple(getattr(c, "chunk_format", None) or _codecs.codec_format(c) for c in bb),
        )

    def device_plan(self) -> tuple[str | None, bool, str]:
        """``(compressor format or None, crc32c outermost?, reason)``; the format is ``"-"`` when the
        bytes-to-bytes stage cannot run batched on the GPU (the reason says why)."""
        fmts = list(self.bb_formats)
        crc = bool(fmts) and fmts[-1] == "crc32c"
        if crc:
            fmts.pop()
        if not fmts:
            return None, crc, "no compressor"
        if self.host_reason is not None:
            return "-", crc, self.host_reason
        if len(fmts) > 1 or fmts[0] is None or fmts[0] == "crc32c":
            return "-", crc, f"codec chain {self.bb_formats} not batchable on the GPU"
        d = nvcomp.route_codec(fmts[0], device=True)
        if d.route != "gpu-decode":
            return "-", crc, d.reason
        return fmts[0], crc, d.reason

    def device_staged(self) -> bool:
        """Whether a device read stages the stored bytes straight on the GPU (bounce ring): nothing
        about them is parsed on the CPU (no crc32c to check, no gzip/lz4 framing, no CPU codec)."""
        fmt, crc, _ = self.device_plan()
        return fmt in (None, "zstd") and not crc and self.split_reason is None

    def swap_width(self, spec: ArraySpec) -> int:
        """:func:`bytes_swap_width` of this chain's array-to-bytes codec for ``spec``'s dtype."""
        return bytes_swap_width(self.array_part.codecs[-1], spec.dtype.to_native_dtype())

    def stored_nbytes(self, spec: ArraySpec) -> int | None:
        """The size of every stored chunk of ``spec`` where its codecs fix it, else ``None``: no
        bytes-to-bytes stage and only codecs of fixed size (their ``compute_encoded_size``), or a zarr v2
        chunk without compressor or filters of a fixed-size dtype. Variable-length strings and bytes
        (``vlen-utf8``, ``vlen-bytes``) have none: a chunk's size follows its values."""
        from zarr.codecs._v2 import V2Codec  # private: zarr's v2 codec has no public name

        if self.bb_codecs:
            return None
        codecs = self.array_part.codecs
        ab = codecs[-1]
        if isinstance(ab, V2Codec):
            plain = len(codecs) == 1 and ab.compressor is None and not ab.filters
            return raw_nbytes(spec) if plain and spec.dtype.to_native_dtype().kind != "O" else None
        if not all(c.is_fixed_size for c in codecs):
            return None
        n = raw_nbytes(spec)
        for codec in codecs:
            n = codec.compute_encoded_size(n, spec)
            spec = codec.resolve_metadata(spec)
        return n

    def view_layout(self, spec: ArraySpec) -> Layout | None:
        """Shape and byte strides of a decoded chunk as a view of its raw bytes (``bytes`` codec in
        the native byte order, then ``transpose`` codecs), or ``None`` when decoding is more than a view."""
        from zarr.codecs import BytesCodec, TransposeCodec
        from zarr.codecs._v2 import V2Codec  # private: zarr's v2 codec has no public name

        *codecs, ab = self.array_part.codecs
        transposes = [tuple(c.order) for c in codecs if isinstance(c, TransposeCodec)]
        dt = spec.dtype.to_native_dtype()
        if isinstance(ab, V2Codec) and not codecs and ab.compressor is None and not ab.filters:
            # a v2 chunk's raw bytes in C or F order: F is the reversed axes' C order
            transposes = [tuple(range(len(spec.shape)))[::-1]] if spec.order == "F" else []
        elif not isinstance(ab, BytesCodec) or len(transposes) != len(codecs) or bytes_swap_width(ab, dt):
            return None
        if dt.kind not in "biuf" or dt.itemsize not in (1, 2, 4, 8) or not dt.isnative:
            return None
        return c_order_layout(tuple(spec.shape), dt.itemsize, transposes)


def bytes_swap_width(codec: Any, dtype: np.dtype[Any]) -> int:
    """The element width whose bytes must be reversed between a chunk's stored bytes and a native
    array of ``dtype``: a ``bytes`` codec whose byte order is not this machine's; else 0. CuPy has no
    non-native dtypes, so on the GPU zarr's own view would read such bytes as native.

    Examples:
        >>> import numpy as np
        >>> from zarr.codecs import BytesCodec
        >>> bytes_swap_width(BytesCodec(endian="big"), np.dtype("f4")), bytes_swap_width(BytesCodec(endian="big"), np.dtype("u1"))
        (4, 0)
    """
    from zarr.codecs import BytesCodec

    if not isinstance(codec, BytesCodec) or dtype.itemsize <= 1:
        return 0
    endian = getattr(codec.endian, "value", codec.endian)
    return dtype.itemsize if endian not in (None, sys.byteorder) else 0


def swap_bytes(raw: Any, width: int) -> Any:
    """A copy of the byte array ``raw`` with each ``width``-byte element's bytes reversed (NumPy or CuPy)."""
    return raw.reshape(-1, width)[:, ::-1].copy().reshape(-1)


def decode_bb_on_host(
    chain: CodecChain,
    specs: list[ArraySpec],
    staged: Landed,
    ids: list[int],
    names: Sequence[str] | None = None,
    *,
    pinned: bool = True,
) -> Landed:
    """Bytes-to-bytes codecs on the CPU, from the host staging buffer: zstd chunks in one call of the native core
    (on its threads), the rest on the engine's threads when there are several: each chunk's raw bytes in its slot
    of one staging buffer (``pinned`` where there is a GPU, for one copy to the device; a host read's not).

    Raises:
        ValueError: a chunk that decodes to other than its raw size (naming it; ``names``: the chunks' keys).
    """
    want = np.full(len(specs), -1, dtype=np.int64)
    sizes: dict[int, int] = {}  # a regular grid's chunks share one spec: its size computed once
    want[ids] = [sizes.get(id(specs[i])) or sizes.setdefault(id(specs[i]), raw_nbytes(specs[i])) for i in ids]
    out = empty_slots(want, pinned=pinned)
    threads = policy.settings().num_threads
    core = native.load() if tuple(chain.bb_formats) == ("zstd",) and staged.buffer_of is None else None
    # zstd chunks (most): the core decodes them all in one call; what it refuses goes the way of any other codec
    rest = _zstd_in_core(core, staged, out, want, ids, threads) if core is not None and ids else ids
    d_off, n_of = out.offsets.tolist(), want.tolist()

    def some(part: list[int]) -> None:  # a run of chunks: one task each, not one per chunk
        dst = out.host
        for i in part:
            decode_host_into(chain, specs, staged, names, i, dst[d_off[i] : d_off[i] + n_of[i]])

    run = max(1, min(_DECODE_RUN, len(rest) // (4 * threads)))  # a few large chunks: still one task each
    parts = [rest[k : k + run] for k in range(0, len(rest), run)]
    try:
        if len(parts) > 1:
            map_all(some, parts, threads)
        elif parts:
            some(rest)
    except BaseException:
        out.release()
        raise
    return out


def _zstd_in_core(core: Any, staged: Landed, out: Landed, want: np.ndarray, ids: list[int], threads: int) -> list[int]:
    """Decode chunks ``ids`` of ``staged`` (zstd) into their slots of ``out`` in one call of the native core, on
    ``threads`` threads; the ids it did not decode to their size (not zstd as declared, corrupt: for the
    per-chunk path to name)."""
    at = np.asarray(ids, dtype=np.int64)
    table = np.stack([staged.offsets[at], staged.sizes[at], out.offsets[at], want[at]]).astype(np.int64, copy=False)
    got = np.empty(len(ids), dtype=np.int64)
    core.zstd_decompress(staged.host, out.host, table, got, threads=threads)  # a new stack: C-contiguous
    refused: list[int] = at[got != want[at]].tolist()
    return refused


#: Most chunks per task of a host decode: many chunks go to the engine's threads in runs (no task per
#: chunk), at least four runs a thread (balanced).
_DECODE_RUN = 64


def decode_host_into(
    chain: CodecChain, specs: list[ArraySpec], staged: Landed, names: Sequence[str] | None, i: int, dst: np.ndarray
) -> None:
    """Decode window chunk ``i``'s bytes-to-bytes stage on the CPU into ``dst`` (its raw size): a zstd chunk of
    one frame, or of several that each declare their size, straight into ``dst``; anything else through zarr's
    codecs, then copied.

    Raises:
        ValueError: the chunk decodes to other than ``dst``'s size (naming it; ``names``: the chunks' keys).
    """
    from zarr.core.buffer.cpu import Buffer as HostBuffer
    from zarr.core.buffer.cpu import numpy_buffer_prototype

    from gdsstore.gpu.decode_split import chunk_frames

    view = staged.view(i)
    assert view is not None
    n = int(dst.nbytes)
    if tuple(chain.bb_formats) == ("zstd",):
        if nvcomp.zstd_content_size(view) == n and _zstd_into(view, dst):
            return
        frames = chunk_frames(view, n) if n else None  # several frames (pzstd, streaming writers)
        if frames is not None and all(
            _zstd_into(view[a : a + m], dst[b : b + d])
            for a, m, b, d in zip(
                frames.offsets.tolist(), frames.sizes.tolist(), frames.decoded_offsets.tolist(), frames.decoded.tolist()
            )
        ):
            return
    hspec = dataclasses.replace(specs[i], prototype=numpy_buffer_prototype())
    buf: Any = HostBuffer.from_array_like(view)
    with _codecs.quiet_records():
        for c in reversed(chain.bb_codecs):  # zarr's SupportsSyncCodec protocol: no public sync call
            buf = c._decode_sync(buf, hspec)
    got = buf.as_numpy_array().view(np.uint8).reshape(-1)
    if got.nbytes != n:
        name = names[i] if names else f"chunk {i} of the window"
        raise ValueError(f"GDSCodecPipeline.read(): {name} decoded to {got.nbytes} bytes, expected {n}")
    dst[:] = got  # copied while the bytes are in this core's cache


def _zstd_into(frame: np.ndarray, dst: np.ndarray) -> bool:
    """Decode a zstd frame that declares ``dst``'s size straight into ``dst`` (no allocation, no copy: faster
    than zarr's codec, a new buffer per chunk then a copy); False where zstd refuses it (zarr's codec then
    decides, and names the error)."""
    import numcodecs.zstd

    try:
        numcodecs.zstd.decompress(frame, dst)
    except (RuntimeError, ValueError):
        return False
    return True


def _check_crc32c(
    dev: Any, staged: Landed, s_off: np.ndarray, s_len: np.ndarray, present: list[int]
) -> None:
    """Each present chunk's trailing crc32c against one GPU kernel launch over all of them.

    Raises:
        ValueError: a chunk too short to hold a checksum, or a mismatch (naming the chunk).
    """
    from gdsstore.gpu.kernels import crc32c_device

    for i in present:
        if s_len[i] < 4:
            raise ValueError(f"GDSCodecPipeline.read(): chunk {i} of {int(s_len[i])} bytes holds no crc32c")
    computed = crc32c_device([dev[int(s_off[i]) : int(s_off[i] + s_len[i]) - 4] for i in present])
    for k, i in enumerate(present):
        a, m = int(s_off[i]), int(s_len[i])
        stored = int(np.frombuffer(staged.host[a + m - 4 : a + m].tobytes(), "<u4")[0])
        if stored != int(computed[k]):
            raise ValueError(
                f"GDSCodecPipeline.read(): crc32c mismatch in chunk {i}: stored {stored:#010x}, "
                f"computed {int(computed[k]):#010x}"
            )


def _payloads(
    fmt: str,
    staged: Landed,
    s_off: np.ndarray,
    s_len: np.ndarray,
    present: list[int],
    want: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """Where each present chunk's nvCOMP payload sits: ``(ok, offsets, lengths, chunks for the CPU)``."""
    pres = np.asarray(present, dtype=np.int64)
    if fmt == "zstd":
        # A zstd chunk is one frame: the payload is the whole slot (no per-chunk parsing).
        return np.ones(len(present), dtype=bool), s_off[pres], s_len[pres], []
    ok = np.zeros(len(present), dtype=bool)
    p_off = np.zeros(len(present), dtype=np.int64)
    p_len = np.zeros(len(present), dtype=np.int64)
    on_cpu: list[int] = []
    for k, i in enumerate(present):
        a, m = int(s_off[i]), int(s_len[i])
        try:
            fr = nvcomp.frame_of(fmt, staged.host[a : a + min(m, 512)], m)
            if fmt == "gzip" and nvcomp.gzip_isize(staged.host[a + m - 4 : a + m]) != int(want[k]) % (
                1 << 32
            ):
                raise ValueError("gzip size mismatch (multi-member?)")
            if fmt == "lz4" and fr.size != int(want[k]):
                raise ValueError("lz4 size mismatch")
        except ValueError:
            on_cpu.append(i)
            continue
        ok[k] = True
        p_off[k], p_len[k] = a + fr.start, fr.stop - fr.start
    return ok, p_off, p_len, on_cpu


def _scratch(nbytes: int) -> Any:
    """A device buffer for decoded bytes (cupy's pool reuses the memory across windows)."""
    cp = _codecs._cupy()
    return cp.empty(max(nbytes, 1), dtype=cp.uint8)


@dataclass(frozen=True)
class _OnDevice:
    """A window's stored chunks on the device: ``dev`` (the staging's copy) holds chunk ``i``'s ``s_len[i]``
    bytes at ``s_off[i]`` (its trailing crc32c already left out); ``staged`` is the host side."""

    dev: Any
    staged: Landed
    specs: list[ArraySpec]
    s_off: np.ndarray
    s_len: np.ndarray


def _nvcomp_decode(fmt: str, w: _OnDevice, raw: Landed) -> tuple[list[int], str | None]:
    """One nvCOMP call for the window's chunks: ``(chunks left for the CPU, failure reason or None)``."""
    dev, staged, specs, s_off, s_len = w.dev, w.staged, w.specs, w.s_off, w.s_len
    pres = staged.present
    present = pres.tolist()
    want = np.array([raw_nbytes(specs[i]) for i in present], dtype=np.int64)
    ok, p_off, p_len, on_cpu = _payloads(fmt, staged, s_off, s_len, present, want)
    ids = pres[ok]
    if not len(ids):
        return on_cpu, None
    sizes = want[ok]
    o_off, total = slot_layout(sizes, nvcomp.OUT_ALIGN)
    outbuf = _scratch(total)
    try:
        nvcomp.decode_batch_into(
            fmt, dev, p_off[ok].tolist(), p_len[ok].tolist(), outbuf, o_off.tolist(), sizes.tolist()
        )
        raw.add(outbuf, ids, o_off, sizes)
    except Exception as exc:
        # A payload nvCOMP refuses or decodes to another size: the CPU codec decides
        # (it raises on corrupt data); the trace names the cause.
        return on_cpu + ids.tolist(), f"nvCOMP failed ({type(exc).__name__})"  # no message: one trace row per cause
    return on_cpu, None


def _to_device_traced(staged: Landed) -> Any:
    t0 = time.perf_counter()
    staged_on_gpu = staged.dev is not None
    dev = staging.to_device(staged)
    if not staged_on_gpu:  # (bytes read through the bounce ring were copied, and traced, by the read)
        _trace.record(
            "h2d",
            "pinned-copy" if staged.pinned is not None else "pageable-copy",
            "one copy per window",
            staged.nbytes,
            time.perf_counter() - t0,
            device=getattr(getattr(dev, "device", None), "id", None),
        )
    return dev


def _blosc_decode(w: _OnDevice, raw: Landed, names: Sequence[str] | None) -> tuple[list[int], str | None]:
    """The window's blosc frames (:func:`gdsstore.gpu.blosc.decode_frames`): ``(chunks left for the
    CPU, why)``.

    Raises:
        ChunkDecodeError: a corrupt or truncated frame, naming its chunk.
    """
    from gdsstore.gpu import blosc

    staged, pres = w.staged, w.staged.present
    want = np.array([raw_nbytes(w.specs[i]) for i in pres.tolist()], dtype=np.int64)

    def where(k: int) -> str:
        i = int(pres[k])
        return f"GDSCodecPipeline.read(): {names[i] if names else f'chunk {i} of the window'}"

    dec = blosc.decode_frames(w.dev, w.s_off[pres], w.s_len[pres], want, host=staged.host, where=where)
    raw.take(dec, pres)
    return pres[dec.absent].tolist(), dec.absent_reason


def _split_decode(
    chain: CodecChain, specs: list[ArraySpec], staged: Landed, raw: Landed, names: Sequence[str] | None
) -> None:
    """The window's zstd chunks decoded by the host's threads and nvCOMP at once
    (:func:`gdsstore.gpu.decode_split.decode_split`), into one device buffer; traced per decoder."""
    from gdsstore.gpu import decode_split

    pres = staged.present
    want = np.array([raw_nbytes(specs[i]) for i in pres.tolist()], dtype=np.int64)

    def into(i: int, dst: np.ndarray) -> None:
        decode_host_into(chain, specs, staged, names, i, dst)

    threads = policy.settings().num_threads
    got = decode_split.decode_split(staged, pres, want, into, threads, to_device=_to_device_traced)
    raw.take(got.decoded, pres)
    run, why = got.run, chain.split_reason or ""
    if run.device:
        nbytes = int(want[run.device].sum())
        _trace.record("decode", "gpu-decode", f"nvCOMP batched zstd, beside the CPU: {why}", nbytes, got.seconds)
    if run.host:
        nbytes = int(want[run.host].sum())
        _trace.record("decode", "cpu-codec", run.device_failed or f"beside nvCOMP: {why}", nbytes, got.seconds)


def decode_on_device(
    chain: CodecChain, specs: list[ArraySpec], staged: Landed, names: Sequence[str] | None = None
) -> Landed:
    """Decode a window's bytes-to-bytes stage on the device: every present chunk's raw (bytes-codec) bytes,
    in the buffers of the decoders that made them (a ``Landed.empty``; ``names``: the chunks' keys, for errors)."""
    raw = Landed.empty(len(specs))
    pres = staged.present
    present = pres.tolist()
    fmt, crc, reason = chain.device_plan()
    cpu_why: str | None = None
    on_cpu: list[int] = list(present) if fmt == "-" else []
    if chain.split_reason is not None and fmt == "zstd" and not crc and present:
        _split_decode(chain, specs, staged, raw, names)  # its staged bytes go to the device when nvCOMP takes some
        return raw
    if fmt != "-" and present:
        dev = _to_device_traced(staged)
        t0 = time.perf_counter()
        s_off = staged.offsets.copy()
        s_len = staged.sizes.copy()
        if crc:
            _check_crc32c(dev, staged, s_off, s_len, present)
            s_len[pres] -= 4
        if fmt is None:
            raw.add(dev, pres, s_off[pres], s_len[pres])
        elif fmt == "blosc":
            on_cpu, cpu_why = _blosc_decode(_OnDevice(dev, staged, specs, s_off, s_len), raw, names)
            raw.hold(dev)
        else:
            on_cpu, failed = _nvcomp_decode(fmt, _OnDevice(dev, staged, specs, s_off, s_len), raw)
            reason = failed or reason
            raw.hold(dev)  # the device staging stays alive until the window is scattered
        if fmt is not None or crc:
            _trace.record(
                "decode",
                "gpu-decode",
                reason if fmt else "crc32c GPU kernel",
                raw.nbytes,
                time.perf_counter() - t0,
            )
    if on_cpu:
        t0 = time.perf_counter()
        host_raw = decode_bb_on_host(chain, specs, staged, sorted(on_cpu), names)
        try:  # one copy for the window's decoded chunks
            ids = host_raw.present
            raw.add(staging.to_device(host_raw), ids, host_raw.offsets[ids], host_raw.sizes[ids])
        finally:
            host_raw.release()
        nbytes = host_raw.nbytes
        why = reason if fmt == "-" or reason.startswith("nvCOMP failed") else "framing nvCOMP cannot take"
        why = cpu_why or why
        _trace.record("decode", "cpu-codec", why, nbytes, time.perf_counter() - t0)
    return raw


def decode_window(
    chain: CodecChain,
    specs: list[ArraySpec],
    staged: Landed,
    device: bool,
    names: Sequence[str] | None = None,
) -> list[NDBuffer | None]:
    """Decode every chunk of a staged window to zarr buffers (``None`` for missing ones): on the CPU
    in the staging pool's threads, or batched on the GPU then viewed by the array codecs."""
    n = len(specs)
    out: list[NDBuffer | None] = [None] * n
    if device:
        raws = decode_on_device(chain, specs, staged, names)
        width = chain.swap_width(specs[0]) if n else 0  # one array: one dtype for the window
        for i in range(n):
            raw = raws.item(i)
            if raw is not None and width:
                raw = swap_bytes(raw, width)
            if raw is not None:
                out[i] = chain.array_part.decode_chunk(
                    specs[i].prototype.buffer.from_array_like(raw), specs[i]
                )
        return out
    t0 = time.perf_counter()
    present = staged.present.tolist()

    def one(i: int) -> None:
        view = staged.view(i)
        assert view is not None
        with _codecs.quiet_records():
            out[i] = chain.transform.decode_chunk(specs[i].prototype.buffer.from_array_like(view), specs[i])

    if len(present) > 1:
        map_all(one, present, policy.settings().num_threads)
    else:
        for i in present:
            one(i)
    if any(f is not None for f in chain.bb_formats):
        nbytes = sum(raw_nbytes(specs[i]) for i in present)
        _trace.record("decode", "cpu-codec", "host buffer", nbytes, time.perf_counter() - t0)
    return out
