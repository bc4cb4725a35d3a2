"""CuPy installed, no GPU: a CPU machine where the CUDA extra was installed (laptops, CI, this project's
2-core machine). ``import cupy`` works there and every CUDA call fails; gdsstore must say so where a GPU
is asked for (``enable_gpu()``: ``GPUUnavailableError`` with the fix), keep host I/O working, and the test
suite's GPU checks must skip, not fail.

Each case runs in a child interpreter whose CuPy is, in order of preference:

- the CuPy of ``GDSSTORE_TEST_CUPY_TARGET`` (a ``pip install --target DIR --no-deps cupy-cuda12x fastrlock``:
  the real package beside an environment without it), its devices hidden with ``CUDA_VISIBLE_DEVICES=""``;
- this environment's CuPy, devices hidden the same way (on the GPU machine: CuPy with a driver and no
  visible device; on a CPU machine with CuPy: no driver at all);
- else a stand-in package with CuPy's behaviour on a machine without ``libcuda.so.1`` (recorded from
  cupy-cuda12x 14.2 there): ``import cupy`` works, every runtime call raises CuPy's
  ``cudaErrorInsufficientDriver``, a driver error cannot even be named. Installing the real wheel (about
  100 MB, 290 MB unpacked) for every test run costs more than the case it covers.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# CuPy 14 without libcuda.so.1: the module imports, the runtime fails each call, the driver module cannot load.
_STUB = {
    "cupy/__init__.py": """
        __version__ = "14.2.0"
        from cupy import cuda


        class ndarray:  # no instance can exist without a device
            pass


        def get_default_memory_pool():
            return cuda.default_pool


        def __getattr__(name):  # cupy.empty, cupy.asarray, ...: each allocates on the device
            return cuda.fails
        """,
    "cupy/cuda/__init__.py": """
        import contextlib

        from cupy.cuda import driver, runtime


        def fails(*args, **kwargs):
            raise runtime.CUDARuntimeError()


        class Device:  # made without the device, every use needs it
            def __init__(self, device=None):
                pass

            def __getattr__(self, name):
                return fails


        class MemoryPool(Device):
            def malloc(self, nbytes):
                fails()


        default_pool = MemoryPool()


        def get_allocator():
            return default_pool.malloc


        def using_allocator(allocator=None):
            return contextlib.nullcontext()


        def __getattr__(name):  # Stream, Event, get_current_stream, ...
            return fails
        """,
    "cupy/cuda/runtime.py": """
        class CUDARuntimeError(RuntimeError):
            def __init__(self, status=35):
                self.status = status
                super().__init__(
                    "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")


        memcpyHostToDevice, memcpyDeviceToHost, memcpyDeviceToDevice = 1, 2, 3


        def __getattr__(name):  # getDeviceCount, memGetInfo, hostAlloc, ...
            def call(*args, **kwargs):
                raise CUDARuntimeError()
            return call
        """,
    "cupy/cuda/driver.py": """
        class CUDADriverError(RuntimeError):
            def __init__(self, status):
                raise RuntimeError("CuPy failed to load libcuda.so.1: OSError: libcuda.so.1: cannot open shared "
                                   "object file: No such file or directory")
        """,
}

# What a user of such a machine does; every line is one expectation.
_CHILD = """
import numpy as np
import cupy  # the case: it imports
import zarr

import gdsstore
from gdsstore.engine import cuda

assert cuda.cupy_or_none() is cupy and cuda.device_count() == 0 and not cuda.gpu_available()
try:
    gdsstore.enable_gpu()
except gdsstore.GPUUnavailableError as exc:
    msg = str(exc)
    assert isinstance(exc, RuntimeError), type(exc).__mro__
    assert "gdsstore.enable_gpu(): CuPy sees no CUDA device" in msg, msg
    assert "enable_gpu(buffers=False)" in msg, msg  # the fix
else:
    raise AssertionError("enable_gpu() without a GPU did not raise")
assert zarr.config.get("buffer") == "zarr.buffer.cpu.Buffer"  # nothing was switched before the error
try:
    cuda.check_driver(700, "cuMemcpyHtoDAsync")
except RuntimeError as exc:
    assert str(exc) == "cuMemcpyHtoDAsync failed with CUDA driver error 700", exc
# host I/O and the pipeline on host buffers are untouched by an unusable CuPy
store = gdsstore.GDSStore(__import__("sys").argv[1])
ref = np.arange(40 * 30, dtype="f4").reshape(40, 30)
with gdsstore.enable_gpu(buffers=False):
    z = zarr.create_array(store, shape=ref.shape, chunks=(16, 16), dtype="f4", compressors=[zarr.codecs.ZstdCodec()])
    z[:] = ref
    assert (zarr.open_array(store, mode="r")[:] == ref).all()
print("ok")
"""


def _child_env(tmp_path: Path) -> tuple[dict[str, str], str]:
    """The child's environment (CuPy importable, no GPU visible) and which CuPy it gets."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    paths = [str(ROOT / "tests"), str(ROOT)]
    target = os.environ.get("GDSSTORE_TEST_CUPY_TARGET")
    if target:
        paths.insert(0, target)
        kind = f"CuPy from {target}"
    elif importlib.util.find_spec("cupy") is not None:
        kind = "this environment's CuPy"
    else:
        stub = tmp_path / "stub"
        for name, text in _STUB.items():
            (stub / name).parent.mkdir(parents=True, exist_ok=True)
            (stub / name).write_text(textwrap.dedent(text))
        paths.insert(0, str(stub))
        kind = "a stand-in for CuPy without libcuda"
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env, kind


def test_enable_gpu_names_the_missing_gpu_and_host_io_works(tmp_path: Path) -> None:
    env, kind = _child_env(tmp_path)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "a.zarr")], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), f"{kind}:\n{out.stdout}\n{out.stderr}"


def test_the_suites_gpu_checks_skip(tmp_path: Path) -> None:
    """The CUDA call tests pass, and GPU tests skip with the reason, where CuPy imports and sees no GPU."""
    env, kind = _child_env(tmp_path)
    tests = ["tests/engine/test_cuda_calls.py", "tests/engine/test_gpu_multi.py"]
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", "-rs", *tests]
    out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 0, f"{kind}:\n{text}"
    assert "2 passed" in text and "failed" not in text, text
    assert "cupy found no CUDA device / driver on this machine" in text, text  # conftest's skip reason
