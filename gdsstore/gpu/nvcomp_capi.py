"""nvCOMP's batched decode through its C API (``libnvcomp.so.6``, loaded with :mod:`ctypes`).

Why not only ``nvidia.nvcomp``'s Python API: its ``Codec.decode`` holds the GIL until the device has
decoded the batch, and the GPU pipeline reads the next window on another thread while a window decodes:
that read stalled, and the decode slowed as the two threads passed the GIL back and forth (the
measurement is in docs/performance.md, "Measurements behind the engine's choices"). A ctypes call
releases the GIL; the batched ``Async`` entry points only enqueue
work on the caller's CUDA stream. Two more reasons: the scratch memory (about three times the decoded
bytes for zstd) comes from CuPy's current allocator, so it is counted in ``gpu.memory_budget`` and
given back with the call's memory instead of staying in a codec object; and no codec object is built
per call.

Only decoding uses this module; the Python API stays for encoding and wherever this library cannot be
loaded (:func:`library` returns ``None``: the caller uses the Python API).
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "BOUND_SCRATCH",
    "EXACT_SCRATCH_BATCH",
    "EXACT_SCRATCH_FROM",
    "CapiError",
    "DecodeTable",
    "decode_into",
    "learn_scratch",
    "library",
    "scratch_ratio",
    "wants_exact_scratch",
]

# Each format's name in nvCOMP's C symbols (nvcompBatched<Name>Decompress...).
_NAME = {"zstd": "Zstd", "gzip": "Deflate", "lz4": "LZ4"}
_SONAME = "libnvcomp.so.6"


#: nvCOMP's bound on its decode scratch (``...DecompressGetTempSize``) over the decoded bytes, for zstd (what
#: nvCOMP returned at every chunk size and count tried: docs/performance.md).
BOUND_SCRATCH = 3.1

#: zstd chunks of at least this many decoded bytes get the scratch nvCOMP computes from their frames
#: (``...DecompressGetTempSizeSync``) instead of its bound: large chunks need far less than the bound, for a
#: parse that is small beside their decode; small chunks save little (docs/performance.md). Deflate and LZ4
#: keep the bound.
EXACT_SCRATCH_FROM = 1 << 20
#: ... and only in calls of at least this many decoded bytes: a process's first such call costs more, which a
#: small read should not pay for scratch it hardly needs. Windows smaller than this are planned with the
#: bound (:func:`gdsstore.gpu.windows.window_bytes`).
EXACT_SCRATCH_BATCH = 64 << 20

#: The largest scratch ratio (exact scratch over decoded bytes) seen per format and chunk size.
_seen: dict[tuple[str, int], float] = {}


class CapiError(RuntimeError):
    """nvCOMP's C API refused a call (its status code in the message)."""


@dataclass(frozen=True)
class DecodeTable:
    """Compressed payloads carved from one device buffer and the slots of another that they decode into:
    payload ``i`` is ``src_sizes[i]`` bytes of ``src`` at ``src_offsets[i]`` and decodes to ``out_sizes[i]``
    bytes of ``out`` at ``out_offsets[i]`` (``src`` and ``out`` are cupy ``uint8`` arrays).

    Raises:
        ValueError: the four lists are not one entry per payload.
    """

    src: Any
    src_offsets: list[int]
    src_sizes: list[int]
    out: Any
    out_offsets: list[int]
    out_sizes: list[int]

    def __post_init__(self) -> None:
        counts = [len(self.src_offsets), len(self.src_sizes), len(self.out_offsets), len(self.out_sizes)]
        if len(set(counts)) > 1:
            raise ValueError(
                f"nvCOMP decode: src_offsets, src_sizes, out_offsets and out_sizes have {counts} entries;"
                " pass one of each per payload"
            )


class _Opts(ctypes.Structure):
    """Every ``nvcompBatched*DecompressOpts_t`` is 64 bytes; all zeros is each one's default (the
    default backend, no bitshuffle, bytes as the data type)."""

    _fields_ = [("raw", ctypes.c_char * 64)]


class _Alignments(ctypes.Structure):
    _fields_ = [("input", ctypes.c_size_t), ("output", ctypes.c_size_t), ("temp", ctypes.c_size_t)]


def _candidates() -> list[str]:
    """The wheel's library first (``nvidia-libnvcomp-cu13``, already loaded by ``nvidia.nvcomp``), then
    the loader's search path."""
    out = []
    try:
        spec = importlib.util.find_spec("nvidia.libnvcomp")
    except (ImportError, ValueError):
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        out.append(os.path.join(loc, "lib64", _SONAME))
    return [*out, _SONAME]


