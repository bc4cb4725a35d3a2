source .gpu/prelude.sh
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:$PYTHONPATH"; export PATH="$PWD/.gpu/bin:$PATH"
python3 -c "import gdsstore" 2>/dev/null || { python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1; python3 -m compileall -q -j 16 /tmp/site gdsstore .gpu/py >/dev/null 2>&1; }
timeout 330 python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 3 --out $OUT/remote_zarr.md > $OUT/remote_zarr.log 2>&1; echo "zarr rc=$?"; grep "^|" $OUT/remote_zarr.log | cut -c1-400
timeout 220 python3 benchmarks/archive_bench.py --device --files 16 --steps 64 --http --s3 --nginx-workers 8 --rounds 3 --out $OUT/archives_64k.json > $OUT/archives_64k.log 2>&1; echo "archive rc=$?"; grep "^|" $OUT/archives_64k.log | cut -c1-300
