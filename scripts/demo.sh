#!/usr/bin/env bash
# The main job: write a small zarr array, read it back through gdsstore (GPU when present, host
# otherwise) and print the trace of the routes the bytes took.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/gdsstore demo "$@"
