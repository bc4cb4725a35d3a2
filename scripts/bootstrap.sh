#!/usr/bin/env bash
# Set-up shared by scripts/demo.sh and scripts/test.sh: a Python >= 3.12 virtual environment in .venv
# with gdsstore installed (editable; maturin compiles its native core, so cargo must be on PATH) and at
# least the extras named in $GDSSTORE_EXTRAS (comma-separated). Idempotent and quick when nothing changed:
# a stamp file records the hashes of pyproject.toml and of the core's sources, and the extras installed
# (an editable install takes Python edits as they are made, Rust edits only when built again). Extras only accumulate (the union of what was installed and what is asked for), so running
# the demo and the tests in turn installs once, not each time.
# Usage: bash scripts/bootstrap.sh [-- COMMAND...]: COMMAND (scripts/test.sh: the linters) runs once the Python
# packages are installed, while the core still compiles (else after the set-up), and its exit status is the
# script's where the set-up succeeded.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C  # one sort order for the extras lists compared below

runs_312() {  # a pyenv shim exists for every installed version but only runs for the selected ones
  "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1
}

find_python() {
  local c
  for c in "${GDSSTORE_PYTHON:-}" python3.12 python3.13; do
    if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 && runs_312 "$c"; then
      "$c" -c 'import sys; print(sys.executable)'; return
    fi
  done
  # pyenv keeps 3.12 beside an older default python3 on our machines (.python-version names it).
  if command -v pyenv >/dev/null 2>&1; then
    local v
    for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.(1[2-9])' | sort -V); do
      c=$(PYENV_VERSION=$v pyenv which python 2>/dev/null) && runs_312 "$c" && { echo "$c"; return; }
    done
  fi
  for c in python3 python; do
    if command -v "$c" >/dev/null 2>&1 && runs_312 "$c"; then
      "$c" -c 'import sys; print(sys.executable)'; return
    fi
  done
  echo "gdsstore needs Python >= 3.12 (zarr 3.4 does); none found. Install one or set GDSSTORE_PYTHON." >&2
  exit 1
}

extras_list() {  # "b, a,,a" -> "a,b": sorted, unique, comma-separated
  tr ', ' '\n\n' <<<"$1" | sed '/^$/d' | sort -u | paste -sd, -
}

# One CUDA major per .venv (pyproject.toml): the short names gpu, cufile and nvcomp (CUDA 12's) become the
# extras of the major .venv already has (its explicit extras, else its cuda-bindings or CuPy). Both: refused.
short='gpu|cufile|nvcomp' cu12='cuda12|cufile-cu12|nvcomp-cu12' cu13='cuda13|cufile-cu13|nvcomp-cu13'
has() { tr , '\n' <<<"$1" | grep -qxE "$2"; }
major_of() {  # extras -> 12, 13 or nothing, from the explicit CUDA extras among them
  if has "$1" "$cu13"; then echo 13; elif has "$1" "$cu12"; then echo 12; fi
}
installed_major() {  # the CUDA major of the cuda-bindings or CuPy in .venv, or nothing (never fails)
  { .venv/bin/python -m pip list --format=freeze 2>/dev/null || true; } \
    | sed -nE 's/^cuda[-_]bindings==([0-9]+)\..*/\1/p; s/^cupy-cuda([0-9]+)x==.*/\1/p' | awk 'NR == 1'
}
to_major() {  # $1: extras, $2: 12, 13 or nothing -> $1 with the short names as that major's extras
  [ -n "$2" ] || { echo "$1"; return; }
  local gpu=cuda$2 cufile=cufile-cu$2 nvcomp=nvcomp-cu$2
  tr , '\n' <<<"$1" | sed -e "s/^gpu$/$gpu/" -e "s/^cufile$/$cufile/" -e "s/^nvcomp$/$nvcomp/" \
    | sed '/^$/d' | sort -u | paste -sd, -
}

# --python: the interpreter a new .venv would be made with.
if [ "${1:-}" = --python ]; then find_python; exit 0; fi
meanwhile=()  # the command after --
if [ "${1:-}" = -- ]; then shift; meanwhile=("$@"); fi
run_meanwhile() {  # the command given after --, if any; its status in $meanwhile_status
  meanwhile_status=0
  [ "${#meanwhile[@]}" = 0 ] || "${meanwhile[@]}" || meanwhile_status=$?
}

