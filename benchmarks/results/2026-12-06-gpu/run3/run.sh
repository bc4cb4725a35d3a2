#!/usr/bin/env bash
# Run 3 of 2026-12-06 (issue 37): the large-chunk rows with every anchor, czarr among them
# (benchmarks/gpu_frontier.sh, after the decode split of few large zstd chunks), then one 1 GiB object.
# Carried: base nvcomp anchors czarr wheels less obstore and pytest-asyncio, libnvcomp's wheel without its
# nvlzcat binary and headers (to fit 64 MiB), the core built here (gdsstore/_core.abi3.so).
#   source .gpu/prelude.sh; OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run3/run.sh
set -uo pipefail
out=${OUT:-run3-out}; mkdir -p "$out"
export PATH="$PWD/.gpu/bin:/tmp/site/bin:$PATH"
OUT="$out" ROUNDS=3 REPEAT=2 timeout 500 bash benchmarks/gpu_frontier.sh
