source .gpu/prelude.sh
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:$PYTHONPATH"; export PATH="$PWD/.gpu/bin:$PATH"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
timeout 90 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/archives > $OUT/gpu_tests_archives.txt 2>&1; echo "pytest rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" $OUT/gpu_tests_archives.txt | cut -c1-300 | tail -n 8
timeout 60 python3 benchmarks/probe_first_read_memory.py > $OUT/probe_first_read_memory.txt 2>&1; echo "probe rc=$?"; cat $OUT/probe_first_read_memory.txt | cut -c1-200 | head -40
for c in 64k:190 1m:150; do ch=${c%%:*}; timeout ${c##*:} python3 benchmarks/archive_bench.py --device --files 16 --steps 64 --chunk $ch --http --s3 --nginx-workers 8 --rounds 3 --anchor-rounds 1 --skip "VirtualStore+zarr,VirtualStore+enable_pipeline" --out $OUT/archives_$ch.json > $OUT/archives_$ch.log 2>&1; echo "archives $ch rc=$?"; grep "^|" $OUT/archives_$ch.log | cut -c1-200; done
