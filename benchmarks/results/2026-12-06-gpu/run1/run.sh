#!/usr/bin/env bash
# Run 1 of 2026-12-06 (issues 35-36: the one remote stack, the connection ramp, the landing layer): the GPU
# tests, then the remote zarr rows of the Performance page with every anchor (the single object: run 2, with kvikio).
#   source .gpu/prelude.sh; OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run1/run.sh
set -uo pipefail
out=${OUT:-run1-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:/tmp/site/bin:$PATH"
python3 -c 'import gdsstore._core, gdsstore; print("gdsstore", gdsstore.__file__)'
echo "== GPU tests"
timeout 170 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline tests/remote/test_gpu_remote.py \
  tests/engine tests/adapters/test_zarr_store_gpu.py >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed|Error" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 15
echo "== remote zarr rows"
timeout 300 python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 3 --no-single \
  --out "$out/remote_zarr.md" >"$out/remote_zarr.log" 2>&1
echo "rc=$?"; grep "^| nginx" "$out/remote_zarr.md" | cut -c1-300
