"""One install hint everywhere (``gdsstore._optional.install_hint``): errors, test skip reasons, the README;
the README's GPU block runs anywhere (guarded as the docs' blocks are); a trace reason for a missing piece
is a short phrase, not an import error."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gdsstore._optional import install_hint
from gdsstore.errors import MissingOptionalDependencyError

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
NO_CUPY = importlib.util.find_spec("cupy") is None


def test_readme_names_the_install_hint() -> None:
    text = README.read_text()
    assert "pip install '.[cuda13]'` for a CUDA 13 driver or `'.[cuda12]'` for CUDA 12" in text
    assert "'.[cuda13]'" in install_hint("cuda13") and "'.[cuda12]'" in install_hint("cuda13")


@pytest.mark.skipif(not NO_CUPY, reason="checks the messages of a machine without CuPy")
def test_gpu_skip_reason_and_errors_carry_the_hint(tmp_path: Path) -> None:
    import conftest  # tests/conftest.py: the reason every GPU test skips with

    reason = conftest._gpu_skip_reason()
    assert reason is not None and install_hint("cuda13") in reason

    import fsspec

    (tmp_path / "x.bin").write_bytes(b"\0" * 64)
    with pytest.raises(MissingOptionalDependencyError) as info:
        fsspec.filesystem("gds").read_array(str(tmp_path / "x.bin"), device=True)
    assert install_hint("cuda13") in str(info.value)

    from gdsstore.engine import cuda

    with pytest.raises(TypeError) as err:
        cuda.device_of_pointer(0)
    assert install_hint("cuda13") in str(err.value)


def test_readme_runs_whole_without_a_gpu(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "docs"))
    try:
        from markdown_blocks import run_python_blocks
    finally:
        sys.path.remove(str(ROOT / "tests" / "docs"))
    ran, skipped, _ = run_python_blocks(README, tmp_path, root=ROOT)  # the GPU block too, as a user pastes it
    assert ran >= 2 and skipped == 0


CORELESS = """
import json, sys
sys.modules["gdsstore._core"] = None  # as where the core is not built
from gdsstore import policy
from gdsstore.engine import batch
from gdsstore.engine import native
from gdsstore.gpu import nvcomp
print(json.dumps({
    "wave": native.unavailable_reason(),
    "batch": policy.decide_local_batch(core_missing=batch._core_missing(),
                                       reads=4).reason,
    "nvcomp": nvcomp._import_nvcomp()[1],
}))
"""


def test_trace_reasons_for_missing_pieces_are_short_phrases() -> None:
    out = subprocess.run([sys.executable, "-c", CORELESS], capture_output=True, text=True, timeout=120, check=True)
    reasons = json.loads(out.stdout)
    assert reasons["wave"] == "gdsstore._core not installed"
    assert reasons["batch"] == "python threads: native core unavailable (gdsstore._core not installed)"
    assert len(reasons["nvcomp"]) <= 40, reasons["nvcomp"]  # "nvCOMP not available (...)" or its version
    assert all("Error" not in r and "No module named" not in r for r in reasons.values()), reasons
