#!/usr/bin/env bash
# vLLM's own structured-output tests (tests/v1/structured_output/ of the pinned release's
# source distribution, which ships them) with Stencil in place of vLLM's "guidance"
# backend (python/tests/vllm_upstream/stencil_in_place.py), in .venv-vllm/. Outside CI: the
# results are recorded in python/README.md. Three runs: with Stencil as they are (the tests
# that fetch a tokenizer from the model hub fail: it cannot be reached), with Stencil and
# STENCIL_HUB_ALIAS=1 (those tokenizers resolve to the local SmolLM2 one), and the baseline:
# vLLM's own llguidance backend on the same aliases. Reports go to target/vllm-upstream/.
#
#   scripts/test-vllm-upstream.sh [pytest arguments]
#
# Getting the tests: pip downloads and unpacks the source distribution, then fails to
# prepare its metadata (vLLM's build needs its own toolchain); --no-clean keeps the
# unpacked tree, which is all this needs. Nothing of it is copied into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

REPO="$(pwd)"
VENV="${VENV_ENGINES:-.venv-vllm}"
VENV="$VENV" REQUIREMENTS=python/requirements-vllm.txt scripts/build-python.sh
PY="$REPO/$VENV/bin/python"
case "$VENV" in /*) PY="$VENV/bin/python" ;; esac
VERSION=$("$PY" -c "import importlib.metadata as m; print(m.version('vllm'))")
OUT="$(pwd)/target/vllm-upstream"
SRC="$OUT/vllm-$VERSION"
mkdir -p "$OUT"

if [ ! -d "$SRC/tests/v1/structured_output" ]; then
    echo "== vllm upstream: unpacking vllm==$VERSION's source distribution"
    tmp=$(mktemp -d "$OUT/pip-XXXX")
    TMPDIR="$tmp" "$PY" -m pip download --quiet --no-clean --no-deps --no-binary :all: \
        --no-build-isolation "vllm==$VERSION" -d "$tmp" >/dev/null 2>&1 || true
    tree=$(find "$tmp" -maxdepth 4 -type d -path "*/tests/v1" -printf '%h\n' | head -1)
    tree=${tree%/tests}
    if [ -z "$tree" ] || [ ! -f "$tree/setup.py" ]; then
        echo "could not unpack vllm==$VERSION's source distribution (see pip download above)" >&2
        exit 1
    fi
    mv "$tree" "$SRC"
    rm -rf "$tmp"
fi
# vLLM's tests/conftest.py imports tblib (a test requirement of vLLM, not of its wheel).
SITE="$OUT/site"
[ -d "$SITE/tblib" ] || "$PY" -m pip install --quiet --no-deps --target "$SITE" tblib==3.2.2

run() {
    local name=$1
    shift
    echo "== vllm upstream: tests/v1/structured_output ($name)"
    (cd "$SRC" && env "$@" PYTHONPATH="$REPO/python/tests/vllm_upstream:$SITE" \
        "$PY" -m pytest -p stencil_in_place -p no:cacheprovider -q -rA -W ignore::DeprecationWarning \
        --continue-on-collection-errors tests/v1/structured_output ${PYTEST_ARGS:-} \
        >"$OUT/report-$name.txt" 2>&1) || true
    tail -1 "$OUT/report-$name.txt"
}
PYTEST_ARGS="$*"
run stencil-hub-unreachable STENCIL_HUB_ALIAS=0
run stencil-hub-aliased STENCIL_HUB_ALIAS=1
# The baseline: the same tests and tokenizers with vLLM's own llguidance backend.
run llguidance-hub-aliased STENCIL_HUB_ALIAS=1 STENCIL_IN_PLACE=0
