#!/usr/bin/env bash
# The Python package against the real serving engines: the pinned vLLM
# (python/requirements-vllm.txt) and SGLang (python/requirements-sglang.txt) in a venv of
# their own, .venv-vllm/ (their torch, transformers and llguidance pins differ from the
# main suite's; about 9.5 GB, 5 to 11 minutes to install on 2 cores, no pip cache needed),
# with the stencil package built into it (scripts/build-python.sh, cached), then pytest on
# python/tests/engines/ (vLLM's front end and StructuredOutputManager, SGLang's grammar
# manager, mask update and EAGLE tree masks, driven as their schedulers drive them) and the
# adapters' own tests, this time over the engines' real base classes.
# scripts/test-python.sh calls it after the main Python suite.
#
#   scripts/test-python-engines.sh [pytest arguments]
#   VENV_ENGINES=/path/to/venv scripts/test-python-engines.sh
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VENV_ENGINES:-.venv-vllm}"
VENV="$VENV" REQUIREMENTS=python/requirements-vllm.txt scripts/build-python.sh

# SGLang without its dependencies (see python/requirements-sglang.txt); stamped like
# build-python.sh's requirements, and redone whenever those were reinstalled.
STAMP="$VENV/.stencil-sglang"
if ! cmp -s python/requirements-sglang.txt "$STAMP" || [ "$VENV/.stencil-requirements" -nt "$STAMP" ]; then
    echo "== python (engines): installing python/requirements-sglang.txt into $VENV (--no-deps)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps -r python/requirements-sglang.txt
    cp python/requirements-sglang.txt "$STAMP"
fi

echo "== python (engines): pytest python/tests/engines and the adapters' tests"
OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" "$VENV/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
    python/tests/engines python/tests/test_vllm_backend.py python/tests/test_sglang_backend.py \
    python/tests/test_lark.py "$@"
