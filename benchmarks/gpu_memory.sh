#!/usr/bin/env bash
# GPU-machine run for issue 23 (memory as a budget): the wheels, the GPU tests of the pipeline and of the
# pinned ring, the docs page's GPU block, doctor's memory section, then benchmarks/memory_bench.py.
# Results land in $OUT (default memory_results): gpu-tests.txt, doctor.txt, memory.md, memory.json, memory.log.
#   source .gpu/prelude.sh; bash benchmarks/gpu_memory.sh          # both stages (about 10-12 minutes)
#   source .gpu/prelude.sh; bash benchmarks/gpu_memory.sh tests    # stage 1: tests and doctor (<= 4 min)
#   source .gpu/prelude.sh; bash benchmarks/gpu_memory.sh bench    # stage 2: the benchmark (<= 8 min)
set -uo pipefail
stage=${1:-all}
out=${OUT:-memory_results}; mkdir -p "$out"
python3 -m pip install -q --no-deps .whl/*.whl 2>&1 | tail -2
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
if [ "$stage" != bench ]; then
  # the memory tests first (what this issue changed), then the rest of the pipeline's GPU tests
  timeout 180 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs \
    tests/gpu_pipeline/test_memory_gpu.py tests/gpu_pipeline tests/engine/test_bounce.py tests/engine/test_gpu_local.py \
    2>&1 | tee "$out/gpu-tests.txt" | tail -25
  timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/docs/test_docs.py -k "gpu-pipeline" \
    2>&1 | tee -a "$out/gpu-tests.txt" | tail -3
  python3 -m gdsstore.cli doctor > "$out/doctor.txt" 2>&1; grep -E "^(pinned memory|device memory budget)" "$out/doctor.txt"
fi
if [ "$stage" != tests ]; then
  OUT="$out" timeout 570 python3 benchmarks/memory_bench.py 2>&1 | tail -70
fi
