#!/usr/bin/env python3
"""Per-token mask time through Python: Stencil against XGrammar and llguidance.

One run, one process, the same vocabularies and the same instances for every engine:

* vocabularies: the transformers tokenizers of the two test models (SmolLM2-135M, 49,152
  tokens; Gemma 3 270M, 262,144 tokens), converted from their GGUF files; every engine's
  vocabulary is built from that same tokenizer object (Stencil `Vocab.from_huggingface`,
  XGrammar `TokenizerInfo.from_huggingface`, llguidance `llguidance.hf.from_tokenizer`),
  all with Stencil's EOS ids; the extra engine `llguidance-bytes` (not run by default) is
  llguidance on the token bytes alone, as the Rust bench sets it up, to compare the two;
* schemas: the first `--sample` usable schemas of JSONSchemaBench (round-robin over its
  subsets, in name order; read from `--corpus`, never copied) plus the repository's
  `fixtures/schemas/`; a schema is usable when one of its valid test instances validates
  with `jsonschema`;
* compact JSON everywhere (no whitespace, `,` and `:` separators): Stencil
  `compile_json_schema(whitespace="compact", strict=False)`; XGrammar
  `compile_json_schema(any_whitespace=False, separators=(",", ":"), strict_mode=False)`;
  llguidance `grammar_from_json_schema` with `whitespace_flexible: false`, the same
  separators and `lenient: true`, run with `no_forcing` so that its mask is the full
  allowed set (with forcing it returns a single token wherever the grammar forces bytes);
* the instance is serialized compactly (`json.dumps(separators=(",", ":"),
  ensure_ascii=False)`, keys reordered to the schema's declared order), tokenized with the
  model's tokenizer and forced token by token: at every step the full bitmask is filled
  (timed: process CPU time and wall clock), the instance's token must be allowed, and the
  matcher accepts it; after the last token the mask must allow EOS.

Compile time: the engine's compile call (XGrammar's includes its token-mask cache; Stencil
and llguidance build theirs lazily, so part of their work is in the first walk's masks).
The first walk of a fresh grammar is "cold", the later ones (`--repeats`) "warm". Mask
statistics pool the steps of the instances every engine accepted.

Binding overhead: the per-call time of `fill_next_token_bitmask` on a 4-token vocabulary
and a one-state grammar, where the Rust work is a few nanoseconds; what remains is the
Python call, the buffer checks and the GIL release.

    scripts/bench-python.sh [--sample 30] [--vocab smollm2,gemma] [--engines stencil,xgrammar,llguidance]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MODELS = {"smollm2": "smollm2-135m-instruct.q4_1.gguf", "gemma": "gemma-3-270m-q4_k_m.gguf"}
ENGINES = ("stencil", "xgrammar", "llguidance")


# -- vocabularies ------------------------------------------------------------------------


def models_dir() -> Path:
    env = os.environ.get("STENCIL_MODELS_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "stencil" / "models"


def load_tokenizer(name: str):
    """The transformers tokenizer of a test model, converted from its GGUF once and cached
    (as tokenizer files) under ~/.cache/stencil/hf-tokenizers/."""
    import transformers
    from transformers import AutoTokenizer

    transformers.logging.set_verbosity_error()
    cache = Path.home() / ".cache" / "stencil" / "hf-tokenizers" / name
    if not (cache / "tokenizer.json").exists():
        path = models_dir() / MODELS[name]
        if not path.is_file():
            sys.exit(f"missing model {path}: run scripts/fetch-models.sh")
        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        cache.mkdir(parents=True, exist_ok=True)
        tok.save_pretrained(str(cache))
    return AutoTokenizer.from_pretrained(str(cache))


# -- schemas and instances ---------------------------------------------------------------


def resolve_local(schema: Any, root: Any, depth: int = 0) -> Any:
    """A local `$ref` ("#/..." JSON pointer) followed, for key reordering only."""
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#") and depth < 20:
        node = root
        for part in schema["$ref"][1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return schema
        schema, depth = node, depth + 1
    return schema


def reorder(inst: Any, schema: Any, root: Any, depth: int = 0) -> Any:
    """The instance with each object's keys in its schema's declared order (declared
    properties first, others after): the order the engines' grammars write."""
    schema = resolve_local(schema, root)
    if depth > 60 or not isinstance(schema, dict):
        return inst
    props: dict = {}
    parts = [schema] + [resolve_local(s, root) for s in schema.get("allOf", []) if isinstance(s, dict)]
    for key in ("anyOf", "oneOf"):
        branches = [resolve_local(s, root) for s in schema.get(key, []) if isinstance(s, dict)]
        # The branch the instance validates against (with the root's definitions in scope).
        scope = {k: root[k] for k in ("$schema", "definitions", "$defs") if isinstance(root, dict) and k in root}
        chosen = next((b for b in branches if is_valid(inst, {**scope, **b})), None)
        parts += [chosen] if chosen is not None else branches
    for part in parts:
        if isinstance(part, dict) and isinstance(part.get("properties"), dict):
            for k, v in part["properties"].items():
                props.setdefault(k, v)
    if isinstance(inst, dict):
        keys = [k for k in props if k in inst] + [k for k in inst if k not in props]

        def sub(k: str) -> Any:
            if k in props:
                return props[k]
            for pat, v in (schema.get("patternProperties") or {}).items():
                try:
                    if re.search(pat, k):
                        return v
                except re.error:
                    pass
            extra = schema.get("additionalProperties")
            return extra if isinstance(extra, dict) else {}

        return {k: reorder(inst[k], sub(k), root, depth + 1) for k in keys}
    if isinstance(inst, list):
        items = schema.get("items")
        prefix = schema.get("prefixItems") if isinstance(schema.get("prefixItems"), list) else None
        if prefix is None and isinstance(items, list):
            prefix = items
            items = schema.get("additionalItems")
        out = []
        for i, x in enumerate(inst):
            sub = prefix[i] if prefix is not None and i < len(prefix) else items
            out.append(reorder(x, sub if isinstance(sub, dict) else {}, root, depth + 1))
        return out
    return inst


