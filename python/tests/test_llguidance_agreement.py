"""Stencil's masks against llguidance's (the `llguidance` Python package), bit for bit.

Both engines get their vocabulary from the same transformers tokenizer object (Stencil:
`Vocab.from_huggingface(tok)`, llguidance: `llguidance.hf.from_tokenizer(tok)`), on both
real vocabularies (SmolLM2, 49,152 tokens, byte-level BPE; Gemma 3, 262,144 tokens,
SentencePiece with byte fallback), and grammars both engines define the same way:

* regexes: Stencil `compile_regex`, llguidance `LLMatcher.grammar_from_regex` (both anchored
  at both ends, both Rust `regex` syntax through regex-syntax);
* GBNF: Stencil `compile_grammar`, llguidance `llguidance.grammar_from("gbnf", ...)` (its
  GBNF -> Lark converter), on grammars whose lexemes are unambiguous, so llguidance's
  greedy lexer means the same as the CFG;
* JSON Schema, compact: Stencil `compile_json_schema(schema, whitespace="compact")`,
  llguidance `LLMatcher.grammar_from_json_schema` with `whitespace_flexible: false` and the
  `,` / `:` separators.

Each grammar gets a few seeded random walks: at every step both masks are filled and must
be equal (all `vocab.size` bits, EOS included), a random allowed token is picked and both
matchers accept it, until EOS or a step limit.

Settings that make the comparison exact (each is a definition, not a tolerance):

* EOS: llguidance gets Stencil's EOS ids (`eos_token=vocab.eos_ids`); by default it would
  use the tokenizer's single `eos_token_id`, Stencil also the end-of-generation tokens
  found by name (`<|endoftext|>` beside `<|im_end|>`).
* Added tokens that look like `<...>` but are not flagged `special` (Gemma's HTML tags
  `<table>`, `<tr>`, ..., `<start_of_image>`): llguidance's Hugging Face import makes
  them special tokens (they never match grammar text), Stencil follows the tokenizer's
  `special: false` (they are text, as the GGUF's user-defined tokens are for llama.cpp).
  Those ids (MARKUP_TOKENS, computed from the vocabulary and checked to be exactly such
  tokens) are left out of the exact comparison: llguidance must never allow one, and the
  walks never pick one. MARKUP_TOKENS also holds Gemma's byte token `<0xFF>`: llguidance
  reads a token that starts with byte 0xFF as special (0xFF is its special-token marker),
  Stencil as the byte 0xFF (which no UTF-8 grammar matches anyway). SmolLM2 has none.
* Forcing: with a canonical tokenizer llguidance's mask is a single token wherever the
  grammar forces bytes (it fast-forwards the canonical tokenization); `%llguidance
  {"no_forcing": true}` makes it compute the full mask like Stencil. The regex and JSON
  grammars are therefore fed to llguidance as Lark (`start: /re/`, `start: %json {...}`)
  built from what `grammar_from_regex` / `grammar_from_json_schema` return.
* JSON integers, by the JSON Schema draft: from draft 6 on an integer may be written with
  a zero fraction (`2.0` is an integer), and Stencil allows `2.0` where an integer is
  expected; llguidance never does. The schemas here declare draft 4 (`$schema`), where
  both engines mean the same (and so use only draft-4 keywords: `definitions`, no
  `const`).
* Negative zero: Stencil writes canonical integers (`-?(0|[1-9][0-9]*)` without `-0`,
  documented at `stencil_schema::int_range_regex`); llguidance also allows `-0`. The
  integer properties here have `"minimum": 0` (negative numbers are exercised through
  `"type": "number"`, where both allow `-0`).
* JSON strings, two documented choices: Stencil writes only serde_json's canonical
  escapes (`\\" \\\\ \\b \\f \\n \\r \\t`, and `\\u00xx`, lowercase, for the other
  control characters; everything else literally, DEL (0x7F) included); llguidance also
  accepts `\\u00XX` in upper case and for the characters that have a short escape
  (`\\u0008` beside `\\b`), and requires DEL to be escaped (`\\u007f`). So the masks differ exactly on the tokens that contain a
  backslash (ESCAPE_TOKENS: Stencil must allow a subset of what llguidance allows) and on
  those that contain a DEL byte (DEL_TOKENS: llguidance must allow a subset of what
  Stencil allows). Both lists are computed from the vocabulary; those tokens are checked
  as subsets, the walks never pick one (so they never enter an escape), and every other
  bit is compared exactly. The regex and GBNF grammars compare all bits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import stencil

from _agreement_util import TokenPicker, describe, new_row, prefix_text, row_bits

try:
    import llguidance
    import llguidance.hf
    import llguidance.numpy as llg_numpy
    from llguidance import LLMatcher
except ImportError as exc:  # a set-up problem: fail, never skip
    raise ImportError(f"llguidance is missing ({exc}): run scripts/test-python.sh (it installs the test requirements)") from exc

REPO = Path(__file__).resolve().parents[2]
NO_FORCING = '%llguidance {"no_forcing": true}\n'
JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}

WALKS = 3  # seeded walks per grammar and vocabulary
MAX_STEPS = 48  # tokens per walk at most

REGEXES = {
    "email": r"[a-z]{2,6}@[a-z]{2,8}\.(com|org|net)",
    "phone": r"\d{3}-\d{4}",
    "keyword": r"true|false|null",
    "json_number": r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
    "names": r"[A-Z][a-z]+( [A-Z][a-z]+){0,3}",
    "ab_star": r"(ab|a)*c",
    "line": r"[^\n\"]{1,12}\n",
    "unicode": r"(héllo|wörld|日本語|\p{Greek}{2,4})+",
    "words": r"\w+( \w+){0,4}\.",
}

GBNF = {
    "arith": r"""
