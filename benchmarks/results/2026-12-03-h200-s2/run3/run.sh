#!/usr/bin/env bash
# Run 3: run 2's tree, and device reads of uncompressed remote chunks in windows of 128 MiB (probe_remote_windows.py A/Bs it) with the wave's lanes capped at their share of a short wave's items (in run 2 the first
# lanes took all 64 items of a 4 MiB-chunk wave, and the shard rows fell). Issue 24's remote zarr rows with
# every anchor, then the wave alone and under 20 ms of latency (nginx 8 workers, the core's default threads).
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-03-h200-s2/run3/run.sh
set -uo pipefail
out=${OUT:-run3-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:/tmp/site/bin:$PATH"
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m compileall -q gdsstore >/dev/null
echo "== GPU tests"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline tests/remote/test_gpu_remote.py \
  tests/engine/test_stream_order.py tests/adapters/test_zarr_store_gpu.py >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
echo "== probe_remote_windows.py"
timeout 120 python3 benchmarks/probe_remote_windows.py --nginx-workers 8 --rounds 5 --windows 0,128,64 >"$out/probe_remote_windows.txt" 2>&1
echo "rc=$?"; tail -n 6 "$out/probe_remote_windows.txt"
echo "== remote zarr rows"
timeout 330 python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 3 \
  --out "$out/remote_zarr.md" >"$out/remote_zarr.log" 2>&1
echo "rc=$?"; grep "^| nginx" "$out/remote_zarr.md" | cut -c1-420
echo "== the wave alone: the core of commit 3980756 (.gpu/oldcore, a task and two permits per request, glibc malloc) and this one"
python3 -m pip install -q --no-deps --target /tmp/oldcore .gpu/oldcore/*.whl
for k in 1 2; do for core in old new; do
  pp=$PYTHONPATH; [ $core = old ] && pp="/tmp/oldcore:$PYTHONPATH"
  PYTHONPATH=$pp timeout 60 python3 benchmarks/core_wave_bench.py --rounds 3 --latency 0 --nginx-workers 8 \
    --loads 4096x64KiB,4096x256KiB,256x4MiB --protocols http,s3 --only core 2>/dev/null | sed "s/^/$core core: /"
done; done
echo "== the wave alone, and under 20 ms of latency"
timeout 200 python3 benchmarks/core_wave_bench.py --rounds 3 --nginx-workers 8 --loads 4096x64KiB,4096x256KiB,256x4MiB \
  --protocols http,s3 --only core,tensorstore,obstore,python --out "$out/wave.json" 2>"$out/wave.err"
echo "rc=$?"
