"""The variables of the xarray backend ``engine="gdsstore"``: where each one's reads land, and what
they read through.

- :func:`choose_placement`: coordinates on the host, data variables on the GPU when one is used; a
  variable whose CF attributes xarray decodes with numpy only stays on the host
  (:func:`device_decodable`);
- :func:`prototype_for`: the zarr buffer prototype of a placement;
- :class:`VirtualBackendArray`: a variable of virtual references, read by the archives' reader;
- :class:`DeviceDaskManager` and :func:`read_block`: dask blocks that stay where their placement says.

:mod:`gdsstore.xarray_backend` opens the stores and builds the variables with these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from gdsstore._optional import require

require("xarray", purpose="gdsstore.xarray_backend")
from xarray.backends.common import BackendArray  # noqa: E402
from xarray.namedarray.daskmanager import DaskManager  # noqa: E402  (xarray imports it anyway; no dask here)

if TYPE_CHECKING:
    from zarr.core.buffer import BufferPrototype

__all__ = [
    "DeviceDaskManager",
    "Placement",
    "VirtualBackendArray",
    "choose_placement",
    "coordinate_names",
    "device_decodable",
    "placement_of",
    "prototype_for",
    "read_block",
]

#: Where a variable's reads land.
Placement = Literal["device", "host"]


def coordinate_names(variables: Mapping[str, tuple[tuple[str, ...], Mapping[str, Any]]],
                     group_attrs: Mapping[str, Any] | None = None) -> set[str]:
    """Names of the variables xarray will make coordinates, from metadata alone (nothing is read).

    A variable is a coordinate when it is one-dimensional along a dimension of its own name (an index),
    or when it is named in a CF ``coordinates`` attribute of the group or of any variable.

    Args:
        variables: name → (dimension names, attributes) for every array of the group.
        group_attrs: the group's attributes.

    Returns:
        The coordinate names.

    Examples:
        >>> sorted(coordinate_names({"time": (("time",), {}), "t": (("time",), {"coordinates": "lat"}),
        ...                          "lat": (("time",), {})}))
        ['lat', 'time']
    """
    names = {name for name, (dims, _) in variables.items() if tuple(dims) == (name,)}
    listed = [str((group_attrs or {}).get("coordinates", ""))]
    listed += [str(attrs.get("coordinates", "")) for _, attrs in variables.values()]
    names |= {n for text in listed for n in text.split() if n in variables}
    return names


def choose_placement(variables: Mapping[str, tuple[tuple[str, ...], Mapping[str, Any]]],
                     group_attrs: Mapping[str, Any] | None = None, *, device: bool) -> dict[str, Placement]:
    """Where each variable's reads land: coordinates on the host always, data variables on the device
    when ``device`` (a GPU is used), else on the host.

    Args:
        variables: name → (dimension names, attributes), as for :func:`coordinate_names`.
        group_attrs: the group's attributes.
        device: whether data variables go to the GPU.

    Returns:
        name → ``"device"`` or ``"host"``.

    Examples:
        >>> v = {"x": (("x",), {}), "t": (("x",), {})}
        >>> choose_placement(v, device=True)
        {'x': 'host', 't': 'device'}
        >>> choose_placement(v, device=False)
        {'x': 'host', 't': 'host'}
    """
    coords = coordinate_names(variables, group_attrs)
    return {name: "device" if device and name not in coords else "host" for name in variables}


# CF attributes whose decoding xarray does with numpy only (``np.array(data)``): on a CuPy array it raises.
_HOST_ONLY_CF = ("_FillValue", "missing_value", "_Unsigned", "calendar")


def _is_nan(value: Any) -> bool:
    try:
        return bool(value != value)  # NaN is the only value unequal to itself
    except (TypeError, ValueError):
        return False


def device_decodable(attrs: Mapping[str, Any], dtype: Any) -> str | None:
    """Why a variable cannot be decoded on the device by xarray (``None``: it can).

    xarray decodes CF masks (``_FillValue``, ``missing_value``), unsigned views and times with numpy
    calls that refuse CuPy arrays; scale and offset work on any array. A NaN fill value of a float
    variable masks nothing (NaN stays NaN), so it does not keep the variable on the host.

    Args:
        attrs: the variable's attributes as stored.
        dtype: its stored dtype.

    Returns:
        ``None``, or the reason the variable stays on the host.

    Examples:
        >>> import numpy as np
        >>> device_decodable({"_FillValue": np.nan, "units": "K"}, np.dtype("f4")) is None
        True
        >>> device_decodable({"_FillValue": -9999}, np.dtype("i2"))
        'CF attribute _FillValue=-9999 is decoded by xarray with numpy'
        >>> device_decodable({"units": "days since 2000-01-01"}, np.dtype("i8"))
        "CF time units 'days since 2000-01-01' are decoded by xarray with numpy"
    """
    import numpy as np

    for key in _HOST_ONLY_CF:
        if key not in attrs:
            continue
        value = attrs[key]
        if key in ("_FillValue", "missing_value") and np.dtype(dtype).kind == "f" and _is_nan(value):
            continue
        return f"CF attribute {key}={value!r} is decoded by xarray with numpy"
    units = attrs.get("units")
    if isinstance(units, str) and " since " in units:
        return f"CF time units {units!r} are decoded by xarray with numpy"
    return None


def prototype_for(placement: Placement) -> BufferPrototype:
    """zarr's buffer prototype for a placement: ``zarr.core.buffer.gpu.buffer_prototype`` on the device,
    zarr's CPU prototype on the host (whatever the global zarr config says).

    Examples:
        >>> prototype_for("host").buffer.__module__
        'zarr.core.buffer.cpu'
        >>> prototype_for("device").buffer.__module__
        'zarr.core.buffer.gpu'
    """
    if placement == "device":
        from zarr.core.buffer import gpu

        return gpu.buffer_prototype
    from zarr.core.buffer import cpu

    return cpu.buffer_prototype


class VirtualBackendArray(BackendArray):
    """A variable of virtual references (a :class:`~gdsstore.archives.VirtualArray`) as xarray's lazy
    backend array: each basic selection xarray asks for is one read of the archives' reader (the chunks'
    triples planned together, one batched read, decoded as a batch), on the GPU for ``"device"``.

    Why not zarr's array over :class:`~gdsstore.archives.VirtualStore` (xarray's zarr route, which this
    backend keeps for the metadata only): zarr decodes and scatters chunk by chunk, and on 64 KiB chunks
    that read was about 2.5x slower on the host (docs/archives.md, "xarray").

    Args:
        array: the variable's references.
        dtype: the dtype xarray gave the variable (the stored one, in native byte order).
        placement: ``"device"`` (CuPy results, decoded on the GPU) or ``"host"`` (numpy).
    """

    __slots__ = ("array", "dtype", "gdsstore_placement", "shape")

    def __init__(self, array: Any, dtype: Any, placement: Placement) -> None:
        import numpy as np

        self.array = array
        self.shape = tuple(array.shape)
        self.dtype = np.dtype(dtype)
        self.gdsstore_placement = placement  # read by DeviceDaskManager (placement_of)

    def __getitem__(self, key: Any) -> Any:
        from xarray.core import indexing

        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC, self._read)

    async def async_getitem(self, key: Any) -> Any:
        import asyncio

        return await asyncio.to_thread(self.__getitem__, key)  # the read blocks: off the event loop

    def _read(self, key: tuple[Any, ...]) -> Any:
        out = self.array.read(key, device=self.gdsstore_placement == "device")
        return out if out.dtype == self.dtype else out.astype(self.dtype)




def move_to_placement(host: Any, placement: Placement) -> Any:
    """A host array where its placement says (a device copy for ``"device"``)."""
    if placement != "device":
        return host
    from gdsstore.engine import cuda

    cp = cuda.cupy_or_none()
    assert cp is not None  # a device placement is only chosen where CuPy is
    return cp.asarray(host)


#: CF attributes xarray decodes only with ``mask_and_scale`` (its mask, unsigned and scale coders).
_MASK_CF = ("_FillValue", "missing_value", "_Unsigned")


def settle_placement(var: Any, placement: Placement, mask_and_scale: bool) -> Placement:
    """A variable's placement once its CF attributes are seen: the host where xarray decodes them with
    numpy only (the reason in the encoding); on the device a NaN fill value leaves the attributes."""
    attrs = var.attrs if mask_and_scale else {k: v for k, v in var.attrs.items() if k not in _MASK_CF}
    reason = device_decodable(attrs, var.dtype) if placement == "device" else None
    if reason is not None:
        var.encoding["gdsstore_placement_reason"] = reason
        return "host"
    if placement == "device" and mask_and_scale:
        _drop_nan_fill(var)
    return placement


def _drop_nan_fill(var: Any) -> None:
    """A NaN fill of a float variable masks nothing: keep it in the encoding (written back as it was),
    not in the attributes, so that xarray's numpy-only mask decoding never runs on device data."""
    for key in ("_FillValue", "missing_value"):
        if key in var.attrs:
            var.encoding[key] = var.attrs.pop(key)


