"""The device fast path's arithmetic (views, selections, shard composition, fills), run on the CPU.

On a GPU the pipeline decodes each window's chunks to raw bytes on the device and assembles the
output with one scatter kernel. Here the device steps are replaced by host equivalents (CPU decode,
the kernels' tables run on host memory: tests/scatter_twin.py), so every block the pipeline builds
is checked against zarr's own result for random selections.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scatter_twin import scatter_on_host
from zarr.codecs import BytesCodec, Crc32cCodec, TransposeCodec, ZstdCodec
from zarr.storage import MemoryStore

import gdsstore
from gdsstore.engine.landing import Landed
from gdsstore.gpu import decode as gdecode
from gdsstore.gpu import execute as gexec
from gdsstore.gpu import output as goutput
from gdsstore.gpu import pipeline as gpipe
from gdsstore.gpu import read_shards as gshards

SHAPE = (45, 38)
FILL = 5


@pytest.fixture
def emulated(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"blocks": 0}

    def decode(chain: Any, specs: Any, staged: Any, names: Any = None) -> Any:
        present = staged.present.tolist()
        raws = Landed.empty(len(specs))
        host_raw = gdecode.decode_bb_on_host(chain, specs, staged, present)
        ids = host_raw.present
        raws.add(host_raw.host.copy(), ids, host_raw.offsets[ids], host_raw.sizes[ids])
        host_raw.release()
        return raws

    def scatter(blocks: Any, itemsize: int, fill: bytes) -> str:
        calls["blocks"] += sum(scatter_on_host(blocks, itemsize, fill))
        return "gpu-kernel"

    for module in (gexec, gshards):
        monkeypatch.setattr(module, "is_device_spec", lambda spec: True)
    monkeypatch.setattr(gdecode, "decode_on_device", decode)
    for module in (goutput, gshards):  # decode_scatter's, and the shard fills'
        monkeypatch.setattr(module, "scatter", scatter)
        monkeypatch.setattr(module, "sync", lambda: None)
    return calls


CONFIGS: dict[str, dict[str, Any]] = {
    "plain": {"compressors": None},
    "zstd+crc32c": {"compressors": [ZstdCodec(level=1), Crc32cCodec()]},
    "transpose": {"filters": [TransposeCodec(order=(1, 0))], "compressors": [ZstdCodec()]},
    "sharded": {"shards": (18, 20), "compressors": [ZstdCodec()]},
    "sharded-transpose": {"shards": (18, 20), "filters": [TransposeCodec(order=(1, 0))], "compressors": None},
}


def _make(kw: dict[str, Any], dtype: str) -> tuple[Any, np.ndarray]:
    store = MemoryStore()
    z = zarr.create_array(store, shape=SHAPE, chunks=(9, 10), dtype=dtype, fill_value=FILL, **kw)
    ref = np.full(SHAPE, FILL, dtype=dtype)
    block = (np.arange(30 * 25).reshape(30, 25) % 97).astype(dtype)
    ref[2:32, 3:28] = block
    z[2:32, 3:28] = block
    return store, ref


def _slice(n: int) -> st.SearchStrategy[slice]:
    b = st.none() | st.integers(-n, n)
    return st.builds(slice, b, b, st.none() | st.integers(1, 5))


@pytest.mark.parametrize("dtype", ["f4", "i2", "u1", "f8"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sel=st.tuples(_slice(SHAPE[0]), _slice(SHAPE[1])))
def test_fast_path_equals_zarr(emulated: dict[str, int], name: str, dtype: str, sel: Any) -> None:
    store, ref = _make(CONFIGS[name], dtype)
    before = emulated["blocks"]
    with gdsstore.enable_gpu(buffers=False):
        got = zarr.open_array(store, mode="r")[sel]
    np.testing.assert_array_equal(got, ref[sel])
    if got.size:
        assert emulated["blocks"] > before  # the fast path ran


def _spec(shape: tuple[int, ...]) -> Any:
    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.dtype import Float32

    return ArraySpec(
        shape=shape,
        dtype=Float32(),
        fill_value=0.0,
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )


def test_fast_path_off_for_int_index_and_big_endian() -> None:
    chain = gdecode.CodecChain.of(gpipe.GDSCodecPipeline.from_codecs([BytesCodec()]).codecs)
    spec = _spec((4, 4))
    sl = (slice(0, 4, 1), slice(0, 4, 1))
    assert chain.view_layout(spec) is not None
    assert goutput.kernel_scatter_ok([(None, spec, sl, sl, True)], ())
    assert not goutput.kernel_scatter_ok([(None, spec, sl, sl, True)], (0,))  # a dropped axis
    assert not goutput.kernel_scatter_ok([(None, spec, (1, slice(0, 4, 1)), sl, True)], ())
    big = gdecode.CodecChain.of(gpipe.GDSCodecPipeline.from_codecs([BytesCodec(endian="big")]).codecs)
    assert big.view_layout(spec) is None  # a byte swap is not a view


def test_view_layout_of_transpose() -> None:
    pipe = gpipe.GDSCodecPipeline.from_codecs([TransposeCodec(order=(1, 0)), BytesCodec()])
    chain = gdecode.CodecChain.of(pipe.codecs)
    spec = _spec((3, 5))
    # stored as the (5, 3) transpose in C order: element (i, j) sits at (j * 3 + i) * 4
    assert chain.view_layout(spec) == ((3, 5), (4, 12))


@pytest.mark.parametrize("name", ["sharded", "sharded-transpose"])
@pytest.mark.parametrize("kind", ["memory", "gds"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sel=st.tuples(_slice(SHAPE[0]), _slice(SHAPE[1])))
def test_vectorized_shard_plan_equals_zarr(
    emulated: dict[str, int], tmp_path_factory: pytest.TempPathFactory, name: str, kind: str, sel: Any
) -> None:
    """Slice selections of sharded arrays take the numpy-planned path (engine: exact ranges)."""
    store: Any = MemoryStore() if kind == "memory" else gdsstore.GDSStore(str(tmp_path_factory.mktemp("s")))
    z = zarr.create_array(store, shape=SHAPE, chunks=(9, 10), dtype="f4", fill_value=FILL, **CONFIGS[name])
    ref = np.full(SHAPE, FILL, dtype="f4")
    block = (np.arange(30 * 25).reshape(30, 25) % 97).astype("f4")
    block[:9, :10] = FILL  # an inner chunk equal to the fill value: not stored in its shard
    ref[2:32, 3:28] = block
    z[2:32, 3:28] = block
    planned = {"n": 0}
    orig = gshards._scatter_shards

    def spy(*args: Any) -> Any:
        planned["n"] += 1
        return orig(*args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gshards, "_scatter_shards", spy)
        with gdsstore.enable_gpu(buffers=False):
            got = zarr.open_array(store, mode="r")[sel]
    np.testing.assert_array_equal(got, ref[sel])
    if got.size:
        assert planned["n"] == 1  # every slice selection, any step, takes the vectorized plan


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_other_selections_on_the_device_path_equal_zarr(emulated: dict[str, int], name: str) -> None:
    """Integer, orthogonal and coordinate selections: device decode, then zarr's scatter (no kernel)."""
    store, ref = _make(CONFIGS[name], "f4")
    rows = np.array([0, 3, 17, 18, 40])
    cols = np.array([1, 2, 20, 37])
    before = emulated["blocks"]
    with gdsstore.enable_gpu(buffers=False):
        z = zarr.open_array(store, mode="r")
        np.testing.assert_array_equal(z[7], ref[7])
        np.testing.assert_array_equal(z[3:30, 11], ref[3:30, 11])
        np.testing.assert_array_equal(z.oindex[rows, cols], ref[np.ix_(rows, cols)])
        np.testing.assert_array_equal(z.vindex[rows[:4], cols], ref[rows[:4], cols])
    assert emulated["blocks"] == before  # none of these fit the kernel's geometry
