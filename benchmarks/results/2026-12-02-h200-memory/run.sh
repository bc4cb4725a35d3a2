source .gpu/prelude.sh
export PYTHONPATH="$PWD/tests:$PYTHONPATH"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "editable install failed"
timeout 110 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline > $OUT/gpu_tests.txt 2>&1; echo "pytest rc=$?"; grep -E "passed|failed|Error|FAILED|Segmentation" $OUT/gpu_tests.txt | tail -12
timeout 40 python3 .gpu/diag_first.py read > $OUT/diag_read.txt 2>&1; echo "diag read rc=$?"; head -10 $OUT/diag_read.txt | cut -c1-160
timeout 40 python3 .gpu/diag_first.py write > $OUT/diag_write.txt 2>&1; echo "diag write rc=$?"; head -12 $OUT/diag_write.txt | cut -c1-160
OUT=$OUT timeout 230 python3 benchmarks/memory_bench.py --quick --reads 1 > $OUT/mem_bench.log 2>&1; echo "bench rc=$?"; grep -v "^\[" $OUT/mem_bench.log | head -60; grep "^\[" $OUT/mem_bench.log | tail -5
