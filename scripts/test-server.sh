#!/usr/bin/env bash
# The black-box suite of `stencil serve`: the official `openai` Python client (with
# `jsonschema` and `pytest`, pip-installed into .venv-server/) against the server, started
# here on 127.0.0.1 on a free port with the default model (SmolLM2, from
# scripts/fetch-models.sh), llama.cpp on one thread, then stopped with SIGTERM (which must
# end it cleanly). The tests are server/tests/*.py; every request has a timeout.
#
# Uses the `stencil` binary of the test profile (target/debug/stencil), which `cargo test`
# has already built: no second llama.cpp build.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-server
PY="${PYTHON:-python3}"
MODEL="${STENCIL_MODELS_DIR:-$HOME/.cache/stencil/models}/smollm2-135m-instruct.q4_1.gguf"
BIN=target/debug/stencil

if [ ! -f "$MODEL" ]; then
    echo "error: $MODEL is missing; run scripts/fetch-models.sh" >&2
    exit 1
fi

echo "== server suite: python venv ($VENV) with openai, jsonschema, pytest"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "openai>=1.66" jsonschema pytest

echo "== server suite: building stencil (test profile)"
CARGO_INCREMENTAL=0 cargo build --locked --profile test -p stencil-cli

PORT=$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
KEY="test-key-$$-$RANDOM"
LOG=$(mktemp)
"$BIN" serve --model "$MODEL" --host 127.0.0.1 --port "$PORT" --parallel 2 --ctx-size 4096 --threads 1 \
    --api-key "$KEY" --queue-size 16 --max-tokens-limit 2048 --shutdown-timeout 10 2>"$LOG" &
PID=$!
stop_server() {
    if kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID" 2>/dev/null || true
        for _ in $(seq 1 150); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$PID" 2>/dev/null || true
    fi
}
trap 'stop_server; rm -f "$LOG"' EXIT

URL="http://127.0.0.1:$PORT"
echo "== server suite: waiting for $URL/health"
for i in $(seq 1 120); do
    if ! kill -0 "$PID" 2>/dev/null; then
        echo "error: the server exited; its log:" >&2
        cat "$LOG" >&2
        exit 1
    fi
    if "$VENV/bin/python" -c "import sys, urllib.request; sys.exit(urllib.request.urlopen('$URL/health', timeout=2).status != 200)" 2>/dev/null; then
        break
    fi
    if [ "$i" = 120 ]; then
        echo "error: the server did not become healthy within 60 s; its log:" >&2
        cat "$LOG" >&2
        exit 1
    fi
    sleep 0.5
done

echo "== server suite: pytest server/tests"
status=0
STENCIL_SERVER_URL="$URL" STENCIL_SERVER_KEY="$KEY" STENCIL_BIN="$BIN" STENCIL_SERVER_MODEL="$MODEL" \
    timeout 600 "$VENV/bin/python" -m pytest -q -p no:cacheprovider server/tests "$@" || status=$?

echo "== server suite: SIGTERM ends the server cleanly"
kill -TERM "$PID"
code=0
for _ in $(seq 1 150); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$PID" 2>/dev/null; then
    echo "error: the server did not stop within 15 s of SIGTERM" >&2
    status=1
else
    wait "$PID" || code=$?
    if [ "$code" != 0 ]; then
        echo "error: the server exited with status $code after SIGTERM" >&2
        status=1
    fi
fi
if [ "$status" != 0 ]; then
    echo "== the server's log:" >&2
    tail -n 80 "$LOG" >&2
fi
exit "$status"
