source .gpu/prelude.sh
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:$PYTHONPATH"; export PATH="$PWD/.gpu/bin:$PATH"
python3 -c "import gdsstore" 2>/dev/null || { python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1; python3 -m compileall -q -j 16 /tmp/site gdsstore .gpu/py >/dev/null 2>&1; }
timeout 200 python3 benchmarks/archive_bench.py --device --files 16 --steps 64 --http --s3 --chunk 1m --nginx-workers 8 --rounds 3 --out $OUT/archives_1m.json > $OUT/archives_1m.log 2>&1; echo "archive1m rc=$?"; grep "^|" $OUT/archives_1m.log | cut -c1-300
timeout 150 python3 benchmarks/blosc_bench.py --device --formats 2,3 --rounds 3 --out $OUT/blosc.md > $OUT/blosc.log 2>&1; echo "blosc rc=$?"; grep "^|" $OUT/blosc.log | cut -c1-300
timeout 200 python3 benchmarks/memory_bench.py --quick --parts reads,first_read,first_write > $OUT/memory.log 2>&1; echo "memory rc=$?"; grep "^|" $OUT/memory.log | cut -c1-300
