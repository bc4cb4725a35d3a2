source .gpu/prelude.sh
export PYTHONPATH="$PWD/tests:$PYTHONPATH"; export PATH="$PWD/.gpu/bin:$PATH"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "editable install failed"
python3 -c "import gdsstore_core, zarr, h5py, virtualizarr, kerchunk; print('imports ok')"; nginx -v
timeout 230 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline tests/archives tests/engine tests/adapters/test_zarr_store_gpu.py tests/remote/test_gpu_remote.py > $OUT/gpu_tests.txt 2>&1; echo "pytest rc=$?"; grep -E "passed|failed|Error|FAILED|Segmentation|SKIPPED" $OUT/gpu_tests.txt | cut -c1-300 | tail -25
timeout 70 python3 benchmarks/nvcomp_decode_sweep.py --out $OUT/nvcomp_sweep.md > $OUT/nvcomp_sweep.log 2>&1; echo "sweep rc=$?"; cat $OUT/nvcomp_sweep.log | tail -14
timeout 230 python3 benchmarks/archive_bench.py --device --files 16 --steps 64 --rounds 2 --root /root/gab --skip VirtualStore+zarr,VirtualStore+enable_pipeline --out $OUT/archives_local_64k.json > $OUT/archives_local_64k.log 2>&1; echo "archives rc=$?"; grep -v "^ " $OUT/archives_local_64k.log | tail -12
