source .gpu/prelude.sh; export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:$PYTHONPATH"; python3 -c "import gdsstore" ; timeout 250 python3 .gpu/diag_combined.py 2>&1 | tail -n 30
