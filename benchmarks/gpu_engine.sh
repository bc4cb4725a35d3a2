#!/usr/bin/env bash
# On the GPU machine (after `source .gpu/prelude.sh`): engine GPU tests, doctor, raw-file benchmarks.
# Results land in $OUT (or ./bench-results).
set -uo pipefail
out=${OUT:-bench-results}; mkdir -p "$out"
python3 -c "import cupy, cuda.bindings, cuda.bindings.cufile as c; print('cupy', cupy.__version__, 'cuda-bindings', cuda.bindings.__version__, 'libcufile', c.get_version())"
python3 -m pytest -m gpu -q -p no:cacheprovider tests/engine ${GPU_TESTS:-} 2>&1 | tee "$out/gpu-tests.txt" | tail -25
python3 -m gdsstore.cli doctor 2>&1 | tee "$out/doctor.txt"
f=/root/gdsstore-bench-1g.bin
[ -f $f ] || head -c $((1<<30)) /dev/urandom > $f
cat $f > /dev/null
python3 -m gdsstore.cli bench $f --threads 16 --repeat 5 2>/dev/null | tee "$out/bench-raw-warm.txt"
python3 -m gdsstore.cli bench $f --threads 16 --repeat 5 --json 2>/dev/null > "$out/bench-raw-warm.json"
python3 -m gdsstore.cli bench $f --threads 16 --repeat 2 --cold 2>/dev/null | tee "$out/bench-raw-cold.txt"