def is_valid(inst: Any, schema: Any) -> bool:
    import jsonschema

    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        return cls(schema).is_valid(inst)
    except Exception:  # noqa: BLE001 - unresolvable refs, bad schemas: not usable
        return False


def corpus_tasks(corpus: Path, sample: int) -> list[dict]:
    """The first `sample` usable schemas, round-robin over the subsets in name order."""
    subsets = [sorted(d.glob("*.json")) for d in sorted(p for p in corpus.iterdir() if p.is_dir())]
    tasks: list[dict] = []
    cursors = [0] * len(subsets)
    while len(tasks) < sample and any(c < len(s) for c, s in zip(cursors, subsets)):
        for i, files in enumerate(subsets):
            if len(tasks) >= sample:
                break
            while cursors[i] < len(files):
                path = files[cursors[i]]
                cursors[i] += 1
                try:
                    doc = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                schema = doc.get("schema")
                if isinstance(schema, str):
                    try:
                        schema = json.loads(schema)
                    except ValueError:
                        continue
                inst = next((t["data"] for t in doc.get("tests") or [] if t.get("valid") and is_valid(t["data"], schema)), None)
                if inst is None or not isinstance(schema, (dict, bool)):
                    continue
                tasks.append({"name": f"{path.parent.name}/{path.stem}", "schema": schema, "instance": reorder(inst, schema, schema)})
                break
    return tasks