root ::= expr
expr ::= term (("+" | "-" | "*") term)*
term ::= num | "(" expr ")"
num  ::= [0-9]+
""",
    "pairs": r"""
root  ::= pair ("," pair)* "\n"
pair  ::= key "=" value
key   ::= [a-z]+
value ::= [0-9]+ | "\"" [a-z ]* "\""
""",
    "list": (REPO / "fixtures" / "gbnf" / "list.gbnf").read_text(encoding="utf-8"),
    "chess": (REPO / "fixtures" / "gbnf" / "chess.gbnf").read_text(encoding="utf-8"),
}

SCHEMAS = {
    "int_bool": {
        "type": "object",
        "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"type": "boolean"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    "enum_const": {
        "type": "object",
        "properties": {"color": {"enum": ["red", "green", "blue"]}, "n": {"enum": [True, "three", None]}},
        "required": ["color"],
        "additionalProperties": False,
    },
    "int_array": {"type": "array", "items": {"type": "integer", "minimum": 7, "maximum": 300}, "minItems": 1, "maxItems": 4},
    "numbers": {"type": "array", "items": {"type": "number"}, "maxItems": 3},
    "short_string": {
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 8}},
        "required": ["name"],
        "additionalProperties": False,
    },
    "pattern": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{2,3}$"},
    "any_of": {"anyOf": [{"type": "null"}, {"type": "number"}, {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}]},
    "optional": {
        "type": "object",
        "properties": {"x": {"type": "integer", "minimum": 0}, "y": {"type": "boolean"}, "z": {"type": "integer", "minimum": 0}},
        "additionalProperties": False,
    },
    "tree": {
        "definitions": {
            "node": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer", "minimum": 0, "maximum": 9},
                    "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}, "maxItems": 2},
                },
                "required": ["v"],
                "additionalProperties": False,
            }
        },
        "$ref": "#/definitions/node",
    },
    "extra_props": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0}}, "required": ["id"]},
}


# -- the two engines on one tokenizer ---------------------------------------------------


@dataclass
class Engines:
    name: str
    vocab: stencil.Vocab
    compiler: stencil.Compiler
    llg: "llguidance.LLTokenizer"
    escape_tokens: np.ndarray  # bool per id: a text token with a backslash byte
    del_tokens: np.ndarray  # bool per id: a text token with a DEL (0x7F) byte
    markup_tokens: np.ndarray  # bool per id: text for Stencil, special for llguidance


@pytest.fixture(scope="module", params=["smollm2", "gemma"])
def engines(request) -> Engines:
    tok = request.getfixturevalue(f"{request.param}_tokenizer")
    vocab = request.getfixturevalue(f"{request.param}_vocab")
    llg = llguidance.hf.from_tokenizer(tok, n_vocab=vocab.size, eos_token=list(vocab.eos_ids))
    escape = np.zeros(vocab.size, dtype=bool)
    delete = np.zeros(vocab.size, dtype=bool)
    for t in range(len(vocab)):
        if vocab.is_text(t):
            b = vocab.token_bytes(t)
            escape[t] = b"\\" in b
            delete[t] = b"\x7f" in b
    assert escape.any() and delete.any()
    markup = np.zeros(vocab.size, dtype=bool)
    for t in range(len(vocab)):
        markup[t] = vocab.is_text(t) and llg.is_special_token(t)
    return Engines(request.param, vocab, stencil.Compiler(vocab), llg, escape, delete, markup)


def llg_regex(pattern: str) -> str:
    top = json.loads(LLMatcher.grammar_from_regex(pattern))
    (g,) = top["grammars"]
    return NO_FORCING + g["lark_grammar"]


def llg_gbnf(text: str) -> str:
    return NO_FORCING + llguidance.grammar_from("gbnf", text)


DRAFT4 = "http://json-schema.org/draft-04/schema#"


def draft4(schema: dict) -> dict:
    return {"$schema": DRAFT4, **schema}


def llg_schema(schema: dict) -> str:
    top = json.loads(LLMatcher.grammar_from_json_schema(schema, overrides=JSON_OPTIONS))
    (g,) = top["grammars"]
    assert g["json_schema"]["x-guidance"] == JSON_OPTIONS
    return NO_FORCING + "start: %json " + json.dumps(g["json_schema"])


# -- the lockstep walk ------------------------------------------------------------------


def lockstep(e: Engines, label: str, grammar: stencil.Grammar, llg_grammar: str, seed: int, json_strings: bool) -> tuple[int, bool]:
    """One seeded walk of both engines; asserts equal masks at every step (MARKUP_TOKENS
    aside). With `json_strings`, ESCAPE_TOKENS are compared as Stencil ⊆ llguidance and
    DEL_TOKENS as llguidance ⊆ Stencil instead of exactly. Left-out tokens are never
    picked. Returns (steps compared, terminated)."""
    markup = e.markup_tokens
    none = np.zeros_like(markup)
    narrower = e.escape_tokens & ~e.del_tokens & ~markup if json_strings else none  # Stencil ⊆ llguidance
    wider = e.del_tokens & ~e.escape_tokens & ~markup if json_strings else none  # llguidance ⊆ Stencil
    loose = (e.escape_tokens | e.del_tokens | markup) if json_strings else markup
    vocab = e.vocab
    lm = LLMatcher(e.llg, llg_grammar, log_level=0)
    assert not lm.is_error(), f"{label}: llguidance refused the grammar: {lm.get_error()}"
    m = stencil.Matcher(grammar)
    picker = TokenPicker(vocab, seed)
    s_row = new_row(vocab)
    l_mask = llg_numpy.allocate_token_bitmask(1, vocab.size)
    assert l_mask.shape == (1, len(s_row))
    tokens: list[int] = []

    def where(bits: np.ndarray) -> np.ndarray:
        return np.flatnonzero(bits)

    for step in range(MAX_STEPS):
        m.fill_next_token_bitmask(s_row)
        l_mask.fill(0)
        llg_numpy.fill_next_token_bitmask(lm, l_mask, 0)
        assert not lm.is_error(), f"{label} step {step}: llguidance error {lm.get_error()} after {prefix_text(vocab, tokens)!r}"
        s_bits = row_bits(s_row, vocab.size)
        l_bits = row_bits(l_mask[0], vocab.size)
        where_ = f"{label} [{e.name}] seed {seed} step {step}, after {len(tokens)} tokens {tokens[-12:]} = {prefix_text(vocab, tokens)!r}"
        special = where(l_bits & markup)
        assert len(special) == 0, f"{where_}: llguidance allows special tokens {describe(vocab, special)}"
        extra = where(s_bits & ~l_bits & narrower)
        assert len(extra) == 0, f"{where_}: Stencil allows backslash tokens llguidance refuses: {describe(vocab, extra)}"
        missing = where(l_bits & ~s_bits & wider)
        assert len(missing) == 0, f"{where_}: llguidance allows DEL tokens Stencil refuses: {describe(vocab, missing)}"
        differ = (s_bits != l_bits) & ~loose
        if differ.any():
            pytest.fail(
                f"{where_}: masks differ\n"
                f"  only Stencil allows: {describe(vocab, where(differ & s_bits))}\n"
                f"  only llguidance allows: {describe(vocab, where(differ & l_bits))}\n"
                f"  (Stencil {int(s_bits.sum())} tokens, llguidance {int(l_bits.sum())})",
                pytrace=False,
            )
        assert m.is_accepting() == lm.is_accepting(), (
            f"{where_}: is_accepting Stencil {m.is_accepting()} llguidance {lm.is_accepting()}"
        )
        choices = where(s_bits & ~loose)
        assert len(choices), f"{where_}: nothing to pick"
        t = picker.pick(choices)
        assert m.consume_token(t), f"{where_}: Stencil refused {t} from its own mask"
        assert lm.consume_token(t), f"{where_}: llguidance refused {t}: {lm.get_error()}"
        tokens.append(t)
        if m.is_terminated():
            m.fill_next_token_bitmask(s_row)
            assert not s_row.any(), f"{label}: a terminated matcher's mask is not all zero"
            return step + 1, True
    return MAX_STEPS, False


def run_walks(e: Engines, label: str, grammar: stencil.Grammar, llg_grammar: str, json_strings: bool = False) -> None:
    steps = ended = 0
    for w in range(WALKS):
        n, done = lockstep(e, label, grammar, llg_grammar, seed=1000 * w + len(label), json_strings=json_strings)
        steps += n
        ended += done
    # The walks must exercise something: several steps in all.
    assert steps >= WALKS * 2, f"{label}: only {steps} steps compared"


# -- the tests --------------------------------------------------------------------------


def test_token_tables_agree(engines: Engines, request):
    """Same token bytes per id, same control tokens (but MARKUP_TOKENS), same EOS ids: the
    comparison below is between grammar engines, not between two readings of the
    tokenizer."""
    v, llg = engines.vocab, engines.llg
    assert llg.vocab_size == v.size
    assert sorted(llg.eos_tokens) == sorted(v.eos_ids)
    tok = request.getfixturevalue(f"{engines.name}_tokenizer")
    added = {a["id"]: a for a in json.loads(tok.backend_tokenizer.to_str())["added_tokens"]}
    bad_kind, bad_bytes = [], []
    for t in range(len(v)):
        special = llg.is_special_token(t)
        if engines.markup_tokens[t]:
            a = added.get(t)
            # The known differences: an added, non-special token `<...>`, and the byte
            # token 0xFF (llguidance's special-token marker byte).
            if v.token_bytes(t) == b"\xff":
                continue
            if not (a and not a["special"] and a["content"].startswith("<") and a["content"].endswith(">")):
                bad_kind.append(t)
            elif v.token_bytes(t) != a["content"].encode():
                bad_bytes.append(t)
        elif v.is_text(t) == special:
            bad_kind.append(t)
        elif v.is_text(t) and v.token_bytes(t) != llg.decode_bytes([t]):
            bad_bytes.append(t)
    assert not bad_kind, (
        f"[{engines.name}] {len(bad_kind)} ids are text for one engine and control for the other: "
        + ", ".join(f"{t} stencil={v.token_bytes(t)!r}/{'text' if v.is_text(t) else 'control'} llg={llg.decode_bytes([t])!r}" for t in bad_kind[:10])
    )
    assert not bad_bytes, f"[{engines.name}] token bytes differ: " + ", ".join(
        f"{t} stencil={v.token_bytes(t)!r} llg={llg.decode_bytes([t])!r}" for t in bad_bytes[:10]
    )
    expected_markup = {"smollm2": 0, "gemma": 72}[engines.name]  # 71 tags + <0xFF>
    assert int(engines.markup_tokens.sum()) == expected_markup


@pytest.mark.parametrize("name", list(REGEXES))
def test_regex_masks_agree(engines: Engines, name: str):
    pattern = REGEXES[name]
    run_walks(engines, f"regex {name} {pattern!r}", engines.compiler.compile_regex(pattern), llg_regex(pattern))


@pytest.mark.parametrize("name", list(GBNF))
def test_gbnf_masks_agree(engines: Engines, name: str):
    text = GBNF[name]
    run_walks(engines, f"gbnf {name}", engines.compiler.compile_grammar(text), llg_gbnf(text))


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_json_schema_masks_agree(engines: Engines, name: str):
    schema = draft4(SCHEMAS[name])
    grammar = engines.compiler.compile_json_schema(schema, whitespace="compact")
    run_walks(engines, f"schema {name}", grammar, llg_schema(schema), json_strings=True)


def test_walks_reach_the_end(engines: Engines):
    """The walk strategy does finish sentences (so the EOS bits are compared too)."""
    schema = draft4(SCHEMAS["int_bool"])
    grammar = engines.compiler.compile_json_schema(schema, whitespace="compact")
    _, done = lockstep(engines, "schema int_bool", grammar, llg_schema(schema), seed=7, json_strings=True)
    assert done, "a walk over a 2-property schema did not reach EOS within the step limit"
