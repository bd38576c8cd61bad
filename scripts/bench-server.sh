#!/usr/bin/env bash
# The serving bench (server/bench/bench.py): `stencil serve` against llama.cpp's
# `llama-server` on the same models, schema, settings and machine — aggregate tokens/s and
# time to first token (p50, p99) with 1, 4 and 8 concurrent clients sending
# schema-constrained, streamed requests. Writes server/bench/RESULTS.md and prints it;
# scripts/bench.sh --parts server splices it into BENCHMARKS.md.
#
#   scripts/bench-server.sh [--models smollm2,gemma3] [--servers stencil,llama-server]
#                           [--clients 1,4,8] [--requests 8] [--threads 2] [--max-tokens 256]
#                           [--llama-kv-unified] [--json FILE]
#
# Builds what it runs, once: target/release/stencil (cargo), and llama-server from the
# pinned llama-cpp-sys-2 crate's llama.cpp (scripts/build-llama-server.sh, into
# target/llama-server/; about 10 minutes on 2 cores the first time). Models:
# scripts/fetch-models.sh. The client is Python's standard library plus `jsonschema` (to
# validate the outputs), in the server suite's virtual environment, .venv-server/. The
# servers run on 127.0.0.1, one at a time; bench.py stops each one (SIGTERM, then SIGKILL)
# however it ends. A full run takes about 10 minutes on 2 cores, half of it llama-server on
# Gemma 3 (its outputs run to --max-tokens).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-server
PY="${PYTHON:-python3}"

scripts/fetch-models.sh >/dev/null
echo "== serving bench: building stencil (release)" >&2
cargo build --release --locked --quiet -p stencil-cli
echo "== serving bench: llama-server" >&2
scripts/build-llama-server.sh >/dev/null   # target/llama-server/build/bin/llama-server, bench.py's default

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import jsonschema" 2>/dev/null; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check jsonschema
fi

exec "$VENV/bin/python" server/bench/bench.py "$@"
