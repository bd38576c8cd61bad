#!/usr/bin/env bash
# The decoding experiment of the README, set-up included: system packages, both models
# (pip), a release build of `stencil`, then `stencil experiment` over
# fixtures/experiments/decoding.toml into examples/experiment/ (samples.jsonl, metrics,
# SVG charts, report.md). A few minutes on 2 cores after the build. Extra arguments go to
# `stencil experiment` (e.g. --samples 2 --threads 1; --report-only rewrites the report from
# the committed samples.jsonl without decoding).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
echo "== fetching models (cached after the first run)" >&2
scripts/fetch-models.sh >/dev/null
echo "== building stencil (release; the first build compiles llama.cpp, about 8 minutes on 2 cores)" >&2
cargo build --release --locked -p stencil-cli
echo "== stencil experiment fixtures/experiments/decoding.toml --out examples/experiment" >&2
exec target/release/stencil experiment fixtures/experiments/decoding.toml --out examples/experiment "$@"