def _declare(lib: ctypes.CDLL) -> None:
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    for name in _NAME.values():
        ts = getattr(lib, f"nvcompBatched{name}DecompressGetTempSize")
        ts.argtypes = [sz, sz, _Opts, ctypes.POINTER(sz), sz, vp]
        ts.restype = ctypes.c_int
        al = getattr(lib, f"nvcompBatched{name}DecompressGetRequiredAlignments")
        al.argtypes = [_Opts, ctypes.POINTER(_Alignments)]
        al.restype = ctypes.c_int
        exact = getattr(lib, f"nvcompBatched{name}DecompressGetTempSizeSync", None)  # nvCOMP >= 5
        if exact is not None:
            exact.argtypes = [vp, vp, sz, sz, ctypes.POINTER(sz), sz, _Opts, vp, vp]
            exact.restype = ctypes.c_int
        run = getattr(lib, f"nvcompBatched{name}DecompressAsync")
        run.argtypes = [vp, vp, vp, vp, sz, vp, sz, vp, _Opts, vp, vp]
        run.restype = ctypes.c_int


@functools.cache
def library() -> ctypes.CDLL | None:
    """``libnvcomp.so.6`` with the decode entry points declared, or ``None`` where it cannot be
    loaded or lacks them (another nvCOMP major version)."""
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            _declare(lib)
        except (OSError, AttributeError):
            continue
        return lib
    return None


@functools.cache
def alignments(fmt: str) -> tuple[int, int, int]:
    """nvCOMP's required alignment of each input, output and scratch buffer for ``fmt``."""
    lib = library()
    assert lib is not None
    req = _Alignments()
    _check(
        getattr(lib, f"nvcompBatched{_NAME[fmt]}DecompressGetRequiredAlignments")(_Opts(), ctypes.byref(req)),
        "GetRequiredAlignments",
        fmt,
    )
    return int(req.input), int(req.output), int(req.temp)


def scratch_ratio(fmt: str | None, chunk_bytes: int) -> float:
    """Decode scratch over decoded bytes that a window of ``fmt`` chunks of ``chunk_bytes`` should plan
    for: the largest exact ratio this process saw for them, else nvCOMP's bound (:data:`BOUND_SCRATCH`).

    Examples:
        >>> scratch_ratio("zstd", 123)
        3.1
    """
    return _seen.get((fmt or "", chunk_bytes), BOUND_SCRATCH)


def wants_exact_scratch(fmt: str, sizes: Sequence[int], exact: bool = False) -> bool:
    """Whether a decode call of payloads of ``sizes`` decoded bytes asks nvCOMP for the scratch their frames
    need (``GetTempSizeSync``) instead of its bound: zstd chunks of :data:`EXACT_SCRATCH_FROM` bytes or more,
    in a call of :data:`EXACT_SCRATCH_BATCH` bytes or more, or in any call where the caller asks (``exact``:
    a read whose windows were planned at the bound learns the ratio for the next read's windows).

    Examples:
        >>> mib = 1 << 20
        >>> wants_exact_scratch("zstd", [4 * mib] * 4), wants_exact_scratch("zstd", [4 * mib] * 4, exact=True)
        (False, True)
        >>> wants_exact_scratch("zstd", [4 * mib] * 16), wants_exact_scratch("lz4", [4 * mib] * 16, exact=True)
        (True, False)
    """
    if fmt != "zstd" or not sizes or max(sizes) < EXACT_SCRATCH_FROM:
        return False
    return exact or sum(sizes) >= EXACT_SCRATCH_BATCH


def _temp_bytes(
    lib: ctypes.CDLL, fmt: str, n: int, sizes: list[int], base: int, row: int, status: Any, stream: Any,
    exact: bool = False,
) -> int:
    """Scratch bytes for one decode call: nvCOMP's bound, or what the frames need where
    :func:`wants_exact_scratch` says (the bound where that call refuses)."""
    name = _NAME[fmt]
    most, total = max(sizes), sum(sizes)
    bound = ctypes.c_size_t(0)
    _check(
        getattr(lib, f"nvcompBatched{name}DecompressGetTempSize")(
            n, most, _Opts(), ctypes.byref(bound), total, ctypes.c_void_p(stream.ptr)
        ),
        "GetTempSize",
        fmt,
    )
    sync = getattr(lib, f"nvcompBatched{name}DecompressGetTempSizeSync", None)
    if sync is None or not wants_exact_scratch(fmt, sizes, exact):
        return int(bound.value)
    need = ctypes.c_size_t(0)
    rc = sync(
        base,
        base + row,
        n,
        most,
        ctypes.byref(need),
        total,
        _Opts(),
        int(status.data.ptr),
        ctypes.c_void_p(stream.ptr),
    )
    if rc != 0 or not 0 < need.value <= bound.value:
        return int(bound.value)  # an unparsable frame fails in the decode itself, with its index
    key = (fmt, most)
    _seen[key] = max(_seen.get(key, 0.0), need.value / max(total, 1))
    return int(need.value)


