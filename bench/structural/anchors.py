"""XGrammar's side of the structural-tag benchmark: compile time (process CPU time) and
first mask of the `tools-N.json` tags that `structural/examples/tools_bench.rs` writes,
over the same vocabulary (`vocab-NAME.json`, token bytes in hex).

    python bench/structural/anchors.py DIR smollm2 25,100,400
"""

import json
import sys
import time

import xgrammar as xgr


def main():
    folder, name, counts = sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3].split(",")]
    v = json.load(open(f"{folder}/vocab-{name}.json"))
    tokens = [bytes.fromhex(t) for t in v["tokens"]]
    info = xgr.TokenizerInfo(tokens, vocab_type=xgr.VocabType.RAW, stop_token_ids=v["eos"])
    print("| tools | vocab | XGrammar compile (CPU) | first mask |")
    print("|---:|---|---:|---:|")
    for n in counts:
        tag = open(f"{folder}/tools-{n}.json").read()
        compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        t0 = time.process_time()
        g = compiler.compile_structural_tag(tag)
        compile_s = time.process_time() - t0
        m = xgr.GrammarMatcher(g)
        mask = xgr.allocate_token_bitmask(1, info.vocab_size)
        t0 = time.process_time()
        m.fill_next_token_bitmask(mask)
        first = time.process_time() - t0
        print(f"| {n} | {name} | {compile_s * 1e3:.1f} ms | {first * 1e3:.2f} ms |")


if __name__ == "__main__":
    main()
