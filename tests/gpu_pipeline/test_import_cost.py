"""The ``zarr.codec_pipeline`` entry point (``gdsstore.gpu.pipeline``) loads in every ``zarr.open_array``
of an environment where gdsstore is installed: importing it must pull in no more of gdsstore than
the package itself and the facade (the planner, executor, codecs and engine backends load on first use).
Counted, not timed, in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys


def _loaded_after(statement: str) -> set[str]:
    code = (
        "import sys, json, zarr\n"
        "before = set(sys.modules)\n"
        f"{statement}\n"
        "print(json.dumps(sorted(m for m in set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_pipeline_entry_point_imports_only_the_facade() -> None:
    package = _loaded_after("import gdsstore")
    facade = _loaded_after("import gdsstore.gpu.pipeline")
    extra = {m for m in facade - package if m.startswith("gdsstore")}
    assert extra == {"gdsstore.gpu", "gdsstore.gpu.pipeline"}, extra
    heavy = {
        "gdsstore.gpu.execute",
        "gdsstore.gpu.read_shards",
        "gdsstore.gpu.routes",
        "gdsstore.gpu.windows",
        "gdsstore.gpu.write",
        "gdsstore.policy",
        "gdsstore.gpu.plan",
        "gdsstore.gpu.codecs",
        "gdsstore.gpu.nvcomp",
        "gdsstore.gpu.staging",
        "gdsstore.engine.backend",
        "cupy",
    }
    assert not heavy & facade
    assert len([m for m in facade if m.startswith("gdsstore")]) <= 5


def test_pipeline_from_codecs_without_gpu_codecs_stays_light() -> None:
    # zarr builds the pipeline for every array it opens once the pipeline is configured
    loaded = _loaded_after(
        "import gdsstore.gpu.pipeline as p\n"
        "from zarr.codecs import BytesCodec\n"
        "p.GDSCodecPipeline.from_codecs([BytesCodec()])"
    )
    assert "gdsstore.gpu.codecs" not in loaded and "gdsstore.gpu.execute" not in loaded


def test_zarrs_first_open_loads_no_settings_engine_or_gpu_stack() -> None:
    """Issue 17: with gdsstore installed, zarr's first open of a zstd array (its default compressor)
    loads gdsstore's pipeline and codec entry points; neither may pull in gdsstore's settings (a donfig
    Config read from the environment), the engine, the policy or CuPy: together they cost tens of
    milliseconds, and load on first real use."""
    loaded = _loaded_after(
        "import tempfile\n"
        "d = tempfile.mkdtemp()\n"
        "zarr.create_array(d + '/a', shape=(4,), chunks=(2,), dtype='i4')[:] = 1\n"
        "zarr.open_array(d + '/a', mode='r')[:]"
    )
    gds = {m for m in loaded if m.startswith("gdsstore")}
    assert gds <= {"gdsstore", "gdsstore._version", "gdsstore.errors", "gdsstore.gpu", "gdsstore.gpu.pipeline",
                   "gdsstore.gpu.codecs"}, gds
    assert not {"cupy", "gdsstore._config", "gdsstore.policy", "gdsstore.engine"} & loaded
