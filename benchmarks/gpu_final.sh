#!/usr/bin/env bash
# One GPU-machine run for everything but the zarr benchmark (which benchmarks/zarr_bench.py does):
# all GPU tests, doctor, raw-file benchmark (warm + cold), remote benchmark. Results in $OUT.
#   source .gpu/prelude.sh; bash benchmarks/gpu_final.sh
set -uo pipefail
out=${OUT:-bench-results}; mkdir -p "$out"
export PYTHONPATH="$PWD/tests:$PYTHONPATH"
python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs \
  tests/engine tests/adapters/test_zarr_store_gpu.py tests/remote/test_gpu_remote.py tests/gpu_pipeline/test_gpu.py \
  $(ls tests/adapters/test_fsspec*gpu*.py 2>/dev/null) 2>&1 | tee "$out/gpu-tests.txt" | tail -40
python3 -m gdsstore.cli doctor > "$out/doctor.txt" 2>&1; tail -12 "$out/doctor.txt"
f=/root/gdsstore-bench-1g.bin
[ -f $f ] || head -c $((1<<30)) /dev/urandom > $f
cat $f > /dev/null
python3 -m gdsstore.cli bench $f --threads 16 --repeat 5 2>/dev/null | tee "$out/bench-raw-warm.txt"
python3 -m gdsstore.cli bench $f --threads 16 --repeat 2 --cold 2>/dev/null | tee "$out/bench-raw-cold.txt"
timeout 240 python3 benchmarks/remote_bench.py --size 1GiB --out "$out" 2>&1 | tail -15
