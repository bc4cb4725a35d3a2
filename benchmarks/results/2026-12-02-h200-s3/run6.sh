source .gpu/prelude.sh
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:$PYTHONPATH"; export PATH="$PWD/.gpu/bin:$PATH"
timeout 280 python3 benchmarks/archive_bench.py --device --files 16 --steps 64 --http --s3 --nginx-workers 8 --rounds 3 --out $OUT/archives_64k.json > $OUT/archives_64k.log 2>&1; echo "archive rc=$?"; grep -v Warn $OUT/archives_64k.log | grep "^|\|differ" | cut -c1-300
