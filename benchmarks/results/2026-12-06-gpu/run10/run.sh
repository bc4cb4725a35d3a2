#!/usr/bin/env bash
# Run 10 of 2026-12-06 (third session): what holds few large uncompressed chunks at about 21 GB/s (kvikio's store
# read 34 in run 9), by settings only (large_none_knobs.py), and the routes of 4 MiB zstd chunks at a 1 GiB
# gpu.memory_budget after d32ee37 (the host's zstd decode in the core), with the read into host memory
# (zstd_budget_routes.py). The committed tree, carried as in run 9.
#   source .gpu/prelude.sh; mkdir -p /tmp/tree && tar xzf .gpu/tree.tar.gz -C /tmp/tree && ln -sfn $PWD/.gpu /tmp/tree/.gpu &&
#   cd /tmp/tree && export PYTHONPATH=/tmp/tree:$PYTHONPATH && bash benchmarks/results/2026-12-06-gpu/run10/run.sh
set -uo pipefail
here=benchmarks/results/2026-12-06-gpu/run10
gunzip -c .gpu/core_cur.so.gz > gdsstore/_core.abi3.so
mkdir -p /root/knobs
echo "== large uncompressed chunks, by settings ($(date +%T))"
timeout 200 python3 $here/large_none_knobs.py /root/knobs 2>&1 | tail -n 14 | cut -c1-400
echo "== 4 MiB zstd chunks at a 1 GiB budget, by route ($(date +%T))"
timeout 200 python3 $here/zstd_budget_routes.py /root/knobs 2>&1 | tail -n 6 | cut -c1-900
