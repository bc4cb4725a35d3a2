#!/usr/bin/env bash
# One GPU-machine run for the whole evidence: all GPU tests, doctor, the zarr table (benchmarks/zarr_bench.py),
# raw-file benchmark (warm + cold), remote benchmark. Test data goes to $DATA (default /root/zb); results land
# in $OUT (8 files); benchmarks/results/ keeps the published ones. An nginx binary in .gpu/bin (copied from a
# machine that has one; the GPU machine has none) serves the remote benchmark and the nginx GPU test;
# without it both use Python servers.
#   source .gpu/prelude.sh; bash benchmarks/gpu_final.sh
set -uo pipefail
out=${OUT:-bench-results}; mkdir -p "$out/zarr"
data=${DATA:-/root/zb}
export PYTHONPATH="$PWD/tests:$PYTHONPATH"
[ -x .gpu/bin/nginx ] && export PATH="$PWD/.gpu/bin:$PATH"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs \
  tests/engine tests/adapters/test_zarr_store_gpu.py tests/adapters/test_fsspec_filesystem.py \
  tests/remote/test_gpu_remote.py tests/gpu_pipeline 2>&1 | tee "$out/gpu-tests.txt" | tail -8
python3 -m gdsstore.cli doctor > "$out/doctor.txt" 2>&1; tail -5 "$out/doctor.txt"
timeout 330 python3 benchmarks/zarr_bench.py --out "$out/zarr" --data "$data" --repeat 5 > "$out/zarr/bench.log" 2>&1
grep "^|" "$out/zarr/bench.log"
f="$data/raw.bin"
timeout 120 python3 -m gdsstore.cli bench $f --threads 16 --repeat 7 2>/dev/null | tee "$out/bench-raw.txt"
timeout 60 python3 -m gdsstore.cli bench $f --threads 16 --repeat 1 --cold 2>/dev/null | tee -a "$out/bench-raw.txt"
timeout 150 python3 benchmarks/remote_bench.py --size 1GiB --repeat 7 --sweep --out "$out" 2>&1 | tail -12
