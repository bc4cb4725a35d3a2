"""``gdsstore.enable_gpu()``: zarr's buffers on the GPU, with gdsstore's pipeline and codecs."""

from __future__ import annotations

from typing import Any

__all__ = ["enable_gpu"]


def enable_gpu() -> Any:
    """Switch zarr to GPU buffers (and gdsstore's GPU pipeline when available).

    Returns zarr's ``ConfigSet``: it applies at once and, used as a context manager, undoes itself::

        with gdsstore.enable_gpu():
            x = z[:]        # cupy.ndarray
    """
    import zarr

    settings: dict[str, Any] = {
        "buffer": "zarr.buffer.gpu.Buffer",
        "ndbuffer": "zarr.buffer.gpu.NDBuffer",
    }
    return zarr.config.set(settings)
