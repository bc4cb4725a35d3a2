source .gpu/prelude.sh
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:$PYTHONPATH"; export PATH="$PWD/.gpu/bin:$PATH"
python3 -c "import gdsstore_core, botocore, zarrs, tensorstore; print('imports ok')"; nginx -v
export GDSSTORE_REMOTE__CORE=auto
timeout 320 python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 3 --out $OUT/remote_core.md > $OUT/remote_core.log 2>&1; grep "^|" $OUT/remote_core.log | cut -c1-600
timeout 90 python3 benchmarks/core_wave_bench.py --rounds 3 --out $OUT/wave.json > $OUT/wave.log 2>&1; tail -12 $OUT/wave.log
timeout 90 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/remote/test_gpu_remote.py tests/gpu_pipeline tests/engine tests/adapters/test_zarr_store_gpu.py > $OUT/gpu_tests.txt 2>&1; tail -4 $OUT/gpu_tests.txt
timeout 60 python3 .gpu/diag_small.py > $OUT/diag.txt 2>&1; cat $OUT/diag.txt | cut -c1-400
