source .gpu/prelude.sh; export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:$PYTHONPATH"; timeout 280 python3 .gpu/diag_bench.py 2>&1 | grep -v Warning | tail -n 40
