#!/usr/bin/env bash
# Run 13 of 2026-12-06 (fourth session): (1) the GPU tests with the split's first batch learning nvCOMP's exact
# scratch; (2) whether a fresh process's reads of 4 MiB zstd chunks at a 1 GiB gpu.memory_budget now learn it and
# plan their next reads with it (probe_budget_learn.py; then the 4 GiB default in a fresh process); (3) the ramp
# A/B on one 1 GiB object over nginx against kvikio: "cur" (as committed: back from idle at a quarter of the kept
# limit), "noramp" (ramp.rs START = 4096: none), "resume" (AFTER_IDLE = 1: back from idle at the kept limit), two
# passes in turn. Cores: NAMES="cur noramp resume" bash benchmarks/results/2026-12-06-ramp/build_variants.sh in a
# worktree of the commit, gzipped into .gpu/core_<name>.so.gz; the tree carried as .gpu/tree.tar.gz (git archive).
#   source .gpu/prelude.sh; mkdir -p /tmp/tree && tar xzf .gpu/tree.tar.gz -C /tmp/tree && ln -sfn $PWD/.gpu /tmp/tree/.gpu &&
#   cd /tmp/tree && export PYTHONPATH=/tmp/tree:$PYTHONPATH PATH=$PWD/.gpu/bin:$PATH && OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run13/run.sh
set -uo pipefail
out=${OUT:-run13-out}; mkdir -p "$out" /tmp/cores /root/probe
here=benchmarks/results/2026-12-06-gpu/run13
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
for v in cur noramp resume; do gunzip -c .gpu/core_$v.so.gz > /tmp/cores/$v.so; done
cp /tmp/cores/cur.so gdsstore/_core.abi3.so
echo "tree $(python3 -c 'import gdsstore; print(gdsstore.__file__)')"
echo "== GPU tests ($(date +%T))"
timeout 140 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline tests/remote/test_gpu_remote.py \
  tests/engine tests/adapters/test_zarr_store_gpu.py >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed|Error" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
echo "== budget probe ($(date +%T))"
timeout 60 python3 $here/probe_budget_learn.py /root/probe 4294967296 2>&1 | tail -n 2
for b in 1073741824 4294967296; do timeout 45 python3 $here/probe_budget_learn.py /root/probe $b 2>&1 | tail -n 5 | cut -c1-400; done \
  | tee "$out/budget_probe.txt"
for pass in 1 2; do for v in cur noramp resume; do
  cp /tmp/cores/$v.so gdsstore/_core.abi3.so
  echo "== one 1 GiB object, $v, pass $pass ($(date +%T))"
  timeout 55 python3 benchmarks/remote_bench.py --server nginx --repeat 5 --out "$out/single_${v}_$pass" \
    >"$out/single_${v}_$pass.log" 2>&1
  echo "rc=$?"; grep -E "^(gdsstore|kvikio RemoteFile, 16)" "$out/single_${v}_$pass.log" | cut -c1-100
done; done
cp /tmp/cores/cur.so gdsstore/_core.abi3.so
