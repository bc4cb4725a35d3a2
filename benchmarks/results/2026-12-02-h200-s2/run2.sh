source .gpu/prelude.sh
export PYTHONPATH="$PWD/tests:$PYTHONPATH"; export PATH="$PWD/.gpu/bin:$PATH"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "editable install failed"
timeout 90 python3 .gpu/diag_archive.py > $OUT/diag_archive.txt 2>&1; echo "diag rc=$?"; head -40 $OUT/diag_archive.txt | cut -c1-200
timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/archives > $OUT/gpu_tests_archives.txt 2>&1; echo "pytest rc=$?"; tail -3 $OUT/gpu_tests_archives.txt
OUT=$OUT/mem DATA=/tmp/mb timeout 340 python3 benchmarks/memory_bench.py --parts sweep --http --budgets 256,512,1024,2048,4096 > $OUT/mem_sweep.log 2>&1; echo "sweep rc=$?"; grep "sweep\|data" $OUT/mem_sweep.log | cut -c1-200 | tail -34