core_hash() {  # the native core's sources: a change builds it again
  (cd native && find Cargo.toml Cargo.lock src -type f -print0 | sort -z | xargs -0 sha1sum) | sha1sum | cut -c1-12
}

want=$(extras_list "${GDSSTORE_EXTRAS:-}")
hash=$(sha1sum pyproject.toml | cut -c1-12)-$(core_hash)
stamp=.venv/.gdsstore-stamp
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
  py=$(find_python)
  echo "bootstrap: creating .venv with $("$py" --version 2>&1)"
  rm -rf .venv
  "$py" -m venv .venv
fi
# --venv: the virtual environment only (scripts/test.sh builds the core with its Python meanwhile).
if [ "${1:-}" = --venv ]; then exit 0; fi
# The stamp: "v3 <pyproject hash>-<core hash> <extras>"; anything else (an older format, no file) is nothing.
stamp_version="" have_hash="" have=""
[ -f "$stamp" ] && read -r stamp_version have_hash have <"$stamp" || true
[ "$stamp_version" = v3 ] || have_hash="" have=""
major=$(major_of "$want,$have")
want=$(to_major "$want" "$major")
missing=$(comm -23 <(tr , '\n' <<<"$want" | sed '/^$/d') <(tr , '\n' <<<"$have" | sed '/^$/d'))
if [ "$have_hash" = "$hash" ] && [ -z "$missing" ]; then
  run_meanwhile  # installed, with every extra asked for
  exit "$meanwhile_status"
fi
extras=$(extras_list "$have,$want")
# No explicit CUDA extra yet: keep the major of what is in .venv (installed by hand, or an older stamp).
[ -n "$major" ] || ! has "$extras" "$short" || major=$(installed_major)
extras=$(to_major "$extras" "$major")
if has "$extras" "$cu12" && has "$extras" "$cu13"; then
  echo "bootstrap: extras of two CUDA majors ($extras): use the cuda12 or the cuda13 ones" \
    "(docs/install.md; remove .venv to change)" >&2
  exit 2
fi
command -v cargo >/dev/null 2>&1 || { echo "bootstrap: cargo not found: gdsstore's native core is Rust," \
  "built by pip; install the toolchain (https://rustup.rs) and run this again" >&2; exit 1; }
echo "bootstrap: installing gdsstore${extras:+[$extras]} into .venv (the native core compiles meanwhile)"
# The core compiles while the Python packages download and install; the package's build (maturin, in .venv beside
# them, with .venv's Python as the core's compile had it) then finds everything compiled. In a build environment of
# its own, maturin would compile pyo3 and the crate again for that environment's Python (14-22 s).
core_log=$(mktemp)
bash scripts/build_core.sh --build-only >"$core_log" 2>&1 &
core_pid=$!
wait_core() {  # the core's build; its log shown where it failed
  local s=0
  wait "$core_pid" || s=$?
  [ "$s" = 0 ] || cat "$core_log" >&2
  rm -f "$core_log"
  return "$s"
}
status=0
# uv (from PyPI) installs the same packages as pip in about a third of the time: first the dependencies alone
# (then the command given runs beside the compile), then the package itself. pip where uv cannot.
extra_flags=()
for e in $(tr , ' ' <<<"$extras"); do extra_flags+=(--extra "$e"); done
# pyproject.toml's build requirements (maturin), installed with the dependencies
mapfile -t build_requires < <(.venv/bin/python -c \
  'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"], sep="\n")')
uv=(.venv/bin/python -m uv pip install -q --python .venv/bin/python)
if .venv/bin/python -m pip install -q uv && "${uv[@]}" -r pyproject.toml "${extra_flags[@]}" "${build_requires[@]}"; then
  run_meanwhile
  wait_core || status=$?
  [ "$status" != 0 ] || "${uv[@]}" --no-build-isolation --no-deps -e . || "${uv[@]}" --no-deps -e . \
    || .venv/bin/python -m pip install -q --no-deps -e . || status=$?
else
  echo "bootstrap: uv could not install; pip does"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".${extras:+[$extras]}" || status=$?
  wait_core || { [ "$status" != 0 ] || status=1; }
  [ "$status" != 0 ] || run_meanwhile
fi
[ "$status" = 0 ] || exit "$status"
echo "v3 $hash $extras" >"$stamp"
exit "$meanwhile_status"
