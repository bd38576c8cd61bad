"""The anchors' side of the structural-tag benchmark: compile time (process CPU time) and
first mask of the `tools-N.json` tags that `structural/examples/tools_bench.rs` writes,
over the same vocabulary (`vocab-NAME.json`, token bytes in hex).

- XGrammar: `GrammarCompiler.compile_structural_tag` on the tag itself (one thread, no
  cache), then `GrammarMatcher.fill_next_token_bitmask`.
- llguidance: its own equivalent of the tag, `StructTag.to_grammar` (a Lark grammar of
  free text whose lazy lexeme stops at the trigger, then one tag per tool, each with the
  tool's JSON schema, lenient: unknown formats left unchecked), compiled by `LLMatcher`; the first `compute_bitmask` finishes the
  lazy parts of its compile, so its compile column is construction plus first mask.

    python bench/structural/anchors.py DIR smollm2 25,100,400 [llguidance,xgrammar]
"""

import json
import sys
import time
from importlib.metadata import version

import llguidance as llg
import xgrammar as xgr


class RawTokenizer:
    """A tokenizer of raw token bytes for llguidance: greedy longest match."""

    def __init__(self, tokens, eos):
        self.tokens = tokens
        self.eos_token_id = eos
        self.bos_token_id = None
        self.by_bytes = {t: i for i, t in enumerate(tokens) if t}
        self.longest = max(len(t) for t in tokens)

    def __call__(self, text):
        data = text if isinstance(text, bytes) else text.encode()
        out, i = [], 0
        while i < len(data):
            for n in range(min(self.longest, len(data) - i), 0, -1):
                t = self.by_bytes.get(data[i : i + n])
                if t is not None:
                    out.append(t)
                    i += n
                    break
            else:
                raise ValueError(f"no token for byte {data[i]}")
        return out


def xgrammar_row(info, tag, n, name):
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    t0 = time.process_time()
    g = compiler.compile_structural_tag(tag)
    compile_s = time.process_time() - t0
    m = xgr.GrammarMatcher(g)
    mask = xgr.allocate_token_bitmask(1, info.vocab_size)
    t0 = time.process_time()
    m.fill_next_token_bitmask(mask)
    first = time.process_time() - t0
    return f"| {n} | {name} | XGrammar {version('xgrammar')} `compile_structural_tag` | {compile_s * 1e3:.1f} ms | {first * 1e3:.2f} ms |"


def lenient(schema):
    """The schema with llguidance's `lenient` flag: a format it does not know (`byte`) is
    then left unchecked instead of refused."""
    return {**schema, "x-guidance": {"lenient": True}}


def llguidance_row(tokenizer, tag, n, name):
    fmt = json.loads(tag)["format"]
    # Each tag's trigger: the one of the tag's triggers that its begin starts with.
    trigger = lambda begin: next(t for t in fmt["triggers"] if begin.startswith(t))
    tags = [
        llg.StructTag(trigger=trigger(t["begin"]), begin=t["begin"], grammar=lenient(t["content"]["json_schema"]), end=t["end"])
        for t in fmt["tags"]
    ]
    t0 = time.process_time()
    lark = llg.StructTag.to_grammar(tags, assume_special=False)
    m = llg.LLMatcher(tokenizer, llg.LLMatcher.grammar_from_lark(lark))
    built = time.process_time() - t0
    if m.is_error():
        raise RuntimeError(m.get_error())
    t0 = time.process_time()
    m.compute_bitmask()
    first = time.process_time() - t0
    return f"| {n} | {name} | llguidance {version('llguidance')} `StructTag` (Lark) | {(built + first) * 1e3:.1f} ms | {first * 1e3:.2f} ms |"


def main():
    folder, name, counts = sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3].split(",")]
    v = json.load(open(f"{folder}/vocab-{name}.json"))
    tokens = [bytes.fromhex(t) for t in v["tokens"]]
    info = xgr.TokenizerInfo(tokens, vocab_type=xgr.VocabType.RAW, stop_token_ids=v["eos"])
    tokenizer = llg.LLTokenizer(llg.TokenizerWrapper(RawTokenizer(tokens, v["eos"][0])))
    print("| tools | vocab | anchor | compile (CPU) | first mask |")
    print("|---:|---|---|---:|---:|")
    anchors = sys.argv[4].split(",") if len(sys.argv) > 4 else ["llguidance", "xgrammar"]
    for n in counts:
        tag = open(f"{folder}/tools-{n}.json").read()
        if "llguidance" in anchors:
            print(llguidance_row(tokenizer, tag, n, name), flush=True)
        if "xgrammar" in anchors:
            print(xgrammar_row(info, tag, n, name), flush=True)


if __name__ == "__main__":
    main()