def placement_of(data: Any) -> Placement:
    """Where the reads of a (possibly wrapped) backend array land: the placement of the
    :class:`PlacedArrayWrapper <_placed_zarr_store_class>` under xarray's lazy wrappers, ``"host"`` when there is none.

    Examples:
        >>> import numpy as np
        >>> placement_of(np.arange(3))
        'host'
    """
    node = data
    for _ in range(64):  # xarray's wrappers (copy-on-write, lazy indexing, CF decoding) each hold ``.array``
        placement = getattr(node, "gdsstore_placement", None)
        if placement is not None:
            return placement  # type: ignore[no-any-return]
        node = getattr(node, "array", None)
        if node is None:
            break
    return "host"


def read_block(array: Any, key: Any, asarray: bool = True, lock: Any = None) -> Any:
    """dask task of :class:`DeviceDaskManager`: one block of a backend array, read into the memory its
    placement names and returned as that array (CuPy for the device), where dask's own ``getter`` would
    pass xarray's lazy adapter to ``np.asarray`` and copy device blocks to the host.

    Args:
        array: xarray's ``ImplicitToExplicitIndexingAdapter`` over the variable's lazy data.
        key: the block's tuple of slices.
        asarray: accepted for dask's getter signature; blocks are always concrete arrays.
        lock: a lock held around the read (``lock=`` of ``open_dataset``), or None.

    Returns:
        The block: ``cupy.ndarray`` for device-placed variables, ``numpy.ndarray`` otherwise.

    Examples:
        >>> import numpy as np
        >>> from xarray.core.indexing import ImplicitToExplicitIndexingAdapter, LazilyIndexedArray, OuterIndexer
        >>> adapter = ImplicitToExplicitIndexingAdapter(LazilyIndexedArray(np.arange(6)), OuterIndexer)
        >>> read_block(adapter, (slice(1, 4),))
        array([1, 2, 3])
    """
    from xarray.core.indexing import ExplicitlyIndexed, ImplicitToExplicitIndexingAdapter

    if lock:
        lock.acquire()
    try:
        block = array[key]
        if isinstance(block, ExplicitlyIndexed | ImplicitToExplicitIndexingAdapter):
            block = block.get_duck_array()  # type: ignore[no-untyped-call]  # read now, keep its array type
    finally:
        if lock:
            lock.release()
    return block


