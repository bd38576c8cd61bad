#!/usr/bin/env bash
# The main job, set-up included: system packages (scripts/setup.sh), the default model
# (scripts/fetch-models.sh), a release build of the `stencil` CLI, then schema-valid JSON
# from SmolLM2-135M-Instruct for the example extraction schema. Extra arguments go to
# `stencil generate` (e.g. --stream, --seed 3 --preset creative).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
echo "== fetching models (cached after the first run)" >&2
scripts/fetch-models.sh >/dev/null
echo "== building stencil (release; the first build compiles llama.cpp, about 8 minutes on 2 cores)" >&2
cargo build --release --locked -p stencil-cli
echo "== stencil generate --schema fixtures/schemas/person.json --prompt-file fixtures/prompts/person.txt" >&2
exec target/release/stencil generate --schema fixtures/schemas/person.json \
    --prompt-file fixtures/prompts/person.txt "$@"
