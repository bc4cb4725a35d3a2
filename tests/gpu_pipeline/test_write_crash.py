"""A writer killed with SIGKILL in the middle of a batch leaves every chunk old or new, never torn."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec
from zarr.storage import LocalStore

from gdsstore.engine.localfs import TMP_SUFFIX

ROOT = Path(__file__).resolve().parents[2]
SHAPE = (1024, 1024)
CHUNKS = (128, 128)  # 64 chunks of 64 KiB per batch

CHILD = """
import sys, numpy as np, zarr, gdsstore
root = sys.argv[1]
base = np.random.default_rng(0).standard_normal((1024, 1024)).astype("f4")
with gdsstore.enable_gpu(buffers=False):
    z = zarr.open_array(gdsstore.GDSStore(root), mode="r+")
    k = 2
    print("ready", flush=True)
    while True:  # batch after batch, each chunk = base + k
        z[...] = base + np.float32(k)
        k += 1
"""


def _in_flight(root: Path) -> bool:
    """Whether a put is in the middle of writing (its temporary file exists)."""
    return any(name.endswith(TMP_SUFFIX) for _, _, names in os.walk(root) for name in names)


@pytest.mark.parametrize("attempt", range(3))
def test_sigkill_mid_batch_leaves_each_chunk_old_or_new(tmp_path: Path, attempt: int) -> None:
    base = np.random.default_rng(0).standard_normal(SHAPE).astype("f4")
    z = zarr.create_array(
        LocalStore(tmp_path), shape=SHAPE, chunks=CHUNKS, dtype="f4", fill_value=0.0,
        compressors=[ZstdCodec(level=1), Crc32cCodec()],
    )
    z[...] = base + np.float32(1)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        time.sleep(0.2 * attempt)  # let some batches complete first
        deadline = time.monotonic() + 60
        while not _in_flight(tmp_path):  # kill while a put is writing: mid-batch
            assert time.monotonic() < deadline, "the writer never had a write in flight"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    # plain zarr reads every chunk (crc32c checked: a torn chunk fails) and each is base + one k
    got = zarr.open_array(LocalStore(tmp_path), mode="r")[...] - base
    ks = set()
    for i in range(0, SHAPE[0], CHUNKS[0]):
        for j in range(0, SHAPE[1], CHUNKS[1]):
            block = got[i : i + CHUNKS[0], j : j + CHUNKS[1]]
            k = float(np.round(block[0, 0]))
            np.testing.assert_allclose(block, k, atol=1e-3)
            ks.add(k)
    assert ks and min(ks) >= 1 and max(ks) - min(ks) <= 1  # old (k) or new (k + 1), one batch apart
