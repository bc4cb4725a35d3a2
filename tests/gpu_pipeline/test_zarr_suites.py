"""zarr's own test machinery (``zarr.testing``: its array strategies and its hierarchy state machine), run with
gdsstore's pipeline on (``enable_pipeline()``), over ``GDSStore`` (the engine's batched reads and writes) and
zarr's ``LocalStore`` (the store's own ``get``, awaited on the loop).

The arrays are zarr's random draws: every dtype zarr supports (variable-length strings and bytes included),
v2 and v3, compressors, sharding with each ``subchunk_write_order``, regular and rectilinear chunk grids,
0-d and empty shapes. Each is checked against numpy, the model of the values written, as zarr-python's
``tests/test_properties.py`` and ``tests/test_store/test_stateful.py`` check zarr's own pipeline."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hypothesis.extra.numpy as npst
import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test
from numpy.testing import assert_array_equal
from zarr.storage import LocalStore
from zarr.testing.stateful import ZarrHierarchyStateMachine
from zarr.testing.strategies import arrays, basic_indices, numpy_arrays, orthogonal_indices, zarr_formats

import gdsstore
from gdsstore import GDSStore

_COUNTER = itertools.count()
_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
STORES: dict[str, Callable[[Path], Any]] = {"gds": lambda p: GDSStore(str(p)), "local": LocalStore}


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("zarr-suites")


def _stores(kind: str, root: Path) -> st.SearchStrategy[Any]:
    """A fresh, empty store of ``kind`` for every draw."""
    return st.builds(lambda: STORES[kind](root / f"s{next(_COUNTER)}"))


@pytest.mark.parametrize("kind", sorted(STORES))
@_SETTINGS
@given(data=st.data(), zarr_format=zarr_formats)
def test_array_roundtrip(roots: Path, kind: str, data: st.DataObject, zarr_format: int) -> None:
    with gdsstore.enable_pipeline():
        nparray = data.draw(numpy_arrays())
        zarray = data.draw(
            arrays(stores=_stores(kind, roots), arrays=st.just(nparray), zarr_formats=st.just(zarr_format))
        )
        assert_array_equal(nparray, zarray[:])
        reopened = zarr.open_array(zarray.store_path, mode="r")
    # codecs parsed with the pipeline on are zarr's own objects (xarray compares and writes them back)
    plain = zarr.open_array(zarray.store_path, mode="r")
    assert (reopened.serializer, reopened.compressors, reopened.filters) == (plain.serializer, plain.compressors, plain.filters)


@pytest.mark.parametrize("kind", sorted(STORES))
@_SETTINGS
@given(data=st.data())
def test_basic_indexing(roots: Path, kind: str, data: st.DataObject) -> None:
    with gdsstore.enable_pipeline():
        zarray = data.draw(arrays(stores=_stores(kind, roots)))
        nparray = np.asarray(zarray[...])
        indexer = data.draw(basic_indices(shape=nparray.shape))
        actual = zarray[indexer]
        assert_array_equal(nparray[indexer], actual)

        new_data = data.draw(numpy_arrays(shapes=st.just(np.shape(actual)), dtype=nparray.dtype))
        zarray[indexer] = new_data
        nparray[indexer] = new_data
        assert_array_equal(nparray, zarray[...])


@pytest.mark.parametrize("kind", sorted(STORES))
@_SETTINGS
@given(data=st.data())
def test_orthogonal_and_vectorized_indexing(roots: Path, kind: str, data: st.DataObject) -> None:
    with gdsstore.enable_pipeline():
        # zarr's integer index strategies take no dimension of size 0
        shapes = npst.array_shapes(max_dims=4, min_side=1)
        zarray = data.draw(arrays(stores=_stores(kind, roots), arrays=numpy_arrays(shapes=shapes)))
        nparray = np.asarray(zarray[...])
        zindexer, npindexer = data.draw(orthogonal_indices(shape=nparray.shape))
        actual = zarray.oindex[zindexer]
        assert_array_equal(nparray[npindexer], actual)

        vindexer = data.draw(
            npst.integer_array_indices(shape=nparray.shape, result_shape=npst.array_shapes(min_side=1, max_dims=None))
        )
        assert_array_equal(nparray[vindexer], zarray.vindex[vindexer])

        # repeated indices (-4 and 0 of 4 too): which write wins is not defined; sharded: zarr's own GH2834
        assume(zarray.shards is None)
        assume(all(not isinstance(i, np.ndarray) or i.size == np.unique(i % n).size
                   for i, n in zip(npindexer, nparray.shape)))
        new_data = data.draw(numpy_arrays(shapes=st.just(np.shape(actual)), dtype=nparray.dtype))
        nparray[npindexer] = new_data
        zarray.oindex[zindexer] = new_data
        assert_array_equal(nparray, zarray[...])


class _PipelineHierarchy(ZarrHierarchyStateMachine):  # type: ignore[misc]
    """zarr's hierarchy machine (arrays and groups added, overwritten by basic and orthogonal indexing,
    resized, deleted, listed; each checked against a ``MemoryStore`` model) with the pipeline on."""

    def __init__(self, store: Any) -> None:
        self._pipeline = gdsstore.enable_pipeline()
        super().__init__(store)

    def teardown(self) -> None:
        self._pipeline.__exit__(None, None, None)
        super().teardown()


@pytest.mark.parametrize("kind", ["gds", "local"])
def test_hierarchy_state_machine(tmp_path: Path, kind: str) -> None:
    def machine() -> _PipelineHierarchy:
        root = tmp_path / f"m{next(_COUNTER)}"
        root.mkdir()  # the machine starts by clearing its store, as zarr's fixtures hand it one that exists
        return _PipelineHierarchy(STORES[kind](root))

    run_state_machine_as_test(
        machine, settings=settings(max_examples=10, stateful_step_count=12, deadline=None, suppress_health_check=list(HealthCheck))
    )
