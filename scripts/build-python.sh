#!/usr/bin/env bash
# Builds the Python package (python/: the PyO3 module `stencil._stencil` and the `stencil`
# package around it) and installs it, editable, into a virtual environment with what the
# Python tests use (python/requirements-test.txt: pytest, numpy, jsonschema, llguidance,
# transformers, torch...). Cached: a second run only rebuilds what changed.
#
#   scripts/build-python.sh              # into .venv-python/
#   scripts/build-python.sh --wheel      # also an abi3 wheel in target/wheels/
#   VENV=/path/to/venv scripts/build-python.sh
#   VENV=.venv-vllm REQUIREMENTS=python/requirements-vllm.txt scripts/build-python.sh
#
# Without this script: `pip install ./python` builds and installs the same package.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VENV:-.venv-python}"
REQUIREMENTS="${REQUIREMENTS:-python/requirements-test.txt}"
PY="${PYTHON:-python3}"
WHEEL=0
[ "${1:-}" = "--wheel" ] && WHEEL=1

if [ ! -x "$VENV/bin/python" ]; then
    echo "== python: creating $VENV"
    "$PY" -m venv "$VENV"
fi
# The stamp skips pip when the requirements did not change (torch alone is gigabytes).
STAMP="$VENV/.stencil-requirements"
if ! cmp -s "$REQUIREMENTS" "$STAMP"; then
    echo "== python: installing $REQUIREMENTS into $VENV (first run: a few minutes)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir -r "$REQUIREMENTS"
    cp "$REQUIREMENTS" "$STAMP"
fi

# Its own target directory: the extension's features (pyo3, release) differ from the
# test profile's, and a separate directory never waits on `cargo test`'s lock.
export CARGO_TARGET_DIR="${STENCIL_PYTHON_TARGET:-target/python}"
export CARGO_INCREMENTAL=0
echo "== python: building stencil._stencil (release) into $VENV"
VIRTUAL_ENV="$(cd "$VENV" && pwd)" "$VENV/bin/maturin" develop --release --locked -m python/Cargo.toml --quiet 2>&1 \
    | grep -v "^📦\|^🔗\|^🐍\|^💻\|^🛠\|^Ignoring\|^Looking in" || true
"$VENV/bin/python" -c "import stencil._stencil as s; print('== python: stencil', s.__version__, 'installed')"

if [ "$WHEEL" = 1 ]; then
    "$VENV/bin/maturin" build --release --locked -m python/Cargo.toml -o target/wheels
fi
