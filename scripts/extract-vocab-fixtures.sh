#!/usr/bin/env bash
# Remakes fixtures/vocab/*.tok.gguf.gz from the full models: only their `general.*` and
# `tokenizer.*` metadata, no tensors, gzip-compressed. Fetches the models first
# (scripts/fetch-models.sh, idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t models < <(scripts/fetch-models.sh)
smollm2="${models[0]}"
gemma3="${models[1]}"
mkdir -p fixtures/vocab
cargo build --quiet --release -p stencil-mask --example extract_vocab
bin="${CARGO_TARGET_DIR:-target}/release/examples/extract_vocab"
"$bin" "$smollm2" fixtures/vocab/smollm2-135m.tok.gguf.gz
"$bin" "$gemma3" fixtures/vocab/gemma3-270m.tok.gguf.gz
