source .gpu/prelude.sh
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:$PYTHONPATH"; export PATH="$PWD/.gpu/bin:$PATH"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "editable install failed"
python3 -m compileall -q -j 16 /tmp/site gdsstore .gpu/py >/dev/null 2>&1
python3 -c "import gdsstore_core, botocore, zarrs, kvikio, tensorstore, h5py, virtualizarr; print('imports ok')"; nginx -v
timeout 230 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/remote tests/gpu_pipeline tests/archives tests/engine tests/adapters/test_zarr_store_gpu.py > $OUT/gpu_tests.txt 2>&1; echo "pytest rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" $OUT/gpu_tests.txt | cut -c1-300 | tail -n 25
timeout 110 python3 benchmarks/remote_bench.py --size 1GiB --repeat 5 --server nginx --out $OUT > $OUT/remote_bench.log 2>&1; echo "remote_bench rc=$?"; tail -n 12 $OUT/remote_bench.log
timeout 120 python3 benchmarks/core_wave_bench.py --rounds 3 --protocols http,s3 --out $OUT/wave.json > $OUT/wave.log 2>&1; echo "wave rc=$?"; tail -n 30 $OUT/wave.log | cut -c1-250
