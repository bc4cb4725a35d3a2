#!/usr/bin/env bash
# Run 1: where the S3 64/256 KiB zarr reads' time goes on the H200 (per-round garbage collection, cProfile,
# py-spy's sampled stacks), then the baseline of issue 24's remote zarr rows with every anchor.
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-03-h200-s2/run1/run.sh
set -uo pipefail
out=${OUT:-run1-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:/tmp/site/bin:$PATH"
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m compileall -q gdsstore >/dev/null
for c in 128 256; do
  echo "== profile $c"
  timeout 90 python3 benchmarks/profile_s3_zarr.py --chunk $c --device --nginx-workers 8 --rounds 8 \
    --out "$out/profile_$c.txt" >/dev/null 2>"$out/profile_$c.err"; echo "rc=$?"; head -n 12 "$out/profile_$c.txt"
  timeout 90 py-spy record -r 400 -f raw -o "$out/pyspy_$c.txt" -- python3 benchmarks/profile_s3_zarr.py \
    --chunk $c --device --nginx-workers 8 --rounds 30 --no-profile >"$out/pyspy_$c.log" 2>&1; echo "py-spy rc=$?"
  tail -n 3 "$out/pyspy_$c.log"
done
echo "== remote zarr rows"
timeout 330 python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 3 \
  --out "$out/remote_zarr.md" >"$out/remote_zarr.log" 2>&1
echo "rc=$?"; grep "^|" "$out/remote_zarr.log" | cut -c1-420
