"""The CUDA driver calls of the bounce loop: absent without a driver, errors that name the call."""

from __future__ import annotations

import ctypes.util

import pytest

from gdsstore.engine import cuda


@pytest.mark.skipif(ctypes.util.find_library("cuda") is not None, reason="this machine has a CUDA driver")
def test_no_driver_no_calls() -> None:
    assert cuda.driver_calls() is None


def test_check_driver_names_the_call() -> None:
    cuda.check_driver(0, "cuEventRecord")  # success: nothing raised
    with pytest.raises(RuntimeError, match=r"cuMemcpyHtoDAsync failed with CUDA driver error 700"):
        cuda.check_driver(700, "cuMemcpyHtoDAsync")
