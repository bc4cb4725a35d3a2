#!/usr/bin/env bash
# Run 14 of 2026-12-06 (fourth session): the ramp A/B on the remote zarr rows, every remote anchor carried but
# s3fs (tensorstore, zarr FsspecStore over HTTP, zarr ObjectStore and zarrs over obstore): "cur" (as committed:
# back from idle at a quarter of the kept limit), "noramp" (ramp.rs START = 4096: none), "resume"
# (AFTER_IDLE = 1: back from idle at the kept limit), one remote_zarr_bench pass of two interleaved rounds each,
# in turn. Cores as in run 13; kvikio's wheels left out of .whl and obstore's put in (the carry limit).
# TESTS=1 first runs the GPU tests and run 13's budget probe (after the split learns nvCOMP's scratch when nvCOMP
# takes no part in a read). PASSES names the passes in order.
#   source .gpu/prelude.sh; mkdir -p /tmp/tree && tar xzf .gpu/tree.tar.gz -C /tmp/tree && ln -sfn $PWD/.gpu /tmp/tree/.gpu &&
#   cd /tmp/tree && export PYTHONPATH=/tmp/tree:$PYTHONPATH PATH=$PWD/.gpu/bin:$PATH && OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run14/run.sh
set -uo pipefail
out=${OUT:-run14-out}; mkdir -p "$out" /tmp/cores
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
for v in ${PASSES:-cur noramp resume}; do [ -e /tmp/cores/$v.so ] || gunzip -c .gpu/core_$v.so.gz > /tmp/cores/$v.so; done
if [ "${TESTS:-0}" = 1 ]; then
  cp /tmp/cores/cur.so gdsstore/_core.abi3.so
  echo "== GPU tests ($(date +%T))"
  timeout 140 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline tests/remote/test_gpu_remote.py \
    tests/engine tests/adapters/test_zarr_store_gpu.py >"$out/gpu_tests.txt" 2>&1
  echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed|Error" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
  probe=benchmarks/results/2026-12-06-gpu/run13/probe_budget_learn.py
  mkdir -p /root/probe; timeout 60 python3 $probe /root/probe 4294967296 2>&1 | tail -n 2
  for b in 1073741824 4294967296; do timeout 45 python3 $probe /root/probe $b 2>&1 | tail -n 5 | cut -c1-300; done \
    | tee "$out/budget_probe.txt"
fi
k=0
for v in ${PASSES:-cur noramp resume}; do
  k=$((k + 1))
  cp /tmp/cores/$v.so gdsstore/_core.abi3.so
  echo "== pass $k: $v ($(date +%T))"
  timeout 150 python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 2 \
    --no-single --out "$out/remote_zarr_${k}_$v.md" >"$out/remote_zarr_${k}_$v.log" 2>&1
  echo "rc=$?"; grep "^| nginx" "$out/remote_zarr_${k}_$v.md" | sed -E 's/, [0-9.]+ CPU-s\/GB//g; s/\| [^|]*$//' | cut -c1-330
done
cp /tmp/cores/cur.so gdsstore/_core.abi3.so
