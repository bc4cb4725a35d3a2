#!/usr/bin/env bash
# GPU-machine run for issue 17's integrations: xarray (engine="gdsstore", DeviceDaskManager), dask
# (GDSStorePlugin on worker processes), icechunk (GPU buffers), the docs' GPU code blocks and README, and
# the two GPU notebooks (recorded into $OUT, never into the tree). Prints what ran and the results; the
# full logs land in $OUT.
#
# The GPU image lacks dask, distributed and icechunk (and holds an xarray of its own): carry these wheels
# in .whl/ (downloaded on a machine with the index, from the repository root):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d .whl \
#     dask==2026.7.1 distributed==2026.7.1 partd==1.4.2 locket==1.0.0 tblib==3.2.2 tornado==6.6.1 \
#     zict==3.0.0 icechunk==2.3.0 xarray==2026.9.0
# (the versions of this project's venv; click, cloudpickle, jinja2, msgpack, psutil, pyyaml,
# sortedcontainers, toolz, fsspec, pandas and numpy are in the GPU image already). Then there:
#   source .gpu/prelude.sh; OUT=$OUT MACHINE="one NVIDIA H200 (141 GB), 16 CPU cores, ..." \
#     bash benchmarks/gpu_integrations.sh
# (prelude.sh installs every wheel of .whl/ into /tmp/site, first on PYTHONPATH.)
set -uo pipefail
out=${OUT:-gpu-integrations}; mkdir -p "$out"
export PYTHONPATH="$PWD/tests:${PYTHONPATH:-}"
[ -x .gpu/bin/nginx ] && export PATH="$PWD/.gpu/bin:$PATH"
status=0
step() {  # step NAME TIMEOUT CMD...: run, keep the log, print its tail and the verdict
  local name=$1 limit=$2; shift 2
  echo "== $name"
  timeout "$limit" "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  tail -n 15 "$out/$name.txt"
  echo "-- $name: exit $rc"
  [ "$rc" -eq 0 ] || status=1
}

step versions 60 python3 -c '
import importlib.metadata as md, sys
for name in ("numpy", "pandas", "xarray", "zarr", "dask", "distributed", "icechunk", "cupy-cuda13x", "cloudpickle",
             "tornado", "msgpack", "psutil", "pytest", "pytest-asyncio"):
    try:
        print(f"{name}=={md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name}: MISSING"); sys.exit(1)
import cupy, distributed, icechunk, xarray  # noqa: F401  (they import, not only install)
print("devices:", cupy.cuda.runtime.getDeviceCount())'

pyt=(python3 -m pytest -q -p no:cacheprovider -o addopts="" -rs)
# GPU-marked tests: the xarray engine (CuPy data variables, numpy coordinates, CuPy dask chunks), the dask
# plugin on a worker process, icechunk on GPU buffers, every docs page with GPU code and the README.
step gpu-tests 420 "${pyt[@]}" -m gpu tests/integrations tests/docs
# The rest of the integrations on the GPU machine (placements are "device" there): round trips against
# plain xarray + zarr, dask LocalCluster with a worker restart, icechunk with host buffers.
step integrations 420 "${pyt[@]}" tests/integrations --ignore=tests/integrations/test_packaging.py

# The GPU notebooks: run in this interpreter (no Jupyter kernel here), outputs recorded into copies in $OUT;
# copy them over notebooks/ to publish.
mkdir -p "$out/notebooks"
for nb in xarray-on-gpu verify-the-path; do
  cp "notebooks/$nb.ipynb" "$out/notebooks/$nb.ipynb"
  step "notebook-$nb" 300 python3 tests/docs/record_notebook.py "$out/notebooks/$nb.ipynb" --in-process \
    --machine "${MACHINE:-one NVIDIA H200 (141 GB), 16 CPU cores}"
done
echo "== summary"
for f in gpu-tests integrations; do echo "$f: $(tail -n 1 "$out/$f.txt")"; grep -hE "^(FAILED|ERROR) " "$out/$f.txt"; done
echo "overall: $([ $status -eq 0 ] && echo OK || echo FAILURES) (logs in $out)"
exit $status
