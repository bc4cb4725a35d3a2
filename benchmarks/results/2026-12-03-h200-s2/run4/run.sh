#!/usr/bin/env bash
# Run 4: the core with a lane of its own per request for items of 1 MiB and more (run 3: 16 lanes read
# 256 x 4 MiB about 10 % slower than a task per request), device reads back in the budget's windows (run 3's
# probe: windows of 128 MiB were slower). GPU tests; the wave alone, the core of 3980756 against this one;
# issue 24's remote zarr rows with every anchor; one 1 GiB object against kvikio.
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-03-h200-s2/run4/run.sh
set -uo pipefail
out=${OUT:-run4-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:/tmp/site/bin:$PATH"
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m compileall -q gdsstore >/dev/null
echo "== GPU tests"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline tests/remote/test_gpu_remote.py \
  tests/engine/test_stream_order.py tests/adapters/test_zarr_store_gpu.py >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
echo "== the wave alone: the core of commit 3980756 (.gpu/oldcore) and this one"
python3 -m pip install -q --no-deps --target /tmp/oldcore .gpu/oldcore/*.whl
for k in 1 2; do for core in old new; do
  pp=$PYTHONPATH; [ $core = old ] && pp="/tmp/oldcore:$PYTHONPATH"
  PYTHONPATH=$pp timeout 60 python3 benchmarks/core_wave_bench.py --rounds 3 --latency 0 --nginx-workers 8 \
    --loads 4096x64KiB,4096x256KiB,256x4MiB --protocols http,s3 --only core 2>/dev/null | sed "s/^/$core core: /"
done; done | tee "$out/wave_ab.txt"
echo "== remote zarr rows"
timeout 330 python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 3 \
  --out "$out/remote_zarr.md" >"$out/remote_zarr.log" 2>&1
echo "rc=$?"; grep "^| nginx" "$out/remote_zarr.md" | cut -c1-420
echo "== one 1 GiB object"
timeout 150 python3 benchmarks/remote_bench.py --size 1GiB --repeat 5 --out "$out" >"$out/remote_bench.log" 2>&1
echo "rc=$?"; tail -n 14 "$out/remote_bench.log"