def _meta(placement: Placement, dtype: Any, ndim: int) -> Any:
    """dask's ``meta`` for blocks read with ``placement``: an empty CuPy array on the device, numpy on the host."""
    import numpy as np

    if placement == "device":
        cp = require("cupy", purpose="DeviceDaskManager.from_array (a device-placed variable)")
        return cp.empty((0,) * ndim, dtype=dtype)
    return np.empty((0,) * ndim, dtype=dtype)


class DeviceDaskManager(DaskManager):
    """xarray's dask chunk manager, except that the blocks of gdsstore's device-placed variables stay
    CuPy arrays and dask's ``meta`` says so.

    Pass an instance as ``chunked_array_type`` when opening with ``chunks=`` (or to ``Dataset.chunk``)::

        ds = xr.open_dataset(path, engine="gdsstore", chunks={}, chunked_array_type=DeviceDaskManager())

    Without it, xarray (up to at least 2026.9) builds the dask arrays of every backend with
    ``meta=np.ndarray`` and dask's ``getter`` converts each block with ``np.asarray``: device reads are
    copied to the host, block by block. This manager builds them with :func:`read_block` and a CuPy
    ``meta`` for device-placed variables (:func:`placement_of`); host variables get numpy blocks as before.
    Arrays that are not backend arrays (numpy, CuPy, dask) are chunked exactly as by xarray's manager.

    It is not registered under ``xarray.chunkmanagers``: a second registered manager recognising dask
    arrays would make xarray refuse every dask array ("Multiple ChunkManagers recognise type").
    """

    def from_array(self, data: Any, chunks: Any, **kwargs: Any) -> Any:
        # docstring inherited
        from xarray.core.indexing import ImplicitToExplicitIndexingAdapter

        if not isinstance(data, ImplicitToExplicitIndexingAdapter):
            return super().from_array(data, chunks, **kwargs)
        import dask.array as da

        kwargs["meta"] = _meta(placement_of(data), data.dtype, data.ndim)
        kwargs["getitem"] = read_block
        if isinstance(chunks, tuple) and "auto" in chunks and any(s == 0 for s in data.shape):
            chunks = data.shape  # as xarray's manager does: dask cannot auto-chunk an empty axis
        return da.from_array(data, chunks, **kwargs)  # type: ignore[no-untyped-call]
