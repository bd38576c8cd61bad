#!/usr/bin/env bash
# Side-by-side benchmark of Stencil and llguidance: compile time, per-token mask time
# (thread CPU time, one thread), and mask agreement, on llama.cpp's GBNF grammars and the
# SmolLM2 (49k) and Gemma 3 (262k) vocabularies; then JSON Schema (both engines' native
# compilers) on a sample of JSONSchemaBench's dev split, read in place from
# ../shared/corpus/jsonschemabench (--corpus to move it); then decoding on llama.cpp with
# both real models (free, Stencil's masks, llama.cpp's own GBNF sampler); then the
# tool-calling evaluation (multi-stage, one grammar, unconstrained); then inference-time
# scaling (N samples decoded together vs N sequential generations on both models, greedy
# vs self-consistency on fixtures/scaling/arithmetic.jsonl); then watermark detection (true
# and false positives, both models, free and under a schema). Writes BENCHMARKS.md at the
# repo root; the sections of parts not rerun are kept from the previous BENCHMARKS.md
# (the GBNF and JSON Schema ones when neither of those two parts is rerun).
#
#   scripts/bench.sh                          # full run (about 35 minutes on 2 cores, builds warm)
#   scripts/bench.sh --schemas-per-subset 5   # quicker; any stencil-bench option passes through
#   scripts/bench.sh --parts gbnf             # only the GBNF part (2-3 minutes), no corpus needed
#   scripts/bench.sh --parts decode           # only decoding on llama.cpp (about 3 minutes)
#   scripts/bench.sh --parts tools            # only the tool-calling evaluation (about 5 minutes)
#   scripts/bench.sh --parts scaling          # only inference-time scaling (about 20 minutes)
#   scripts/bench.sh --parts watermark        # only watermark detection rates (about 20 minutes)
#   scripts/bench.sh --help                   # the options
#
# The bench crate (bench/, package stencil-bench) is a workspace member outside
# default-members, so the normal build and tests never compile llguidance.
set -euo pipefail
cd "$(dirname "$0")/.."
export STENCIL_BENCH_RUSTC="$(rustc --version)"
STENCIL_BENCH_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git status --porcelain 2>/dev/null | grep -v '^?? ' || true)" ]; then
    STENCIL_BENCH_COMMIT="$STENCIL_BENCH_COMMIT (with uncommitted changes)"
fi
export STENCIL_BENCH_COMMIT
scripts/fetch-models.sh >/dev/null
# The decode part converts its schema to GBNF with the release CLI; the tools part runs the
# tool-calling evaluation's release binary.
cargo build --release --quiet -p stencil-cli
cargo build --release --quiet -p stencil-tools --example eval
exec cargo run --release --quiet -p stencil-bench -- --out BENCHMARKS.md "$@"
