#!/usr/bin/env bash
# Side-by-side benchmark of Stencil and llguidance: compile time, per-token mask time
# (thread CPU time, one thread), and mask agreement, on llama.cpp's GBNF grammars and the
# SmolLM2 (49k) and Gemma 3 (262k) vocabularies; then JSON Schema (both engines' native
# compilers) on a sample of JSONSchemaBench's dev split, read in place from
# ../shared/corpus/jsonschemabench (--corpus to move it); then decoding on llama.cpp with
# both real models (free, Stencil's masks, llama.cpp's own GBNF sampler); then speculative
# decoding (plain vs prompt lookup vs the draft model on copy-heavy extractions); then the
# tool-calling evaluation (multi-stage, one grammar, unconstrained); then inference-time
# scaling (N samples decoded together vs N sequential generations on both models, greedy
# vs self-consistency on fixtures/scaling/arithmetic.jsonl); then watermark detection (true
# and false positives, both models, free and under a schema); then the Python packages'
# part (scripts/bench-python.sh) and serving, stencil serve vs llama-server
# (scripts/bench-server.sh). Writes BENCHMARKS.md at the repo root; the sections of parts
# not rerun are kept from the previous BENCHMARKS.md (the GBNF and JSON Schema ones when
# neither of those two parts is rerun).
#
#   scripts/bench.sh                          # full run (about 35 minutes on 2 cores, builds warm,
#                                             # and the python and server parts below)
#   scripts/bench.sh --schemas-per-subset 5   # quicker; any stencil-bench option passes through
#   scripts/bench.sh --parts gbnf             # only the GBNF part (2-3 minutes), no corpus needed
#   scripts/bench.sh --parts decode           # only decoding on llama.cpp (about 3 minutes)
#   scripts/bench.sh --parts speculation      # only speculative decoding on copy-heavy extractions
#                                             # (prompt lookup, draft model; about 8 minutes)
#   scripts/bench.sh --parts tools            # only the tool-calling evaluation (about 5 minutes)
#   scripts/bench.sh --parts scaling          # only inference-time scaling (about 20 minutes)
#   scripts/bench.sh --parts watermark        # only watermark detection rates (about 20 minutes)
#   scripts/bench.sh --parts python           # only the Python packages' part (scripts/bench-python.sh,
#                                             # about 7 minutes): Stencil vs XGrammar vs llguidance
#   scripts/bench.sh --parts server           # only serving (scripts/bench-server.sh, about 10 minutes,
#                                             # plus 10 to build llama-server once): stencil serve vs
#                                             # llama-server, 1/4/8 concurrent clients
#   scripts/bench.sh --parts structural       # only structural tags over 25, 100, 400 tools (Stencil, XGrammar, llguidance)
#   scripts/bench.sh --parts tail             # only the whole dev split's cold-mask and compile
#                                             # tail, Stencil alone (bench/examples/mask_digest.rs,
#                                             # about 3 minutes)
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

# `python` and `server` in --parts (or no --parts: everything) are run by their own scripts,
# scripts/bench-python.sh and scripts/bench-server.sh; their reports become the sections
# *Through Python* and *Serving*, which the Rust bench keeps when it rewrites BENCHMARKS.md.
# The other parts go to the Rust bench.
args=() parts="" python=1 server=1 tail=1 structural=1 given_parts=0
while [ $# -gt 0 ]; do
    case "$1" in
        --parts) parts="$2" given_parts=1; shift 2 ;;
        --parts=*) parts="${1#--parts=}" given_parts=1; shift ;;
        *) args+=("$1"); shift ;;
    esac
done
if [ "$given_parts" = 1 ]; then
    case ",$parts," in *,python,*) python=1 ;; *) python=0 ;; esac
    case ",$parts," in *,server,*) server=1 ;; *) server=0 ;; esac
    case ",$parts," in *,tail,*) tail=1 ;; *) tail=0 ;; esac
    case ",$parts," in *,structural,*) structural=1 ;; *) structural=0 ;; esac
    parts="$(echo ",$parts," | sed 's/,python,/,/g; s/,server,/,/g; s/,tail,/,/g; s/,structural,/,/g; s/^,//; s/,$//')"
    [ -n "$parts" ] && args+=(--parts "$parts")
fi

# Puts a script's Markdown report into BENCHMARKS.md as the section `## TITLE` (in place of
# the section whose heading starts like TITLE up to its colon, else at the end).
splice() { # REPORT TITLE SCRIPT
    python3 - "$1" BENCHMARKS.md "$2" "$3" <<'PY'
import re, sys
report, target, title, script = sys.argv[1:]
results, old = (open(p, encoding="utf-8").read() for p in (report, target))
body = results.split("\n", 1)[1].strip()            # without its own title
body = re.sub(r"^(#+) ", r"#\1 ", body, flags=re.M)  # its headings below the section's
section = f"## {title}\n\nGenerated by `{script}` (also `{report}`).\n\n{body}\n"
heading = re.escape("## " + title.split(":")[0])
m = re.search(rf"^{heading}.*?(?=^## |\Z)", old, flags=re.M | re.S)
new = old[:m.start()] + section + old[m.end():] if m else old.rstrip() + "\n\n" + section
open(target, "w", encoding="utf-8").write(new)
PY
}
if [ "$python" = 1 ]; then
    scripts/bench-python.sh
    splice python/bench/RESULTS.md \
        "Through Python: Stencil vs XGrammar vs llguidance (their Python packages)" scripts/bench-python.sh
