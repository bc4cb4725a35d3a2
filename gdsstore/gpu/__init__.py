"""GPU-side pieces: zarr GPU configuration, the batched read pipeline and nvCOMP codecs."""
