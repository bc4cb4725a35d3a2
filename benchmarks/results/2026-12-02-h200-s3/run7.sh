source .gpu/prelude.sh >/dev/null
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:$PYTHONPATH"; export PATH="$PWD/.gpu/bin:$PATH"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
cp gdsstore/engine/cuda.py /tmp/cuda_fixed.py
sed -i 's/s = thread_stream(device, after=current_event(device))/s = thread_stream(device)/' gdsstore/engine/cuda.py
echo "== without the fix:"; timeout 40 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" tests/engine/test_stream_order.py 2>&1 | grep -E "passed|failed|assert " | head -5
cp /tmp/cuda_fixed.py gdsstore/engine/cuda.py
echo "== with it:"; timeout 110 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/engine tests/archives tests/gpu_pipeline tests/remote tests/adapters/test_zarr_store_gpu.py > $OUT/gpu_tests.txt 2>&1; grep -E "^(FAILED|ERROR)|passed|failed" $OUT/gpu_tests.txt | tail -n 12
timeout 50 python3 benchmarks/core_wave_bench.py --only cat,tensorstore,core --latency 0 --protocols http --rounds 3 --loads 4096x16KiB,4096x256KiB --out $OUT/cat.json > $OUT/cat.log 2>&1; tail -n 3 $OUT/cat.log | cut -c1-300
