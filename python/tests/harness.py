"""What the engine-adapter tests share: the structured-output requests they run (each with
a check of the final text that does not use Stencil: jsonschema, Python's `re`), the
reference grammar of a request compiled directly, replays (a fresh matcher over the
tokens accepted so far) and their mask rows, and helpers to sample and decode.

The real engines are driven in engines/ (vllm_driver.py, sglang_driver.py); every row
they produce is compared with a replay from here, never with hard-coded answers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

import stencil

MAX_STEPS = 400  # per request; a request still running after that fails the test


# -- requests ---------------------------------------------------------------------------


@dataclass
class Spec:
    """One structured-output request: its kind, the spec string the engine passes, and a
    check of the final text that does not use Stencil."""

    kind: str  # "json", "json_object", "regex", "grammar", "choice", "structural_tag"
    spec: str
    check: Callable[[str], None]
    name: str = ""
    # For a Lark grammar: an equivalent GBNF, written by hand, that the masks are
    # compared with (so that the Lark conversion is checked, not trusted).
    reference_gbnf: str | None = None


def json_spec(schema: dict, name: str = "") -> Spec:
    import jsonschema

    def check(text: str) -> None:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise AssertionError(f"{name}: output is not JSON ({e}): {text!r}") from e
        cls = jsonschema.validators.validator_for(schema)
        errors = [e.message for e in cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value)]
        assert not errors, f"{name}: output {text!r} does not validate: {errors}"

    return Spec("json", json.dumps(schema), check, name or "json")


def json_object_spec() -> Spec:
    def check(text: str) -> None:
        value = json.loads(text)
        assert isinstance(value, dict), f"json_object: output {text!r} is not an object"

    return Spec("json_object", "", check, "json_object")


def regex_spec(pattern: str, python_pattern: str | None = None) -> Spec:
    """`pattern` in the syntax both Rust's `regex` and Python's `re` read the same way."""
    rx = re.compile(python_pattern or pattern)

    def check(text: str) -> None:
        assert rx.fullmatch(text), f"regex {pattern!r}: output {text!r} does not match"

    return Spec("regex", pattern, check, f"regex {pattern}")


def grammar_spec(gbnf: str, python_pattern: str) -> Spec:
    """A GBNF grammar with an equivalent Python regex to check outputs with."""
    rx = re.compile(python_pattern)

    def check(text: str) -> None:
        assert rx.fullmatch(text), f"grammar: output {text!r} does not match {python_pattern!r}"

    return Spec("grammar", gbnf, check, "grammar")


def lark_spec(lark: str, gbnf: str, python_pattern: str, name: str = "lark") -> Spec:
    """A Lark grammar (as vLLM users send it), the GBNF it means, and a Python regex."""
    rx = re.compile(python_pattern)

    def check(text: str) -> None:
        assert rx.fullmatch(text), f"{name}: output {text!r} does not match {python_pattern!r}"

    return Spec("grammar", lark, check, name, reference_gbnf=gbnf)


def structural_tag_spec(schema: dict) -> Spec:
    """A structural tag: `call:`, then `<f>` JSON under `schema` `</f>` (bounded: no free
    text), checked by hand and with `jsonschema`."""
    import jsonschema

    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "const_string", "value": "call:"},
        {"type": "tag", "begin": "<f>", "content": {"type": "json_schema", "json_schema": schema}, "end": "</f>"},
    ]}}

    def check(text: str) -> None:
        assert text.startswith("call:<f>") and text.endswith("</f>"), f"structural_tag: {text!r}"
        value = json.loads(text[len("call:<f>"):-len("</f>")])
        jsonschema.validate(value, schema)

    return Spec("structural_tag", json.dumps(tag), check, "structural_tag")


def choice_spec(choices: list[str]) -> Spec:
    def check(text: str) -> None:
        assert text in choices, f"choice: output {text!r} is not one of {choices}"

    return Spec("choice", json.dumps(choices), check, "choice")


_COMMON_META = set("\\.+*?()|[]{}^$-")


def alternatives_regex(choices: list[str]) -> str:
    """A regex of exactly these strings, in the syntax Rust's `regex` and Python's `re`
    share (written here, not taken from the adapters)."""
    return "|".join("".join("\\" + c if c in _COMMON_META else c for c in s) for s in choices)


def assert_compact(text: str) -> None:
    """No whitespace outside JSON strings (compact output)."""
    in_string = escaped = False
    for i, c in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        else:
            assert c not in " \t\n\r", f"whitespace at {i} outside strings: {text!r}"


def reference_grammar(compiler: stencil.Compiler, spec: Spec, *, whitespace: str) -> stencil.Grammar:
    """The grammar a request means, compiled directly (not through an adapter)."""
    if spec.kind == "json":
        return compiler.compile_json_schema(json.loads(spec.spec), whitespace=whitespace, strict=False)
    if spec.kind == "json_object":
        return compiler.compile_json_schema({"type": "object"}, whitespace=whitespace, strict=False)
    if spec.kind == "regex":
        return compiler.compile_regex(spec.spec)
    if spec.kind == "grammar":
        return compiler.compile_grammar(spec.reference_gbnf or spec.spec)
    if spec.kind == "choice":
        return compiler.compile_regex(alternatives_regex(json.loads(spec.spec)))
    if spec.kind == "structural_tag":
        return compiler.compile_structural_tag(json.loads(spec.spec), strict=False)
    raise ValueError(spec.kind)


# -- the requests the tests run (bounded outputs) ---

RECORD = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 0, "maximum": 999},
        "tag": {"enum": ["alpha", "beta", "gamma"]},
        "ok": {"type": "boolean"},
    },
    "required": ["id", "tag", "ok"],
    "additionalProperties": False,
}
POINTS = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z]+$"},
        "pts": {
            "type": "array",
            "items": {"type": "integer", "minimum": -9, "maximum": 9},
            "minItems": 1,
            "maxItems": 3,
        },
    },
    "required": ["name", "pts"],
    "additionalProperties": False,
}
PAIRS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"k": {"type": "string", "maxLength": 4}, "v": {"type": ["boolean", "null"]}},
        "required": ["k"],
        "additionalProperties": False,
    },
    "maxItems": 2,
}
GBNF = 'root ::= "[" item ("," item)? ("," item)? "]"\nitem ::= [a-c] [0-9]?\n'
GBNF_PY = r"\[[a-c][0-9]?(,[a-c][0-9]?){0,2}\]"


def all_specs() -> list[Spec]:
    """One request of each kind, outputs bounded in length."""
    answer = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "schemas" / "answer.json").read_text())
    return [
        json_spec(RECORD, "record"),
        json_spec(POINTS, "points"),
        json_spec(PAIRS, "pairs"),
        json_spec(answer, "fixtures/schemas/answer.json"),
        json_object_spec(),
        regex_spec(r"[a-z]{2,5}-[0-9]{1,3}"),
        grammar_spec(GBNF, GBNF_PY),
        choice_spec(["red", "green", "blue-ish", "a.b"]),
        structural_tag_spec(RECORD),
    ]



# -- replays ----------------------------------------------------------------------------


def replay(grammar: stencil.Grammar, tokens: list[int]) -> stencil.Matcher:
    """A fresh matcher that consumed `tokens` one by one (each must be accepted)."""
    m = stencil.Matcher(grammar)
    for i, t in enumerate(tokens):
        assert m.consume_token(t), f"replay: token {t} at position {i} refused ({tokens})"
    return m


def tokens_for(vocab: stencil.Vocab, grammar: stencil.Grammar, text: str) -> list[int]:
    """A token sequence spelling `text` that the grammar accepts, found greedily (longest
    allowed token that is a prefix of the rest)."""
    m = stencil.Matcher(grammar)
    data = text.encode()
    out = []
    while data:
        allowed = m.next_token_mask()
        best = max(
            (t for t in allowed if vocab.is_text(t) and data.startswith(vocab.token_bytes(t))),
            key=lambda t: len(vocab.token_bytes(t)),
            default=None,
        )
        assert best is not None, f"no token spells the rest of {text!r}: {data!r}"
        assert m.consume_token(best)
        out.append(best)
        data = data[len(vocab.token_bytes(best)) :]
    return out


def mask_row(matcher: stencil.Matcher, words: int) -> np.ndarray:
    row = np.zeros((1, words), dtype=np.int32)
    matcher.fill_next_token_bitmask(row, 0)
    return row[0]


def allowed_ids(row: np.ndarray, limit: int) -> np.ndarray:
    bits = np.unpackbits(np.ascontiguousarray(row, dtype="<i4").view(np.uint8), bitorder="little")
    return np.flatnonzero(bits[:limit])


def decode(vocab: stencil.Vocab, tokens: list[int]) -> str:
    eos = set(vocab.eos_ids)
    return b"".join(vocab.token_bytes(t) for t in tokens if t not in eos).decode("utf-8")


def assert_rows_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if not np.array_equal(got, want):
        diff = np.flatnonzero(got != want)
        raise AssertionError(
            f"{what}: bitmask differs from the replay in {len(diff)} words "
            f"(first at word {diff[0]}: got {got[diff[0]]:#x}, want {want[diff[0]]:#x})"
        )


def closing_tokens(vocab: stencil.Vocab) -> np.ndarray:
    """Per token id: whether its bytes close something (a quote, a bracket, a comma).
    Uniform sampling alone would rarely leave a free-text string; the samplers favour
    these tokens so that every request ends in a bounded number of steps."""
    out = np.zeros(vocab.size, dtype=bool)
    for t in range(len(vocab)):  # ids past the tokenizer's are padding
        if vocab.is_text(t):
            b = vocab.token_bytes(t)
            out[t] = any(c in b for c in (b'"', b"}", b"]", b","))
    return out
