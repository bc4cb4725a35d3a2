"""``gdsstore.enable_gpu()``: zarr's buffers on the GPU, with gdsstore's pipeline and codecs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gdsstore.errors import GPUUnavailableError

if TYPE_CHECKING:
    from donfig.config_obj import ConfigSet

__all__ = ["PIPELINE_PATH", "check_gpu", "config_for", "enable_gpu", "register"]

#: ``codec_pipeline.path`` of :class:`gdsstore.gpu.pipeline.GDSCodecPipeline`.
PIPELINE_PATH = "gdsstore.gpu.pipeline.GDSCodecPipeline"

_registered = False


def check_gpu(call: str = "gdsstore.enable_gpu()") -> None:
    """Fail now, with the fix in the message, where zarr's GPU buffers could not be allocated later.

    Args:
        call: the call to name in the message.

    Raises:
        gdsstore.errors.MissingOptionalDependencyError: CuPy is not installed (the message names
            ``pip install 'gdsstore[cuda13]'`` / ``[cuda12]``).
        gdsstore.errors.GPUUnavailableError: CuPy imports but sees no CUDA device (no GPU, no driver).
    """
    from gdsstore._optional import require

    cupy = require("cupy", purpose=f"{call} (GPU buffers)")
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
        reason = f"{count} devices"
    except Exception as exc:  # no driver: cudaErrorInsufficientDriver / NoDevice
        count, reason = 0, f"{type(exc).__name__}: {exc}"
    if count < 1:
        raise GPUUnavailableError(
            f"{call}: CuPy sees no CUDA device ({reason}). Run it on a machine with a GPU and its driver, "
            "or keep host buffers with enable_gpu(buffers=False)."
        )


def register() -> None:
    """Register gdsstore's codec pipeline and codecs with zarr (idempotent; selects nothing)."""
    global _registered
    if _registered:
        return
    from zarr.registry import register_codec, register_pipeline

    from gdsstore.gpu.codecs import CODECS
    from gdsstore.gpu.pipeline import GDSCodecPipeline

    register_pipeline(GDSCodecPipeline)
    for name, cls in CODECS.items():
        register_codec(name, cls)  # type: ignore[arg-type]
    _registered = True


def config_for(*, gpu: bool = True) -> dict[str, Any]:
    """The zarr settings :func:`enable_gpu` applies; ``gpu=False`` keeps host buffers (the pipeline
    only: batched reads through the engine, CPU decode).

    zarr's ``codecs`` settings stay as they are: arrays keep zarr's own codec objects (equal to the
    ones users made, pickled and compared as zarr's), and the pipeline runs gdsstore's equivalents of
    them (:func:`gdsstore.gpu.codecs.upgrade`)."""
    settings: dict[str, Any] = {"codec_pipeline.path": PIPELINE_PATH}
    if gpu:
        settings["buffer"] = "zarr.buffer.gpu.Buffer"
        settings["ndbuffer"] = "zarr.buffer.gpu.NDBuffer"
    return settings


def enable_gpu(*, buffers: bool = True) -> ConfigSet:
    """Switch zarr to GPU buffers and gdsstore's batched codec pipeline, which runs nvCOMP codecs.

    Returns zarr's ``ConfigSet``: it applies at once and, used as a context manager, undoes itself::

        with gdsstore.enable_gpu():
            z = zarr.open_array(gdsstore.GDSStore("/data/x.zarr"), mode="r")
            x = z[:]        # cupy.ndarray

    Arrays pick their codec pipeline and codecs when they are opened: open them inside (or after)
    ``enable_gpu()``. An array opened before keeps zarr's pipeline and still reads into GPU buffers.

    Without nvCOMP or a GPU the codecs decode on the CPU and the trace says why; ``buffers=False``
    keeps host buffers (batched reads through the engine, CPU decode) on machines without a GPU.

    Raises:
        gdsstore.errors.MissingOptionalDependencyError: ``buffers=True`` and CuPy is not installed.
        gdsstore.errors.GPUUnavailableError: ``buffers=True`` and no CUDA device is visible.
    """
    import zarr

    if buffers:
        check_gpu()
    register()
    change: ConfigSet = zarr.config.set(config_for(gpu=buffers))
    return change
