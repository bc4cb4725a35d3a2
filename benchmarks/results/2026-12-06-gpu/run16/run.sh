#!/usr/bin/env bash
# Run 16 of 2026-12-06 (fourth session): runs 14 and 15 in one call (device starts failed for half an hour): the
# GPU tests of the decode split and nvCOMP's C API; run 13's 1 GiB-budget probe (the split now learns nvCOMP's
# scratch where nvCOMP takes no part); run 14's ramp A/B passes "cur" and "resume" on the remote zarr rows; then
# run 15's phases probe and one single-object sweep (last: the call may be cut short). Cores as in run 13 (noramp left out: the carry limit).
#   source .gpu/prelude.sh; mkdir -p /tmp/tree && tar xzf .gpu/tree.tar.gz -C /tmp/tree && ln -sfn $PWD/.gpu /tmp/tree/.gpu &&
#   cd /tmp/tree && export PYTHONPATH=/tmp/tree:$PYTHONPATH PATH=$PWD/.gpu/bin:$PATH && OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run16/run.sh
set -uo pipefail
out=${OUT:-run16-out}; mkdir -p "$out" /tmp/cores /root/probe
here=benchmarks/results/2026-12-06-gpu
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
for v in cur resume; do gunzip -c .gpu/core_$v.so.gz > /tmp/cores/$v.so; done
cp /tmp/cores/cur.so gdsstore/_core.abi3.so
echo "== GPU tests of the split and the C API ($(date +%T))"
timeout 70 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline/test_nvcomp_capi.py \
  tests/gpu_pipeline/test_decode_split.py tests/gpu_pipeline/test_decode_raw.py >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed|Error" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 8
echo "== budget probe ($(date +%T))"
probe=$here/run13/probe_budget_learn.py
timeout 50 python3 $probe /root/probe 4294967296 2>&1 | tail -n 1
for b in 1073741824 4294967296; do timeout 40 python3 $probe /root/probe $b 2>&1 | tail -n 5 | cut -c1-300; done | tee "$out/budget_probe.txt"
OUT=$out PASSES="cur resume" bash $here/run14/run.sh
echo "== phases ($(date +%T))"
timeout 100 python3 $here/run15/probe_remote_phases.py 2>&1 | tee "$out/phases.txt" | cut -c1-200
echo "== one 1 GiB object, sweep ($(date +%T))"
timeout 80 python3 benchmarks/remote_bench.py --server nginx --repeat 5 --sweep --out "$out/single" >"$out/single.log" 2>&1
echo "rc=$?"; grep -E "^(gdsstore|kvikio RemoteFile, 16)" "$out/single.log" | cut -c1-100
rm -rf "$out"/remote_zarr_*.log "$out"/single  # 8 files come back: the tables and logs above