def fixture_tasks() -> list[dict]:
    out = []
    for path in sorted((REPO / "fixtures" / "schemas").glob("*.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        valid = path.with_name(path.stem + ".valid.jsonl")
        if not valid.exists():
            continue
        lines = [json.loads(x) for x in valid.read_text(encoding="utf-8").splitlines() if x.strip()]
        # The longest valid instance: the most steps.
        inst = max(lines, key=lambda x: len(json.dumps(x)))
        out.append({"name": f"fixtures/{path.stem}", "schema": schema, "instance": inst})
    return out


def compact(inst: Any) -> str:
    return json.dumps(inst, separators=(",", ":"), ensure_ascii=False)


# -- engines -----------------------------------------------------------------------------
# Each adapter: compile(schema) -> compiled; matcher(compiled) -> m; fill(m) writes the
# bitmask row self.row (a 1-D int32 numpy view); advance(m, token) -> bool.


class StencilEngine:
    name = "stencil"

    def __init__(self, tok, vocab_size: int, eos: list[int]):
        import stencil

        self.st = stencil
        self.vocab = stencil.Vocab.from_huggingface(tok, vocab_size=vocab_size, eos_ids=eos)
        self.compiler = stencil.Compiler(self.vocab)
        self.mask = stencil.allocate_token_bitmask(1, vocab_size)
        self.row = self.mask[0]

    def compile(self, schema):
        return self.compiler.compile_json_schema(schema, whitespace="compact", strict=False)

    def matcher(self, g):
        return self.st.Matcher(g)

    def fill(self, m) -> None:
        m.fill_next_token_bitmask(self.mask, 0)

    def advance(self, m, t: int) -> bool:
        return m.consume_token(t)


class XGrammarEngine:
    name = "xgrammar"

    def __init__(self, tok, vocab_size: int, eos: list[int]):
        import xgrammar as xgr

        self.xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab_size, stop_token_ids=eos)
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.mask = xgr.allocate_token_bitmask(1, vocab_size)  # torch int32 (1, W)
        self.row = self.mask.numpy()[0]

    def compile(self, schema):
        return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"), strict_mode=False)

    def matcher(self, g):
        return self.xgr.GrammarMatcher(g)

    def fill(self, m) -> None:
        m.fill_next_token_bitmask(self.mask, 0)

    def advance(self, m, t: int) -> bool:
        return m.accept_token(t)


class LLGuidanceEngine:
    name = "llguidance"
    options = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":", "lenient": True}

    def __init__(self, tok, vocab_size: int, eos: list[int]):
        import llguidance
        import llguidance.numpy

        self.llg = llguidance
        self.tok = self.tokenizer(tok, vocab_size, eos)
        self.mask = llguidance.numpy.allocate_token_bitmask(1, vocab_size)
        self.row = self.mask[0]
        self.ptr, self.nbytes = self.row.ctypes.data, self.row.nbytes

    @staticmethod
    def tokenizer(tok, vocab_size: int, eos: list[int]):
        import llguidance.hf

        return llguidance.hf.from_tokenizer(tok, n_vocab=vocab_size, eos_token=eos)

    def compile(self, schema):
        top = json.loads(self.llg.LLMatcher.grammar_from_json_schema(schema, overrides=self.options))
        lark = '%llguidance {"no_forcing": true}\nstart: %json ' + json.dumps(top["grammars"][0]["json_schema"])
        m = self.llg.LLMatcher(self.tok, lark, log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return lark

    def matcher(self, lark):
        m = self.llg.LLMatcher(self.tok, lark, log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return m

    def fill(self, m) -> None:
        m.unsafe_compute_mask_ptr(self.ptr, self.nbytes)

    def advance(self, m, t: int) -> bool:
        return m.consume_token(t) and not m.is_error()


class LLGuidanceBytesEngine(LLGuidanceEngine):
    """llguidance set up as `stencil-bench` sets it up in Rust: its tokenizer is the
    vocabulary's token bytes (Stencil's reading of it), special tokens marked as such, the
    HF tokenizer used only to encode text. The same default slicer. Comparing it with
    `llguidance` (built from the HF tokenizer) on the same steps tells whether the set-up
    changes llguidance's mask times."""

    name = "llguidance-bytes"

    @staticmethod
    def tokenizer(tok, vocab_size: int, eos: list[int]):
        import llguidance
        import stencil

        vocab = stencil.Vocab.from_huggingface(tok)

        class Bytes:
            eos_token_id = eos[0]
            bos_token_id = None
            tokens = [vocab.token_bytes(i) for i in range(vocab_size)]
            special_token_ids = [i for i in range(vocab_size) if not vocab.is_text(i)]

            def __call__(self, s):
                return tok.encode(s.decode("utf-8", "replace") if isinstance(s, bytes) else s, add_special_tokens=False)

        return llguidance.LLTokenizer(llguidance.TokenizerWrapper(Bytes()), n_vocab=vocab_size, eos_token=eos)


ADAPTERS = {
    "stencil": StencilEngine,
    "xgrammar": XGrammarEngine,
    "llguidance": LLGuidanceEngine,
    "llguidance-bytes": LLGuidanceBytesEngine,
}


def bit(row: np.ndarray, t: int) -> bool:
    return bool((int(row[t >> 5]) >> (t & 31)) & 1)


def forced_walk(e, compiled, tokens: list[int], eos: list[int]) -> dict:
    m = e.matcher(compiled)
    row, fill, advance = e.row, e.fill, e.advance
    cpu, wall = time.process_time_ns, time.perf_counter_ns
    cpu_ns, wall_ns = [], []
    out: dict[str, Any] = {"accepted": False, "reject_step": None}
    for i, t in enumerate(tokens + [None]):
        c0 = cpu()
        w0 = wall()
        fill(m)
        w1 = wall()
        c1 = cpu()
        cpu_ns.append(c1 - c0)
        wall_ns.append(w1 - w0)
        if t is None:
            out["accepted"] = any(bit(row, x) for x in eos)
            if not out["accepted"]:
                out["reject_step"] = "eos"
            break
        if not bit(row, t) or not advance(m, t):
            out["reject_step"] = i
            break
    out["cpu_us"] = [x / 1e3 for x in cpu_ns]
    out["wall_us"] = [x / 1e3 for x in wall_ns]
    return out


def run_engine(e, tasks: list[dict], eos: list[int], repeats: int, log) -> dict[str, dict]:
    res: dict[str, dict] = {}
    for task in tasks:
        r: dict[str, Any] = {}
        gc.collect()
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            compiled = e.compile(copy.deepcopy(task["schema"]))
        except Exception as exc:  # noqa: BLE001 - an engine refusing a schema is data
            r.update(status="compile_error", error=f"{type(exc).__name__}: {exc}"[:200])
            res[task["name"]] = r
            log(f"  {e.name:10s} {task['name']}: compile error {r['error'][:100]}")
            continue
        r["compile_ms"] = (time.perf_counter() - w0) * 1e3
        r["compile_cpu_ms"] = (time.process_time() - c0) * 1e3
        walks = []
        gc.disable()
        try:
            for _ in range(max(1, repeats)):
                walks.append(forced_walk(e, compiled, task["tokens"], eos))
                if not walks[-1]["accepted"]:
                    break
        finally:
            gc.enable()
        r.update(status="ok", accepted=walks[0]["accepted"], reject_step=walks[0]["reject_step"], cold=walks[0], warm=walks[1:])
        res[task["name"]] = r
        log(
            f"  {e.name:10s} {task['name']}: compile {r['compile_ms']:.2f} ms, {len(task['tokens'])} tokens, "
            f"accepted={r['accepted']}" + ("" if r["accepted"] else f" (step {r['reject_step']})")
        )
    return res


# -- binding overhead --------------------------------------------------------------------


def binding_overhead(calls: int) -> dict[str, float]:
    """Per-call µs of the binding on a near-zero Rust workload."""
    import stencil
    import torch

    vocab = stencil.Vocab.from_tokens([b"<eos>", b"a", b"b", b"ab"], eos_ids=[0])
    g = stencil.Compiler(vocab).compile_regex("(a|b)*")
    m = stencil.Matcher(g)
    out = {}
    np_mask = stencil.allocate_token_bitmask(1, vocab.size)
    t_mask = stencil.allocate_token_bitmask(1, vocab.size, backend="torch")
    cases = {
        "fill_next_token_bitmask, numpy row": lambda: m.fill_next_token_bitmask(np_mask, 0),
        "fill_next_token_bitmask, torch row": lambda: m.fill_next_token_bitmask(t_mask, 0),
        "consume_token + rollback(1)": lambda: (m.consume_token(1), m.rollback(1)),
        "is_accepting": m.is_accepting,
        "empty Python call (lambda: None), for scale": lambda: None,
        "the bench's timer pair around a fill (process_time_ns + perf_counter_ns x2)": lambda: (
            time.process_time_ns(), time.perf_counter_ns(), time.perf_counter_ns(), time.process_time_ns()),
    }
    for name, fn in cases.items():
        for _ in range(1000):
            fn()
        best = []
        for _ in range(5):
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                fn()
            best.append((time.perf_counter_ns() - t0) / calls / 1e3)
        out[name] = min(best)
    # The same fill on a 4-matcher batch, per matcher.
    ms = [stencil.Matcher(g) for _ in range(4)]
    b_mask = stencil.allocate_token_bitmask(4, vocab.size)
    best = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(calls // 4):
            stencil.fill_next_token_bitmask_batch(ms, b_mask)
        best.append((time.perf_counter_ns() - t0) / (calls // 4) / 1e3)
    out["fill_next_token_bitmask_batch of 4 (per call)"] = min(best)
    del torch
    return out


# -- report ------------------------------------------------------------------------------


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    return float(np.percentile(np.asarray(xs), q, method="higher" if q >= 99 else "linear"))


def fmt(x: float | None, nd: int = 1) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.{nd}f}"


def spread(xs: list[float], nd: int = 1) -> str:
    """p50 / p99 / p99.9 / max: the median and the tail a user meets once in a while."""
    return " / ".join(fmt(x, nd) for x in (pct(xs, 50), pct(xs, 99), pct(xs, 99.9), max(xs) if xs else None))


def report(results: dict, tasks_by_vocab: dict, meta: dict, overhead: dict | None) -> str:
    L = ["# Python bench: Stencil vs XGrammar vs llguidance", ""]
    L.append(
        f"Run {meta['date']} on {meta['cpu']} ({meta['nproc']} cores), load average {meta['load_start']} at start, "
        f"{meta['load_end']} at end. Python {meta['python']}; " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + "."
    )
    L.append(
        f"Schemas: {meta['n_corpus']} from JSONSchemaBench (`{meta['corpus']}`, first usable per subset, round-robin) "
        f"+ {meta['n_fixtures']} from `fixtures/schemas/`; compact JSON; {meta['repeats']} walks per instance "
        f"(1 cold + {meta['repeats'] - 1} warm). Command: `{meta['command']}`."
    )
    L.append("")
    L.append(
        "Mask times are per `fill` call through each engine's Python API, in µs, p50 / p99 / p99.9 / max over every "
        "step of the instances **all** engines accepted (CPU = process CPU time, robust to other load; wall = "
        "perf_counter). Compile: ms per schema, p50 / p99 / p99.9 / max over the schemas the engine compiled."
    )
    L.append("")
    L.append("| vocab | engine | compiled | accepted | common steps | compile ms (CPU) | cold mask µs CPU | warm mask µs CPU | warm mask µs wall |")
    L.append("|---|---|---:|---:|---:|---|---|---|---|")
    for vocab, per_engine in results.items():
        tasks = tasks_by_vocab[vocab]
        names = [t["name"] for t in tasks]
        common = [n for n in names if all(per_engine[e].get(n, {}).get("accepted") for e in per_engine)]
        for e, res in per_engine.items():
            compiled = [r for r in res.values() if r["status"] == "ok"]
            accepted = [r for r in compiled if r["accepted"]]
            cms = [r["compile_cpu_ms"] for r in compiled]
            cold = [x for n in common for x in res[n]["cold"]["cpu_us"]]
            warm = [x for n in common for w in res[n]["warm"] for x in w["cpu_us"]]
            warm_wall = [x for n in common for w in res[n]["warm"] for x in w["wall_us"]]
            L.append(
                f"| {vocab} | {e} | {len(compiled)}/{len(res)} | {len(accepted)}/{len(res)} | {len(cold)} | "
                f"{spread(cms, 2)} | {spread(cold)} | {spread(warm)} | {spread(warm_wall)} |"
            )
    L += ["", "Ratios, the other engine over Stencil (above 1: Stencil faster), process CPU time, same steps:", ""]
    L += ["| vocab | engine | compile p50 | cold mask p99 | warm mask p50 | warm mask p99 |", "|---|---|---:|---:|---:|---:|"]
    for vocab, per_engine in results.items():
        names = [t["name"] for t in tasks_by_vocab[vocab]]
        common = [n for n in names if all(per_engine[e].get(n, {}).get("accepted") for e in per_engine)]

        def figures(res):
            cms = [r["compile_cpu_ms"] for r in res.values() if r["status"] == "ok"]
            cold = [x for n in common for x in res[n]["cold"]["cpu_us"]]
            warm = [x for n in common for w in res[n]["warm"] for x in w["cpu_us"]]
            return [pct(cms, 50), pct(cold, 99), pct(warm, 50), pct(warm, 99)]

        if "stencil" not in per_engine:
            continue
        base = figures(per_engine["stencil"])
        for e, res in per_engine.items():
            if e == "stencil":
                continue
            cells = [f"{o / b:.2f}×" if o is not None and b else "-" for o, b in zip(figures(res), base)]
            L.append(f"| {vocab} | {e} | " + " | ".join(cells) + " |")
    L += ["", "The tail, per engine: the slowest cold (first-walk) mask steps and the slowest compiles, with their "
          "schemas (process CPU; mask steps over the instances all engines accepted):", ""]
    L += ["| vocab | engine | slowest cold masks, µs (schema, step) | slowest compiles, ms |", "|---|---|---|---|"]
    for vocab, per_engine in results.items():
        names = [t["name"] for t in tasks_by_vocab[vocab]]
        common = [n for n in names if all(per_engine[e].get(n, {}).get("accepted") for e in per_engine)]
        for e, res in per_engine.items():
            steps = sorted(((x, n, i) for n in common for i, x in enumerate(res[n]["cold"]["cpu_us"])), reverse=True)
            masks = ", ".join(f"{fmt(x)} ({n}, {i})" for x, n, i in steps[:3])
            compiles = sorted(((r["compile_cpu_ms"], n) for n, r in res.items() if r["status"] == "ok"), reverse=True)
            slow = ", ".join(f"{fmt(x, 2)} ({n})" for x, n in compiles[:3])
            L.append(f"| {vocab} | {e} | {masks} | {slow} |")
    issues = []
    for vocab, per_engine in results.items():
        for e, res in per_engine.items():
            for n, r in res.items():
                if r["status"] != "ok":
                    issues.append(f"| {vocab} | {e} | {n} | {' '.join(r['error'].split())[:140].replace('|', '/')} |")
                elif not r["accepted"]:
                    issues.append(f"| {vocab} | {e} | {n} | instance rejected at step {r['reject_step']} |")
    if issues:
        L += ["", "Schemas an engine refused, or instances it rejected (left out of the pooled mask times):", ""]
        L += ["| vocab | engine | schema | what |", "|---|---|---|---|"] + issues
    if overhead:
        L += ["", "Binding overhead: best-of-5 mean per call, µs, on a 4-token vocabulary and a one-state grammar "
              "(the Rust work is a few ns, so this is the Python call, the buffer checks and the GIL release):", ""]
        L += ["| call | µs |", "|---|---:|"] + [f"| {k} | {v:.3f} |" for k, v in overhead.items()]
    L.append("")
    return "\n".join(L)


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("stencil-structured", "xgrammar", "llguidance", "transformers", "torch", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "?"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus" / "jsonschemabench",
                    help="JSONSchemaBench folder of subset folders (default: ../shared/corpus/jsonschemabench)")
    ap.add_argument("--sample", type=int, default=30, help="corpus schemas to take (default 30; 0: fixtures only)")
    ap.add_argument("--vocab", default="smollm2,gemma")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--repeats", type=int, default=3, help="walks per instance: 1 cold + the rest warm (default 3)")
    ap.add_argument("--overhead-calls", type=int, default=20000, help="calls per binding-overhead measurement (0: skip)")
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md", help="the markdown report (default python/bench/RESULTS.md)")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw per-step results here")
    args = ap.parse_args()

    engines = args.engines.split(",")
    for e in engines:
        if e not in ADAPTERS:
            sys.exit(f"unknown engine {e} (have {', '.join(ADAPTERS)})")
    vocabs = args.vocab.split(",")
    for v in vocabs:
        if v not in MODELS:
            sys.exit(f"unknown vocab {v} (have {', '.join(MODELS)})")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    load_start = [round(x, 2) for x in os.getloadavg()]
    t_start = time.perf_counter()
    base_tasks: list[dict] = []
    if args.sample:
        if not args.corpus.is_dir():
            sys.exit(f"no corpus at {args.corpus} (pass --corpus DIR, or --sample 0 for the fixtures only)")
        base_tasks = corpus_tasks(args.corpus, args.sample)
    n_corpus = len(base_tasks)
    base_tasks += fixture_tasks()
    log(f"{n_corpus} corpus schemas + {len(base_tasks) - n_corpus} fixtures")

    results: dict[str, dict] = {}
    tasks_by_vocab: dict[str, list] = {}
    for vocab in vocabs:
        t0 = time.perf_counter()
        tok = load_tokenizer(vocab)
        import stencil

        eos = stencil.Vocab.from_huggingface(tok).eos_ids
        size = len(tok)
        tasks = []
        for t in base_tasks:
            text = compact(t["instance"])
            ids = tok.encode(text, add_special_tokens=False)
            if tok.decode(ids) != text:
                log(f"[{vocab}] {t['name']}: tokenizer round trip differs, left out")
                continue
            tasks.append(dict(t, text=text, tokens=ids))
        tasks_by_vocab[vocab] = tasks
        log(f"[{vocab}] {size} tokens, EOS {eos}, {len(tasks)} instances ({time.perf_counter() - t0:.1f} s)")
        results[vocab] = {}
        for name in engines:
            t1 = time.perf_counter()
            e = ADAPTERS[name](tok, size, eos)
            log(f"[{vocab}] {name}: vocabulary set up in {time.perf_counter() - t1:.1f} s")
            results[vocab][name] = run_engine(e, tasks, eos, args.repeats, log)
            del e
            gc.collect()
    overhead = binding_overhead(args.overhead_calls) if args.overhead_calls and "stencil" in engines else None
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu_name(),
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "versions": versions(),
        "corpus": "../shared/corpus/jsonschemabench" if args.corpus.resolve() == (REPO.parent / "shared" / "corpus" / "jsonschemabench").resolve() else args.corpus.name,
        "n_corpus": n_corpus,
        "n_fixtures": len(base_tasks) - n_corpus,
        "repeats": max(1, args.repeats),
        "load_start": load_start,
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "command": " ".join(["scripts/bench-python.sh", *sys.argv[1:]]),
    }
    md = report(results, tasks_by_vocab, meta, overhead)
    print(md)
    args.out.write_text(md, encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "results": results, "overhead": overhead}), encoding="utf-8")
    log(f"wrote {args.out} in {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
