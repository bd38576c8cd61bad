#!/usr/bin/env bash
# The Python package's suite: builds and installs it (scripts/build-python.sh, into
# .venv-python/), then runs python/tests/ with pytest: masks against llguidance's Python
# package on both real vocabularies, matcher semantics against replays, threaded fills,
# the vLLM and SGLang adapters' own tests, the Lark converter, and transformers generate()
# with the logits processor on SmolLM2 (torch on CPU). Then the adapters inside the real
# vLLM and SGLang, in their own venv: scripts/test-python-engines.sh.
# The models come from scripts/fetch-models.sh; a missing one fails the suite.
# Arguments go to the main suite's pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VENV:-.venv-python}"
export VENV
scripts/build-python.sh

echo "== python: pytest python/tests"
# One torch thread per test process: two cores, and the masks' own thread pool.
OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" "$VENV/bin/python" -m pytest -q -p no:cacheprovider python/tests \
    --ignore=python/tests/engines "$@"

scripts/test-python-engines.sh
