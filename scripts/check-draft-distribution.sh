#!/usr/bin/env bash
# Issue 44's black-box check (server/checks/draft_distribution.py): a server with the model
# as its own draft model samples as a plain one does. Not part of CI (minutes of sampling);
# SAMPLES=N sets the samples per server (default 2000).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-server
MODEL="${STENCIL_MODELS_DIR:-$HOME/.cache/stencil/models}/smollm2-135m-instruct.q4_1.gguf"
if [ ! -f "$MODEL" ]; then
    echo "error: $MODEL is missing; run scripts/fetch-models.sh" >&2
    exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "openai>=1.40" jsonschema pytest
CARGO_INCREMENTAL=0 cargo build --locked --profile test -p stencil-cli
STENCIL_BIN=target/debug/stencil STENCIL_SERVER_MODEL="$MODEL" "$VENV/bin/python" server/checks/draft_distribution.py
