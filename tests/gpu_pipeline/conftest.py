"""Every compressed read of these tests decodes where they test it: on the GPU (``gpu.host_decode_bytes`` and
``gpu.host_decode_chunks`` 0; their arrays are small, and small reads, or reads of few chunks per nvCOMP call,
would otherwise decode on the CPU). The tests of the CPU route set them themselves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import gdsstore


@pytest.fixture(autouse=True)
def _small_reads_on_the_gpu() -> Iterator[None]:
    with gdsstore.config.set({"gpu.host_decode_bytes": 0, "gpu.host_decode_chunks": 0}):
        yield
