"""xarray backend ``engine="gdsstore"``: coordinates and indexes in host memory, data variables on the GPU.

Registered as the ``xarray.backends`` entry point ``gdsstore``::

    ds = xr.open_dataset("s3://bucket/d.zarr", engine="gdsstore")          # lazy, read on access
    ds = xr.open_dataset("/data/d.zarr", engine="gdsstore", chunks={})     # dask, chunk by chunk
    ds["t"].data                  # cupy.ndarray on a GPU machine (numpy elsewhere)
    ds["time"].values             # numpy: coordinates and indexes always live on the host
    ds = xr.open_dataset("/data/d.zarr", engine="gdsstore", chunks={},
                         chunked_array_type=DeviceDaskManager())  # dask, CuPy chunks on a GPU machine

Any store gdsstore opens works (a local path, ``s3://``, ``http(s)://``, ``webhdfs://``, or a
:class:`gdsstore.GDSStore` / zarr store object). Opening and decoding are xarray's own
(``ZarrStore.open_group`` + ``StoreBackendEntrypoint``); this module only chooses, per variable, the
zarr buffer prototype its reads use (:func:`choose_placement`, :func:`prototype_for`) and opens the
arrays under gdsstore's codec pipeline.

Virtual references open too (netCDF4/HDF5 archives, :mod:`gdsstore.archives`): a VirtualiZarr
``ManifestStore``, a :class:`~gdsstore.archives.VirtualStore`, kerchunk references (a dict, a ``.json``
path or URL, a parquet reference directory) and icechunk repositories (``Repository``, ``Session``,
``IcechunkStore``). xarray reads their metadata as for zarr; their data variables read through
:class:`VirtualBackendArray` (one planned, batched read per selection or dask block)::

    ds = xr.open_dataset(manifest_store, engine="gdsstore")               # VirtualiZarr
    ds = xr.open_dataset("refs.json", engine="gdsstore", chunks={})        # kerchunk, dask
    ds = xr.open_dataset(repo.readonly_session("main"), engine="gdsstore") # Icechunk

This module is imported by xarray whenever it lists its engines: it imports nothing heavy at module level.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from gdsstore._optional import require

require("xarray", purpose="gdsstore.xarray_backend")
from xarray.backends.common import BackendEntrypoint  # noqa: E402

from gdsstore import xarray_variables  # noqa: E402
from gdsstore.xarray_variables import (  # noqa: E402
    Placement,
    VirtualBackendArray,
    choose_placement,
    move_to_placement,
    prototype_for,
    settle_placement,
)

if TYPE_CHECKING:
    from xarray import Dataset

# The variables' names (placements, backend arrays, the dask manager) are this module's too (__getattr__).
__all__ = ["GDSStoreBackendEntrypoint", "to_zarr", *xarray_variables.__all__]


def _use_device(device: bool | None) -> bool:
    """``device=None``: the GPU when one is visible; ``True``: the GPU or an error naming the fix."""
    if device is None:
        from gdsstore.engine import cuda

        return cuda.gpu_available()
    if device:
        from gdsstore.gpu.enable import check_gpu

        check_gpu('xr.open_dataset(..., engine="gdsstore", device=True)')
    return bool(device)


def _as_store(target: Any, *, mode: str, storage_options: Mapping[str, Any] | None) -> Any:
    """A path or URL becomes a :class:`gdsstore.GDSStore`; a store object is used as it is."""
    if isinstance(target, str | os.PathLike):
        from gdsstore.adapters.zarr_store import GDSStore

        return GDSStore(os.fspath(target), read_only=mode == "r", storage_options=dict(storage_options or {}))
    if storage_options:
        raise TypeError(f"engine='gdsstore': storage_options={sorted(storage_options)} given with a store "
                        f"object {target!r}; pass them to gdsstore.GDSStore(root, storage_options=...) instead")
    return target


def _is_kerchunk_path(target: Any) -> bool:
    """A kerchunk JSON file (a path or URL ending ``.json``) or a parquet reference directory."""
    if not isinstance(target, str | os.PathLike):
        return False
    text = os.fspath(target)
    if text.lower().endswith(".json"):
        return True
    meta = os.path.join(text, ".zmetadata")
    if "://" in text or not os.path.isfile(meta):
        return False
    import json

    with open(meta) as f:
        return "record_size" in json.load(f)  # fsspec's parquet references; a zarr store's has none


def _virtual_source(target: Any, storage_options: Mapping[str, Any] | None) -> tuple[Any, Any] | None:
    """Virtual references as (a zarr store serving their metadata, their
    :class:`~gdsstore.archives.VirtualGroup`), or None for a zarr store or path.

    Virtual references are a VirtualiZarr ``ManifestStore``, a :class:`~gdsstore.archives.VirtualStore`,
    kerchunk references (a dict, a ``.json`` path or URL, a parquet reference directory) and icechunk
    repositories (a ``Repository``'s ``main`` branch, a ``Session``, an ``IcechunkStore``).
    """
    from gdsstore.archives.icechunk import icechunk_store, is_icechunk

    if is_icechunk(target):
        from gdsstore.archives.reader import open_icechunk

        store = icechunk_store(target)
        return store, open_icechunk(store, storage_options=storage_options)
    if type(target).__name__ == "VirtualStore" and type(target).__module__.startswith("gdsstore."):
        if storage_options:
            raise TypeError(f"engine='gdsstore': storage_options={sorted(storage_options)} given with {target!r}; "
                            "pass them to VirtualStore(source, storage_options=...) instead")
        return target, target.group
    if (type(target).__name__ == "ManifestStore" and hasattr(target, "_group")) or isinstance(target, Mapping) \
            or _is_kerchunk_path(target):
        from gdsstore.archives.store import VirtualStore

        vs = VirtualStore(target, storage_options=storage_options)
        return vs, vs.group
    return None


def _pipeline_config(pipeline: bool) -> Any:
    """zarr config under which arrays open: gdsstore's pipeline and codecs, buffers left as they are."""
    import contextlib

    if not pipeline:
        return contextlib.nullcontext()
    import zarr

    from gdsstore.gpu.enable import config_for, register

    register()
    return zarr.config.set(config_for(gpu=False))


def _placed_zarr_store_class() -> Any:
    """xarray's ``ZarrStore`` whose variables read into the buffer their placement names (built on first
    use: xarray.backends.zarr imports zarr)."""
    global _PLACED_STORE
    if _PLACED_STORE is not None:
        return _PLACED_STORE
    from xarray.backends.zarr import ZarrArrayWrapper, ZarrStore
    from xarray.core import indexing
    from xarray.core.utils import FrozenDict

    class PlacedArrayWrapper(ZarrArrayWrapper):  # type: ignore[misc]
        """xarray's zarr array wrapper, reading with an explicit zarr buffer prototype."""

        __slots__ = ("gdsstore_placement", "prototype")

        def __init__(self, zarr_array: Any, placement: Placement) -> None:
            super().__init__(zarr_array)  # type: ignore[no-untyped-call]
            self.gdsstore_placement = placement  # read by DeviceDaskManager (placement_of)
            self.prototype = prototype_for(placement)

        def _getitem(self, key: Any) -> Any:
            return self._array.get_basic_selection(key, prototype=self.prototype)

        def _oindex(self, key: Any) -> Any:
            return self._array.get_orthogonal_selection(key, prototype=self.prototype)

        def _vindex(self, key: Any) -> Any:
            # zarr's coordinate selection converts with numpy and fails on GPU buffers: points are
            # read into host memory, then copied where the placement says
            return move_to_placement(self._array.get_coordinate_selection(key, prototype=prototype_for("host")),
                           self.gdsstore_placement)

        async def _async_getitem(self, key: Any) -> Any:
            return await self._array._async_array.getitem(key, prototype=self.prototype)

        async def _async_oindex(self, key: Any) -> Any:
            return await self._array._async_array.get_orthogonal_selection(key, prototype=self.prototype)

        async def _async_vindex(self, key: Any) -> Any:
            got = await self._array._async_array.get_coordinate_selection(key, prototype=prototype_for("host"))
            return move_to_placement(got, self.gdsstore_placement)

    class PlacedZarrStore(ZarrStore):  # type: ignore[misc]
        """xarray's ZarrStore with a placement (host or device) per variable."""

        device = False
        mask_and_scale = True
        wrapper_class = PlacedArrayWrapper

        def get_variables(self) -> Any:
            names = list(self.array_keys())
            variables = {name: self.open_store_variable(name) for name in names}  # type: ignore[no-untyped-call]
            placements = choose_placement(
                {name: (tuple(v.dims), v.attrs) for name, v in variables.items()},
                self.get_attrs(), device=self.device)  # type: ignore[no-untyped-call]
            for name, var in variables.items():
                placement = settle_placement(var, placements[name], self.mask_and_scale)
                var.data = indexing.LazilyIndexedArray(self.backend_array(name, var, placement))
                var.encoding["gdsstore_placement"] = placement
            return FrozenDict(variables)

        def backend_array(self, name: str, var: Any, placement: Placement) -> Any:
            """What a variable reads through: zarr's array, into the placement's buffers."""
            return PlacedArrayWrapper(self.members[name], placement)

    _importable(PlacedArrayWrapper, PlacedZarrStore)
    _PLACED_STORE = PlacedZarrStore
    return PlacedZarrStore


def _virtual_zarr_store_class() -> Any:
    """The placed ``ZarrStore`` over virtual references: xarray's zarr machinery reads the metadata (so
    dimensions, attributes and CF decoding are exactly ``engine="zarr"``'s), and each variable's data
    reads through a :class:`VirtualBackendArray` (the archives' reader: one planned batch per selection)."""
    global _VIRTUAL_STORE
    if _VIRTUAL_STORE is not None:
        return _VIRTUAL_STORE

    class VirtualZarrStore(_placed_zarr_store_class()):  # type: ignore[misc]
        """xarray's ZarrStore whose variables read through a :class:`~gdsstore.archives.VirtualGroup`."""

        virtual_group: Any = None

        def backend_array(self, name: str, var: Any, placement: Placement) -> Any:
            prefix = self.zarr_group.path.strip("/")
            path = f"{prefix}/{name}" if prefix else name
            return VirtualBackendArray(self.virtual_group[path], var.dtype, placement)

    _importable(VirtualZarrStore)
    _VIRTUAL_STORE = VirtualZarrStore
    return VirtualZarrStore


def _importable(*classes: type) -> None:
    """Classes built on first use, named as attributes of this module (:func:`__getattr__`), so that
    datasets and dask graphs holding their objects pickle (distributed workers, multiprocessing)."""
    for cls in classes:
        cls.__module__, cls.__qualname__ = __name__, cls.__name__


def __getattr__(name: str) -> Any:
    if name in ("PlacedArrayWrapper", "PlacedZarrStore"):
        placed = _placed_zarr_store_class()
        return placed if name == "PlacedZarrStore" else placed.wrapper_class
    if name == "VirtualZarrStore":
        return _virtual_zarr_store_class()
    if name in xarray_variables.__all__:
        return getattr(xarray_variables, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_VIRTUAL_STORE: Any = None


_PLACED_STORE: Any = None


class GDSStoreBackendEntrypoint(BackendEntrypoint):
    """``xr.open_dataset(..., engine="gdsstore")``: zarr through gdsstore, data variables on the GPU.

    Coordinates and indexes are read into host memory (numpy), data variables into device memory (CuPy)
    when a GPU is visible; without one every variable lands on the host. With ``chunks=`` xarray wraps
    the variables in dask arrays that read through gdsstore; xarray's dask manager turns every chunk into
    numpy, so pass ``chunked_array_type=DeviceDaskManager()`` to keep device chunks CuPy (see
    :class:`DeviceDaskManager`). ``xr.open_mfdataset(paths,
    engine="gdsstore")`` opens each path through this backend.

    Each variable's encoding records ``gdsstore_placement`` (``"device"`` or ``"host"``). A data variable
    whose CF attributes xarray decodes with numpy only (an integer ``_FillValue``, time units, ...) stays
    on the host, and ``gdsstore_placement_reason`` says why (see :func:`device_decodable`).
    """

    description = "Open zarr stores through gdsstore: coordinates on the host, data variables on the GPU"
    url = "https://github.com/gdsstore/gdsstore/blob/main/docs/xarray.md"
    supports_groups = False
    open_dataset_parameters = (
        "filename_or_obj", "mask_and_scale", "decode_times", "concat_characters", "decode_coords",
        "drop_variables", "use_cftime", "decode_timedelta", "group", "mode", "consolidated",
        "storage_options", "zarr_format", "use_zarr_fill_value_as_mask", "device", "pipeline",
    )

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        # never claims a file by its name: zarr's own backend does; ask for gdsstore with engine=
        return False

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        mask_and_scale: bool = True,
        decode_times: bool = True,
        concat_characters: bool = True,
        decode_coords: bool = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: bool | None = None,
        group: str | None = None,
        mode: Literal["r", "r+"] = "r",
        consolidated: bool | None = None,
        storage_options: Mapping[str, Any] | None = None,
        zarr_format: int | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
        device: bool | None = None,
        pipeline: bool = True,
    ) -> Dataset:
        """Open a zarr group as a Dataset; see the class docstring.

        Args:
            filename_or_obj: a local path, a URL (``s3://``, ``http(s)://``, ``webhdfs://``) or a zarr store;
                or virtual references (see the module docstring).
            mask_and_scale, decode_times, concat_characters, decode_coords, drop_variables, use_cftime,
                decode_timedelta, group, mode, consolidated, zarr_format: as for ``engine="zarr"``.
            use_zarr_fill_value_as_mask: mask the values equal to each array's zarr ``fill_value`` (as
                netCDF's ``_FillValue``); ``None``: for zarr format 2 only, as ``xr.open_zarr`` documents.
            storage_options: options of :class:`gdsstore.GDSStore` for a path or URL (credentials, endpoint);
                for virtual references, those of their ``http(s)://`` / ``s3://`` targets.
            device: ``None`` (default) puts data variables on the GPU when one is visible; ``True``
                requires one (error otherwise); ``False`` keeps every variable on the host.
            pipeline: open the arrays under gdsstore's batched codec pipeline and GPU codecs (default).

        Returns:
            The dataset (lazy: each variable reads on first access, or per dask chunk with ``chunks=``).

        Raises:
            gdsstore.errors.MissingOptionalDependencyError: ``device=True`` without CuPy.
            gdsstore.errors.GPUUnavailableError: ``device=True`` without a CUDA device.
        """
        from xarray.backends.common import _normalize_path
        from xarray.backends.store import StoreBackendEntrypoint
        from xarray.core.utils import close_on_error

        use_device = _use_device(device)
        virtual = _virtual_source(filename_or_obj, storage_options)
        if virtual is None:
            store = _as_store(_normalize_path(filename_or_obj), mode=mode, storage_options=storage_options)
            opener = _placed_zarr_store_class()
        else:
            store, virtual_group = virtual
            opener = _virtual_zarr_store_class()
            consolidated = bool(consolidated)  # references hold no consolidated metadata
        with _pipeline_config(pipeline):
            zarr_store = opener.open_group(
                store, group=group, mode=mode, consolidated=consolidated, zarr_format=zarr_format,
                use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask)
        if virtual is not None:
            zarr_store.virtual_group = virtual_group
        zarr_store.device = use_device
        zarr_store.mask_and_scale = mask_and_scale
        with close_on_error(zarr_store):
            return StoreBackendEntrypoint().open_dataset(
                zarr_store, mask_and_scale=mask_and_scale, decode_times=decode_times,
                concat_characters=concat_characters, decode_coords=decode_coords,
                drop_variables=drop_variables, use_cftime=use_cftime, decode_timedelta=decode_timedelta)


def _has_device_data(ds: Dataset) -> bool:
    """Whether a variable is (or, read lazily, will be) device memory: CuPy data, a dask array of CuPy
    chunks, or a variable this backend placed on the device."""
    for var in ds.variables.values():
        data = var._data
        meta = getattr(data, "_meta", None)
        if (hasattr(data, "__cuda_array_interface__") or type(meta).__module__.startswith("cupy")
                or var.encoding.get("gdsstore_placement") == "device"):
            return True
    return False


def to_zarr(ds: Dataset, store: Any, *, storage_options: Mapping[str, Any] | None = None,
            **kwargs: Any) -> Any:
    """``ds.to_zarr`` through gdsstore: a path or URL becomes a :class:`gdsstore.GDSStore`, and the write
    runs under gdsstore's pipeline, with GPU buffers when the dataset holds device (CuPy) data.

    Args:
        ds: the dataset (host or device variables, eager or dask).
        store: a local path, a URL or a zarr store.
        storage_options: options of :class:`gdsstore.GDSStore` for a path or URL.
        **kwargs: passed to :meth:`xarray.Dataset.to_zarr` (``mode``, ``encoding``, ``consolidated``, ...).

    Returns:
        What ``Dataset.to_zarr`` returns (xarray's ZarrStore, or a dask delayed with ``compute=False``).

    Examples:
        >>> import tempfile, numpy as np, xarray as xr
        >>> ds = xr.Dataset({"t": ("x", np.arange(4.0))}, coords={"x": np.arange(4)})
        >>> path = tempfile.mkdtemp() + "/d.zarr"
        >>> _ = to_zarr(ds, path, consolidated=False)
        >>> xr.open_dataset(path, engine="gdsstore", device=False, consolidated=False)["t"].values.tolist()
        [0.0, 1.0, 2.0, 3.0]
    """
    mode = kwargs.get("mode") or "w-"
    target = _as_store(store, mode="r" if mode == "r" else "w", storage_options=storage_options)
    if _has_device_data(ds):
        from gdsstore.gpu.enable import enable_gpu

        with enable_gpu():
            return ds.to_zarr(target, **kwargs)
    with _pipeline_config(True):
        return ds.to_zarr(target, **kwargs)
