#!/usr/bin/env bash
# The decoding study of the README, set-up included: system packages, both models (pip), a
# build of `stencil`, then `stencil experiment fixtures/experiments/decoding.toml --out
# examples/experiment` (samples.jsonl.gz, run.json, metrics.csv, SVG charts, report.md).
# The full study takes about an hour on 2 cores after the build (the report's provenance
# line says how long it took). Extra arguments go to `stencil experiment`: --quick runs the
# smoke-test variant into a scratch folder instead of examples/experiment; --threads N;
# --report-only re-renders the report from the committed samples without decoding.
#
# `stencil` is built with the test profile, as `cargo test` builds it: one llama.cpp build
# (about 8 minutes on 2 cores the first time) serves the test suite and the study.
set -euo pipefail
cd "$(dirname "$0")/.."

out=examples/experiment
for arg in "$@"; do
    if [ "$arg" = --quick ]; then
        out="${TMPDIR:-/tmp}/stencil-experiment-quick"
    fi
done

scripts/setup.sh
echo "== fetching models (cached after the first run)" >&2
scripts/fetch-models.sh >/dev/null
echo "== building stencil (test profile)" >&2
CARGO_INCREMENTAL=0 cargo build --profile test --locked -p stencil-cli
echo "== stencil experiment fixtures/experiments/decoding.toml --out $out $*" >&2
exec target/debug/stencil experiment fixtures/experiments/decoding.toml --out "$out" "$@"
