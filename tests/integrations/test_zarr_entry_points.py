"""zarr ``zarr.codecs`` entry points: gdsstore's codecs selectable by name without ``enable_gpu()``, zarr's
own classes kept by default, and no heavy module imported by a plain zarr user. Each check runs in a
fresh interpreter: zarr collects entry points once, when it is imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import declared_entry_points, subprocess_env


def run_python(code: str, entry_points_dir: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-W", "error", "-c", code], env=subprocess_env(entry_points_dir),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_declared_codec_entry_points_name_classes_that_exist() -> None:
    import importlib

    import zarr.registry

    eps = declared_entry_points()["zarr.codecs"]
    assert set(eps) == {
        "zstd", "gzip", "crc32c", "numcodecs.zstd", "numcodecs.lz4",
        "numcodecs.zlib", "numcodecs.shuffle", "numcodecs.fletcher32",  # the archives' HDF5 filters (issue 25)
        "blosc",  # zarr v3's blosc codec, decoded on the GPU (issue 25)
    }
    for name, value in eps.items():
        module, attr = value.split(":")
        cls = getattr(importlib.import_module(module), attr)
        # a subclass of zarr's default class for that name: same metadata, readable by either
        assert issubclass(cls, zarr.registry.get_codec_class(name)), name


SELECT_BY_NAME = """
import json, sys, numpy as np, zarr
assert "gdsstore" not in sys.modules
path, data = sys.argv[1], np.arange(4096, dtype="f4").reshape(64, 64)
names = {"codecs.zstd": "gdsstore.gpu.codecs.ZstdCodec", "codecs.crc32c": "gdsstore.gpu.codecs.Crc32cCodec"}
with zarr.config.set(names):   # no enable_gpu(), no gdsstore import: the entry points register the classes
    z = zarr.create_array(path, shape=data.shape, chunks=(16, 16), dtype="f4",
                          compressors=[{"name": "zstd", "configuration": {"level": 1}}])
    z[:] = data
    r = zarr.open_array(path, mode="r")
    got = r[:]
print(json.dumps({"codec": type(r.compressors[0]).__module__ + "." + type(r.compressors[0]).__name__,
                  "equal": bool((got == data).all())}))
"""


def test_codec_selected_by_name_without_enable_gpu(tmp_path: Path, entry_points_dir: str) -> None:
    out = run_python(SELECT_BY_NAME.replace("sys.argv[1]", repr(str(tmp_path / "a.zarr"))), entry_points_dir)
    assert out == {"codec": "gdsstore.gpu.codecs.ZstdCodec", "equal": True}


PLAIN_ZARR_USER = """
import json, sys, numpy as np, zarr
before = set(sys.modules)  # what zarr itself loads (on a GPU machine: CuPy, through zarr.core.buffer.gpu)
path = sys.argv[1]
z = zarr.create_array(path, shape=(64,), chunks=(16,), dtype="i4", compressors=[zarr.codecs.ZstdCodec()],
                      shards=(32,))
z[:] = np.arange(64)
r = zarr.open_array(path, mode="r")
assert (r[:] == np.arange(64)).all()
heavy = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in {"cupy", "nvidia", "cuda", "botocore", "rmm"})
print(json.dumps({"codec": type(r.compressors[0]).__module__, "heavy": heavy,
                  "gdsstore": sorted(m for m in sys.modules if m.startswith("gdsstore"))}))
"""


def test_plain_zarr_user_keeps_zarr_codecs_and_loads_nothing_heavy(tmp_path: Path, entry_points_dir: str) -> None:
    out = run_python(PLAIN_ZARR_USER.replace("sys.argv[1]", repr(str(tmp_path / "b.zarr"))), entry_points_dir)
    assert out["codec"] == "zarr.codecs.zstd"  # zarr's default config keeps its own class, no warning (-W error)
    assert out["heavy"] == []  # entry points resolve without CuPy, nvCOMP, cuda.bindings, botocore or RMM
    # the first open loads only the entry points' modules and their parents (issue 17: 19 before;
    # the package's exceptions and version load on first use)
    assert out["gdsstore"] == ["gdsstore", "gdsstore.gpu", "gdsstore.gpu.codecs", "gdsstore.gpu.pipeline"], out["gdsstore"]


@pytest.mark.parametrize("group", ["zarr.codecs", "xarray.backends", "zarr.codec_pipeline"])
def test_entry_points_resolve(group: str, entry_points_dir: str) -> None:
    code = f"""
import json
from importlib.metadata import entry_points
eps = [e for e in entry_points(group={group!r}) if e.value.startswith("gdsstore")]
print(json.dumps({{e.name: e.load().__name__ for e in eps}}))
"""
    out = run_python(code, entry_points_dir)
    assert out == {name: value.split(":")[1] for name, value in declared_entry_points()[group].items()}
