"""``gdsstore.bench``'s functions called from Python: :func:`bench_url` and :func:`bench_zarr` take the keyword
arguments of :class:`gdsstore.bench.BenchOptions`, with the defaults it names; a key it does not name is an
error before anything is read."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from gdsstore.bench import bench_url, bench_zarr


def test_bench_url_reads_with_its_options_and_refuses_an_unknown_one() -> None:
    from servers.faults import FaultServer

    srv = FaultServer()
    try:
        srv.objects["o.bin"] = os.urandom(1 << 20)
        rows = bench_url(srv.url("o.bin"), repeat=2, device=False, progress=False)
        gets = [entry for entry in srv.log if entry[0] == "GET"]
        srv.log.clear()
        with pytest.raises(TypeError, match=r"bench_url\(\) got unexpected keyword arguments \['repeats'\]"):
            bench_url(srv.url("o.bin"), repeats=2)  # type: ignore[call-arg]
        after_refusal = list(srv.log)
    finally:
        srv.close()
    assert [r.name for r in rows] == ["gdsstore (defaults)", "fsspec"]
    assert all(r.nbytes == 1 << 20 and r.seconds > 0 for r in rows), rows
    assert gets, "the contenders read nothing"
    assert after_refusal == []  # refused before any request


def test_bench_zarr_defaults_and_its_unknown_keys(tmp_path: Path) -> None:
    import zarr

    root = tmp_path / "a.zarr"
    zarr.create_array(str(root), shape=(64,), chunks=(16,), dtype="f4")[:] = np.arange(64, dtype="f4")
    rows = bench_zarr(str(root), progress=False)  # repeat and device: their defaults
    assert [r.nbytes for r in rows] == [64 * 4, 64 * 4] and all(r.seconds > 0 for r in rows), rows
    with pytest.raises(TypeError, match=r"bench_zarr\(\) got unexpected keyword arguments \['cold'\]"):
        bench_zarr(str(root), cold=True)  # type: ignore[call-arg]
