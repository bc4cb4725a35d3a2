"""Host reads of chunks whose decoded bytes view as the array (``bytes``, ``transpose``, zstd over them): every
byte equal to numpy's per-chunk placement for random grids, selections and missing chunks; a window placed in a
few copies, not one assignment per chunk; zstd decoded with no zarr buffer per chunk; and the native core's
``slice_table`` equal to Python's ``slice.indices``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zarr.codecs import TransposeCodec, ZstdCodec
from zarr.core.buffer.cpu import NDBuffer

import gdsstore
from gdsstore.engine import native
from gdsstore.gpu import codecs as gcodecs

DTYPES = ["u1", "i2", "<f4", "f8", "u8"]


def _reference(data: np.ndarray, chunks: tuple[int, ...], gone: set[tuple[int, ...]], fill: Any) -> np.ndarray:
    """``data`` as zarr stores it with the chunks ``gone`` deleted: those blocks the fill value, chunk by chunk."""
    ref = data.copy()
    for idx in gone:
        ref[tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))] = fill
    return ref


@st.composite
def _arrays(draw: st.DrawFn) -> dict[str, Any]:
    nd = draw(st.integers(1, 3))
    chunks = tuple(draw(st.lists(st.integers(1, 5), min_size=nd, max_size=nd)))
    shape = tuple(draw(st.integers(1, 3 * c + 2)) for c in chunks)  # partial edge chunks too
    sel = tuple(
        slice(draw(st.integers(0, n - 1)), draw(st.integers(0, n + 1)), draw(st.integers(1, 3))) for n in shape
    )
    grid = [-(-n // c) for n, c in zip(shape, chunks)]
    cells = [tuple(int(x) for x in np.unravel_index(i, grid)) for i in range(int(np.prod(grid)))]
    gone = draw(st.sets(st.sampled_from(cells), max_size=len(cells)))
    order = draw(st.sampled_from(["C", "F"]))
    transpose = tuple(draw(st.permutations(range(nd)))) if draw(st.booleans()) else None
    return {
        "shape": shape, "chunks": chunks, "sel": sel, "gone": gone, "order": order, "transpose": transpose,
        "dtype": draw(st.sampled_from(DTYPES)), "zstd": draw(st.booleans()), "seed": draw(st.integers(0, 99)),
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_arrays())
def test_host_reads_equal_numpys_per_chunk_placement(tmp_path_factory: pytest.TempPathFactory,
                                                     case: dict[str, Any]) -> None:
    root = tmp_path_factory.mktemp("a")
    dt = np.dtype(case["dtype"])
    rng = np.random.default_rng(case["seed"])
    # random bytes: NaN payloads and every bit pattern must come back as stored
    data = np.frombuffer(rng.bytes(int(np.prod(case["shape"])) * dt.itemsize), dt).reshape(case["shape"]).copy()
    fill = np.frombuffer(rng.bytes(dt.itemsize), dt)[0]
    serializer: Any = "auto"
    filters: Any = [TransposeCodec(order=case["transpose"])] if case["transpose"] else "auto"
    z = zarr.create_array(
        gdsstore.GDSStore(str(root)), shape=case["shape"], chunks=case["chunks"], dtype=dt, fill_value=fill,
        compressors=[ZstdCodec(level=1)] if case["zstd"] else None, serializer=serializer, filters=filters,
        config={"order": case["order"], "write_empty_chunks": True},
    )
    z[...] = data
    for idx in case["gone"]:
        os.remove(root / "c" / "/".join(map(str, idx)))
    ref = _reference(data, case["chunks"], case["gone"], fill)
    with gdsstore.enable_pipeline():
        ours = zarr.open_array(gdsstore.GDSStore(str(root)), mode="r", config={"order": case["order"]})
        got = ours[case["sel"]]
    want = ref[case["sel"]]
    assert got.shape == want.shape
    assert got.tobytes(order="C") == np.ascontiguousarray(want).tobytes()


class _CountedOut(np.ndarray):
    """An output array that counts the assignments made into it."""

    assignments = 0

    def __setitem__(self, key: Any, value: Any) -> None:
        type(self).assignments += 1
        super().__setitem__(key, value)


@pytest.mark.parametrize("compressors", [None, [ZstdCodec(level=1)]], ids=["raw", "zstd"])
def test_a_window_is_placed_in_a_copy_per_row_of_chunks_not_per_chunk(tmp_path: Path, compressors: Any) -> None:
    data = np.arange(64 * 48, dtype="f4").reshape(64, 48)
    z = zarr.create_array(gdsstore.GDSStore(str(tmp_path)), shape=data.shape, chunks=(8, 6), dtype="f4",
                          compressors=compressors)
    z[...] = data
    os.remove(tmp_path / "c" / "2" / "3")  # a missing chunk: the fill value, by one assignment
    want = data.copy()
    want[16:24, 18:24] = 0
    with gdsstore.enable_pipeline():
        a = zarr.open_array(gdsstore.GDSStore(str(tmp_path)), mode="r")
        out = np.zeros(data.shape, "f4").view(_CountedOut)
        _CountedOut.assignments = 0
        a.get_basic_selection(..., out=NDBuffer(out))
    np.testing.assert_array_equal(np.asarray(out), want)
    # 64 chunks: one assignment each before; now the missing chunk's fill, the rest by views of ``out``
    assert _CountedOut.assignments == 1


def test_zstd_chunks_of_a_host_read_decode_with_no_zarr_codec_call_per_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = np.arange(32 * 32, dtype="i4").reshape(32, 32)
    z = zarr.create_array(gdsstore.GDSStore(str(tmp_path)), shape=data.shape, chunks=(4, 8), dtype="i4",
                          compressors=[ZstdCodec(level=1)])
    z[...] = data
    calls = [0]
    decode_many = gcodecs.GPUBytesCodec._decode_many

    def counted(self: Any, bufs: Any, specs: Any) -> Any:
        calls[0] += 1
        return decode_many(self, bufs, specs)

    monkeypatch.setattr(gcodecs.GPUBytesCodec, "_decode_many", counted)
    with gdsstore.enable_pipeline(), gdsstore.trace() as t:
        got = zarr.open_array(gdsstore.GDSStore(str(tmp_path)), mode="r")[...]
    np.testing.assert_array_equal(got, data)
    assert calls[0] == 0  # before: one call per chunk (32), through zarr's codecs
    assert t.by_reason()[("decode", "cpu-codec", "host buffer")]["bytes"] == data.nbytes


slices = st.builds(
    slice,
    st.none() | st.integers(-30, 30),
    st.none() | st.integers(-30, 30),
    st.none() | st.integers(-5, 5).filter(bool),
)


@given(sels=st.lists(st.tuples(slices, slices), max_size=20), shape=st.tuples(st.integers(0, 25), st.integers(0, 25)))
def test_slice_table_resolves_slices_as_python_does(sels: list[tuple[slice, slice]], shape: tuple[int, int]) -> None:
    core = native.load()
    assert core is not None
    got = np.frombuffer(core.slice_table(sels, list(shape)), np.int64).reshape(len(sels), 2, 3)
    for row, sel in zip(got.tolist(), sels):
        for (start, count, step), sl, n in zip(row, sel, shape):
            a, b, s = sl.indices(n)
            assert (start, step) == (a, s)
            assert count == len(range(a, b, s))


def test_slice_table_names_a_selection_that_is_not_slices() -> None:
    core = native.load()
    assert core is not None
    with pytest.raises(TypeError, match="selection 1 is a list, not a tuple of slices"):
        core.slice_table([(slice(0, 1),), [slice(0, 1)]], [4])
    with pytest.raises(TypeError, match="selection 0 has 2 axes, the shape 1"):
        core.slice_table([(slice(0, 1), slice(0, 1))], [4])
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        core.slice_table([(slice(0, 1, 0),)], [4])


def test_compressed_chunks_are_asked_for_as_whole_objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    z = zarr.create_array(gdsstore.GDSStore(str(tmp_path)), shape=(16, 16), chunks=(4, 4), dtype="i2",
                          compressors=[ZstdCodec(level=1)])
    z[...] = 5
    store = gdsstore.GDSStore(str(tmp_path))
    backend = store.backend
    tables: list[Any] = []
    land = backend.land

    def seen(table: Any, *args: Any, **kwargs: Any) -> Any:
        tables.append(table)
        return land(table, *args, **kwargs)

    monkeypatch.setattr(backend, "land", seen)
    with gdsstore.enable_pipeline():
        np.testing.assert_array_equal(zarr.open_array(store, mode="r")[...], np.full((16, 16), 5, "i2"))
    chunk_tables = [t for t in tables if len(t.keys) == 16]
    assert len(chunk_tables) == 1
    assert chunk_tables[0].starts is None  # whole objects: before, a range from 0 per chunk


def test_a_batch_of_one_stores_paths_asks_one_getter_for_its_backend(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    from zarr.storage import StorePath

    from gdsstore.gpu import fetch

    store = gdsstore.GDSStore(str(tmp_path))
    asked = [0]
    backend_of = fetch.backend_of

    def counted(getter: Any) -> Any:
        asked[0] += 1
        return backend_of(getter)

    monkeypatch.setattr(fetch, "backend_of", counted)
    got = fetch.fetcher_for([StorePath(store, f"c/{i}") for i in range(100)])
    assert isinstance(got, fetch.EngineFetcher)
    assert asked[0] == 1  # before: once more per getter (101)
    asked[0] = 0
    mixed = [StorePath(store, "c/0"), StorePath(gdsstore.GDSStore(str(tmp_path)), "c/1")]
    assert isinstance(fetch.fetcher_for(mixed), fetch.StoreFetcher)  # two stores: each asked, as before


def _raw_zstd_frame(data: bytes) -> bytes:
    """One zstd frame of one raw block that does not declare its size (numcodecs always declares it)."""
    return bytes.fromhex("28b52ffd") + bytes([0x00, 0x58]) + ((len(data) << 3) | 1).to_bytes(3, "little") + data


def test_zstd_chunks_of_every_framing_decode_in_one_native_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numcodecs.zstd

    from gdsstore.gpu import decode

    data = np.arange(64 * 64, dtype="<u2").reshape(64, 64)
    z = zarr.create_array(gdsstore.GDSStore(str(tmp_path)), shape=data.shape, chunks=(4, 4), dtype="<u2",
                          compressors=[ZstdCodec(level=1)])
    z[...] = data
    raw = data[0:4, 0:4].tobytes()
    (tmp_path / "c" / "0" / "0").write_bytes(numcodecs.zstd.compress(raw[:10], 1) + numcodecs.zstd.compress(raw[10:], 1))
    (tmp_path / "c" / "0" / "1").write_bytes(_raw_zstd_frame(data[0:4, 4:8].tobytes()))  # no size declared
    tasks: list[int] = []
    map_all = decode.map_all

    def counted(fn: Any, items: Any, *args: Any) -> Any:
        tasks.append(len(items))
        return map_all(fn, items, *args)

    monkeypatch.setattr(decode, "map_all", counted)
    with gdsstore.config.set({"num_threads": 2}), gdsstore.enable_pipeline():
        got = zarr.open_array(gdsstore.GDSStore(str(tmp_path)), mode="r")[...]
    np.testing.assert_array_equal(got, data)
    assert tasks == []  # the 256 chunks in the core's one call; before: runs of chunks, four a thread (8 tasks)


@given(chunks=st.lists(st.tuples(st.binary(max_size=3000), st.sampled_from(["one", "two", "no size"])),
                       min_size=1, max_size=10))
@settings(max_examples=60, deadline=None)
def test_cpu_route_decodes_zstd_of_every_framing_in_one_core_call(chunks: list[tuple[bytes, str]]) -> None:
    """A window's zstd chunks, framed as writers frame them (one frame; two concatenated; a frame that declares no
    size), decode on the CPU route to zstd's bytes, all of them in the native core's one call: no chunk goes the
    per-chunk way (counted)."""
    import numcodecs.zstd
    from zarr.codecs import BytesCodec
    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.core.buffer.cpu import numpy_buffer_prototype
    from zarr.core.dtype import UInt8

    from gdsstore.engine import landing
    from gdsstore.gpu import decode as gdecode

    def framed(raw: bytes, how: str) -> bytes:
        if how == "one":
            return bytes(numcodecs.zstd.compress(raw, 1))
        if how == "two":
            half = len(raw) // 2
            return bytes(numcodecs.zstd.compress(raw[:half], 1)) + bytes(numcodecs.zstd.compress(raw[half:], 3))
        return _raw_zstd_frame(raw)

    chain = gdecode.CodecChain.of([BytesCodec(), ZstdCodec(level=1)])
    specs = [ArraySpec(shape=(len(raw),), dtype=UInt8(), fill_value=0, config=ArrayConfig.from_dict({}),
                       prototype=numpy_buffer_prototype()) for raw, _ in chunks]
    staged = landing.from_host_buffers([np.frombuffer(framed(raw, how), "u1") for raw, how in chunks], pinned=False)
    per_chunk = []
    one_chunk = gdecode.decode_host_into
    gdecode.decode_host_into = lambda *a: per_chunk.append(a[4]) or one_chunk(*a)  # type: ignore[assignment]
    try:
        out = gdecode.decode_bb_on_host(chain, specs, staged, list(range(len(chunks))), pinned=False)
    finally:
        gdecode.decode_host_into = one_chunk  # type: ignore[assignment]
    assert [bytes(out.view(i)) for i in range(len(chunks))] == [raw for raw, _ in chunks]
    assert per_chunk == []


def test_a_zstd_chunk_of_another_size_is_named(tmp_path: Path) -> None:
    import numcodecs.zstd

    z = zarr.create_array(gdsstore.GDSStore(str(tmp_path)), shape=(8, 8), chunks=(4, 4), dtype="u1",
                          compressors=[ZstdCodec(level=1)])
    z[...] = 1
    (tmp_path / "c" / "1" / "0").write_bytes(numcodecs.zstd.compress(b"x" * 15, 1))
    with gdsstore.enable_pipeline(), pytest.raises(ValueError, match=r"c/1/0.* decoded to 15 bytes, expected 16"):
        zarr.open_array(gdsstore.GDSStore(str(tmp_path)), mode="r")[...]


def test_a_raw_chunk_of_another_size_is_named(tmp_path: Path) -> None:
    from zarr.storage import LocalStore

    z = zarr.create_array(LocalStore(tmp_path), shape=(8, 8), chunks=(4, 4), dtype="u1", compressors=None)
    z[...] = 1
    (tmp_path / "c" / "1" / "0").write_bytes(b"x" * 10)  # a store that does not check sizes: the placement does
    with gdsstore.enable_pipeline(), pytest.raises(ValueError, match=r"chunk 'c/1/0' is 10 bytes, not the 16 bytes"):
        zarr.open_array(LocalStore(tmp_path), mode="r")[...]


def test_an_output_that_is_not_one_block_of_memory_is_placed_chunk_by_chunk(tmp_path: Path) -> None:
    data = np.arange(16 * 12, dtype="f8").reshape(16, 12)
    z = zarr.create_array(gdsstore.GDSStore(str(tmp_path)), shape=data.shape, chunks=(4, 3), dtype="f8",
                          compressors=None)
    z[...] = data
    base = np.zeros((16, 24), "f8")
    out = base[:, ::2]  # every other column: strided, no run of chunks can be one copy into it
    with gdsstore.enable_pipeline():
        zarr.open_array(gdsstore.GDSStore(str(tmp_path)), mode="r").get_basic_selection(..., out=NDBuffer(out))
    np.testing.assert_array_equal(out, data)
    assert not base[:, 1::2].any()  # nothing written between
