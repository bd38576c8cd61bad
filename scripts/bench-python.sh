#!/usr/bin/env bash
# The Python bench (python/bench/bench.py): Stencil's per-token mask time through its
# Python package against XGrammar's and llguidance's Python packages, on the two test
# models' vocabularies; writes python/bench/RESULTS.md and prints it.
#
#   scripts/bench-python.sh [--sample 30] [--vocab smollm2,gemma] [--engines stencil,xgrammar,llguidance]
#                           [--repeats 3] [--corpus ../shared/corpus/jsonschemabench] [--json FILE]
#
# The bench runs in its own virtual environment, ${STENCIL_BENCH_VENV:-.venv-python-bench},
# so that XGrammar never enters the test environment. It is made on first use:
#
# * when the test environment ${STENCIL_PYTHON_VENV:-.venv-python} (scripts/test-python.sh)
#   exists and imports stencil, the bench environment is layered on it: a .pth file adds
#   the test environment's site-packages (stencil as built there, llguidance, torch,
#   transformers...), and only what the bench adds (xgrammar) is installed into the bench
#   environment; torch is not downloaded twice;
# * otherwise it is a standalone environment: python/bench/requirements.txt, then the
#   stencil package itself with `pip install ./python` (a maturin release build of the
#   Rust extension: several minutes).
#
# Models: scripts/fetch-models.sh (into $STENCIL_MODELS_DIR, default ~/.cache/stencil/models).
# A full run (30 corpus schemas + the fixtures, both vocabularies, three engines) takes
# about 10 minutes on 2 cores; --sample N takes fewer schemas.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BASE="${STENCIL_PYTHON_VENV:-.venv-python}"
VENV="${STENCIL_BENCH_VENV:-.venv-python-bench}"
PY3="${PYTHON:-python3}"
PIP_FLAGS=(--quiet --disable-pip-version-check)

if [ ! -x "$VENV/bin/python" ]; then
    "$PY3" -m venv "$VENV"
    if [ -x "$BASE/bin/python" ] && "$BASE/bin/python" -c "import stencil._stencil" 2>/dev/null; then
        base_site="$("$BASE/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
        bench_site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
        # addsitedir (not a bare path) so that the base's own .pth files (the editable
        # stencil install) are processed too.
        echo "import site; site.addsitedir('$base_site')" >"$bench_site/zz-stencil-test-venv.pth"
        echo "bench environment $VENV layered on $BASE" >&2
    else
        echo "bench environment $VENV: standalone (no usable $BASE)" >&2
        "$VENV/bin/pip" install "${PIP_FLAGS[@]}" -r python/bench/requirements.txt
        "$VENV/bin/pip" install "${PIP_FLAGS[@]}" ./python
    fi
fi

# What the bench needs beyond the test environment (a no-op once installed).
if ! "$VENV/bin/python" -c "import xgrammar, llguidance, stencil._stencil, jsonschema, transformers, torch" 2>/dev/null; then
    "$VENV/bin/pip" install "${PIP_FLAGS[@]}" -r python/bench/requirements.txt
fi
if ! "$VENV/bin/python" -c "import stencil._stencil" 2>/dev/null; then
    echo "stencil is not importable in $VENV: build it with scripts/test-python.sh, or delete $VENV to make a standalone one" >&2
    exit 1
fi

exec "$VENV/bin/python" python/bench/bench.py "$@"
