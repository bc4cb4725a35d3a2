#!/usr/bin/env bash
# One GPU-machine run for the whole evidence: all GPU tests, doctor, the zarr table (benchmarks/zarr_bench.py),
# raw-file benchmark (warm + cold), remote benchmark. Results land in $OUT.
#   source .gpu/prelude.sh; bash benchmarks/gpu_final.sh
set -uo pipefail
out=${OUT:-bench-results}; mkdir -p "$out/zarr"
export PYTHONPATH="$PWD/tests:$PYTHONPATH"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs \
  tests/engine tests/adapters/test_zarr_store_gpu.py tests/adapters/test_fsspec_fs.py \
  tests/remote/test_gpu_remote.py tests/gpu_pipeline/test_gpu.py 2>&1 | tee "$out/gpu-tests.txt" | tail -30
python3 -m gdsstore.cli doctor > "$out/doctor.txt" 2>&1; tail -14 "$out/doctor.txt"
timeout 200 python3 benchmarks/zarr_bench.py --out "$out/zarr" --data /root/zb > "$out/zarr/bench.log" 2>&1
tail -14 "$out/zarr/bench.log"
f=/root/gdsstore-bench-1g.bin
[ -f $f ] || head -c $((1<<30)) /dev/urandom > $f
cat $f > /dev/null
timeout 90 python3 -m gdsstore.cli bench $f --threads 16 --repeat 5 2>/dev/null | tee "$out/bench-raw.txt"
timeout 60 python3 -m gdsstore.cli bench $f --threads 16 --repeat 1 --cold 2>/dev/null | tee -a "$out/bench-raw.txt"
timeout 100 python3 benchmarks/remote_bench.py --size 1GiB --out "$out" 2>&1 | tail -12