fi
if [ "$server" = 1 ]; then
    scripts/bench-server.sh
    splice server/bench/RESULTS.md "Serving: stencil serve vs llama-server" scripts/bench-server.sh
fi
if [ "$tail" = 1 ]; then
    corpus=../shared/corpus/jsonschemabench
    {
        echo "# The tail on the whole dev split"
        echo
        echo "Every schema of JSONSchemaBench's dev split (\`$corpus\`) with a valid test instance, Stencil"
        echo "alone: a compact, lenient compile (schema compiler + engine), then the instance's tokens replayed"
        echo "cold (a fresh grammar) and warm; thread CPU time, one thread, schemas one after the other in one"
        echo "process, so what is built once per process or vocabulary (the formats' regexes, a trie of"
        echo "plain-text tokens per piece length) is paid by the first schema that needs it. The digest hashes"
        echo "every mask: engine changes that keep masks must keep it. Command:"
        echo "\`cargo run --release -p stencil-bench --example mask_digest -- CORPUS VOCAB\`."
        echo
        echo "What is left over 5 ms are first visits that walk the vocabulary from several states at once"
        echo "or with most tokens cut: object keys matched by overlapping unanchored \`patternProperties\`"
        echo "(each pattern's search is a state of its own, walked on its own), and patterns whose classes"
        echo "split most tokens. Over 50 ms are the largest schemas (hundreds of kB, tens of thousands of"
        echo "rules generated); the schema compiler's time grows with the rules they generate. llguidance"
        echo "(Python package, same options, one run on 2026-12-04): kb_1161 161 ms (Stencil 83),"
        echo "cityjson.min.schema 294 ms (77); service-schema and Github_ultra/o48661 refused as too large."
        for vocab in gemma3 smollm2; do
            echo
            echo "### $vocab"
            echo
            echo '```text'
            cargo run --release --quiet -p stencil-bench --example mask_digest -- "$corpus" "$vocab"
            echo '```'
        done
    } >bench/TAIL.md
    splice bench/TAIL.md "Whole dev split: the cold-mask and compile tail (Stencil)" "scripts/bench.sh --parts tail"
fi
if [ "$structural" = 1 ]; then
    corpus=../shared/corpus/jsonschemabench
    out="$(mktemp -d)"
    scripts/build-python.sh >/dev/null
    {
        echo "# Structural tags: a triggered_tags over N tools"
        echo
        echo "A \`triggered_tags\` (trigger \`<tool_call>\`) over N Hermes / Qwen tool tags, each"
        echo "\`<tool_call>\\n{\"name\": \"NAME\", \"arguments\": \` + the tool's schema + \`}\\n</tool_call>\`. Tools: every"
        echo "schema of the dev split's \`MCPspec\`, then \`Glaiveai2K\`'s, in file-name order, those that compile on"
        echo "their own in strict mode. Process CPU time, best of 3 (the anchors: one compile, one thread, no cache)."
        echo "Stencil: \`cargo run --release -p stencil-structural --example tools_bench\`; the anchors:"
        echo "\`bench/structural/anchors.py\` on the same tags and vocabulary (XGrammar 0.2.8's"
        echo "\`compile_structural_tag\`; llguidance's own equivalent, \`StructTag.to_grammar\`, its schemas lenient,"
        echo "its compile column including the first mask, which finishes its lazy compile). *tag → IR*: the tag's"
        echo "grammar, its schemas compiled by one \`SchemaBatch\` (what they share written once); *schemas alone*: the"
        echo "tools' schemas compiled one by one, apart; *first mask (in a tag)*: after the prompt-free prefix"
        echo "\`Let me check. <tool_call>...{\`; *warm mask p99*: along random walks, each mask computed twice."
        for vocab in smollm2 gemma; do
            echo
            echo "### $vocab"
            echo
            cargo run --release --quiet -p stencil-structural --example tools_bench -- "$corpus" "$vocab" 25,100,400 "$out" | grep '^|'
            echo
            .venv-python/bin/python bench/structural/anchors.py "$out" "$vocab" 25,100,400 2>/dev/null
        done
    } >bench/STRUCTURAL.md
    summary="$(.venv-python/bin/python bench/structural/summary.py bench/STRUCTURAL.md)"
    printf '\n%s\n' "$summary" >>bench/STRUCTURAL.md
    rm -r "$out"
    splice bench/STRUCTURAL.md "Structural tags: a triggered_tags over N tools" "scripts/bench.sh --parts structural"
fi
# Only `python`, `server`, `tail` and `structural` in --parts: nothing left for the Rust bench.
if [ "$given_parts" = 1 ] && [ -z "$parts" ]; then
    exit 0
fi
# The decode part converts its schema to GBNF with the release CLI; the tools part runs the
# tool-calling evaluation's release binary.
cargo build --release --quiet -p stencil-cli
cargo build --release --quiet -p stencil-tools --example eval
exec cargo run --release --quiet -p stencil-bench -- --out BENCHMARKS.md "${args[@]}"
