#!/usr/bin/env bash
# Run 2: the tree with the collector paused per pipeline call (pause_gc), the geometry planned while the first
# window is read, cheaper per-request objects and key checks. The S3 profiles again (per-round collections),
# the wave alone by core thread count and nginx workers, then issue 24's remote zarr rows with every anchor.
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-03-h200-s2/run2/run.sh
set -uo pipefail
out=${OUT:-run2-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:/tmp/site/bin:$PATH"
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m compileall -q gdsstore >/dev/null
echo "== GPU tests"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline tests/remote/test_gpu_remote.py \
  tests/engine/test_stream_order.py tests/adapters/test_zarr_store_gpu.py >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
for c in 128 256; do
  echo "== profile $c"
  timeout 90 python3 benchmarks/profile_s3_zarr.py --chunk $c --device --nginx-workers 8 --rounds 8 \
    --out "$out/profile_$c.txt" >/dev/null 2>"$out/profile_$c.err"; echo "rc=$?"; head -n 9 "$out/profile_$c.txt"
done
echo "== the wave alone"
for w in 2 8; do for t in 8 16; do
  GDSSTORE_CORE_THREADS=$t timeout 100 python3 benchmarks/core_wave_bench.py --rounds 3 --latency 0 --nginx-workers $w \
    --loads 4096x64KiB,4096x256KiB,256x4MiB --protocols http,s3 --only core,tensorstore \
    --out "$out/wave_w${w}_t${t}.json" 2>/dev/null | sed "s/^/nginx $w, core threads $t: /"
done; done
echo "== remote zarr rows"
timeout 330 python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 3 \
  --out "$out/remote_zarr.md" >"$out/remote_zarr.log" 2>&1
echo "rc=$?"; grep "^| nginx" "$out/remote_zarr.md" | cut -c1-420