def _check(status: int, what: str, fmt: str) -> None:
    if status != 0:
        raise CapiError(f"nvCOMP {_NAME[fmt]} {what} returned status {status}")


def _device_meta(table: DecodeTable, decoding: bool) -> Any:
    """The call's arrays as the rows of one device array, in one copy: the payloads' pointers and sizes, and
    where ``decoding``, their decoded sizes and their slots' pointers."""
    import cupy as cp

    n = len(table.src_offsets)
    meta = np.empty((4 if decoding else 2, n), dtype=np.uint64)
    meta[0] = np.uint64(int(table.src.data.ptr)) + np.asarray(table.src_offsets, dtype=np.uint64)
    meta[1] = np.asarray(table.src_sizes, dtype=np.uint64)
    if decoding:
        meta[2] = np.asarray(table.out_sizes, dtype=np.uint64)
        meta[3] = np.uint64(int(table.out.data.ptr)) + np.asarray(table.out_offsets, dtype=np.uint64)
    return cp.asarray(meta)


def learn_scratch(fmt: str, table: DecodeTable) -> float:
    """Ask nvCOMP for the scratch the payloads of ``table`` need (``GetTempSizeSync``: a parse of their frames
    on the device), without decoding them, and keep its ratio to their decoded bytes for window sizing
    (:func:`scratch_ratio`): a read whose chunks nvCOMP decodes none of still plans the next read's windows
    with it. ``table.out`` and ``table.out_offsets`` are not used.

    Returns:
        the ratio (nvCOMP's bound where :func:`wants_exact_scratch` says no, or nvCOMP refused the parse).
    """
    import cupy as cp

    lib = library()
    assert lib is not None
    n = len(table.src_offsets)
    d_meta = _device_meta(table, decoding=False)
    d_status = cp.zeros(n, dtype=cp.int32)
    stream = cp.cuda.get_current_stream()
    base, row = int(d_meta.data.ptr), d_meta.strides[0]
    need = _temp_bytes(lib, fmt, n, table.out_sizes, base, row, d_status, stream, exact=True)
    return need / max(sum(table.out_sizes), 1)


def decode_into(fmt: str, table: DecodeTable, exact_scratch: bool = False) -> np.ndarray:
    """Decode the payloads of ``table`` into their slots on the current CuPy stream, the GIL released while
    the device works; the scratch memory from CuPy's current allocator (``exact_scratch``: as the frames
    need it, whatever the call's size: :func:`wants_exact_scratch`).

    Returns:
        each payload's decoded size (host ``int64``).

    Raises:
        CapiError: nvCOMP refused the call, or a payload failed to decode (its index in the message).
    """
    import cupy as cp

    lib = library()
    assert lib is not None
    n = len(table.src_offsets)
    stream = cp.cuda.get_current_stream()
    d_meta = _device_meta(table, decoding=True)
    d_got = cp.empty(n, dtype=cp.uint64)
    d_status = cp.zeros(n, dtype=cp.int32)
    name = _NAME[fmt]
    row = d_meta.strides[0]
    base = int(d_meta.data.ptr)
    temp_bytes = _temp_bytes(lib, fmt, n, table.out_sizes, base, row, d_status, stream, exact_scratch)
    temp = cp.empty(max(temp_bytes, 1), dtype=cp.uint8)
    _check(
        getattr(lib, f"nvcompBatched{name}DecompressAsync")(
            base,
            base + row,
            base + 2 * row,
            int(d_got.data.ptr),
            n,
            int(temp.data.ptr),
            temp_bytes,
            base + 3 * row,
            _Opts(),
            int(d_status.data.ptr),
            ctypes.c_void_p(stream.ptr),
        ),
        "DecompressAsync",
        fmt,
    )
    stream.synchronize()  # releases the GIL while waiting; the scratch and the arrays stay alive until then
    status = d_status.get()
    bad = np.flatnonzero(status != 0)
    if bad.size:
        i = int(bad[0])
        raise CapiError(f"nvCOMP {name} could not decode payload {i} of {n} (status {int(status[i])})")
    return np.asarray(d_got.get(), dtype=np.int64)
