"""The Matcher API against a replay oracle: `rollback`, `fork`, `reset`,
`validate_tokens`, `consume_tokens` (all or nothing), `is_terminated` / `is_accepting`,
`forced_tokens` / `forced_bytes`; and the error contract: engine errors are typed
exceptions with located messages, and no bad argument (buffer dtype, shape, layout,
read-only memory, torch dtype, row index, token id) crashes the interpreter.

The oracle is a fresh `Matcher` fed a prefix of the same tokens: whatever state the API
reaches must give the mask a fresh matcher gives after the same tokens.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import stencil

from _agreement_util import describe, matcher_mask, new_row, prefix_text, random_walk, row_ids

REPO = Path(__file__).resolve().parents[2]
BAD = REPO / "fixtures" / "bad"

GRAMMARS = {
    "schema_person": ("json_schema", json.loads((REPO / "fixtures" / "schemas" / "person.json").read_text(encoding="utf-8"))),
    "schema_tree": ("json_schema", json.loads((REPO / "fixtures" / "schemas" / "tree.json").read_text(encoding="utf-8"))),
    "gbnf_json": ("gbnf", (REPO / "fixtures" / "gbnf" / "json.gbnf").read_text(encoding="utf-8")),
    "gbnf_chess": ("gbnf", (REPO / "fixtures" / "gbnf" / "chess.gbnf").read_text(encoding="utf-8")),
    "regex_date": ("regex", r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]( [a-z]{1,12})*"),
}


def compile_kind(compiler: stencil.Compiler, kind: str, source) -> stencil.Grammar:
    if kind == "json_schema":
        return compiler.compile_json_schema(source)
    if kind == "gbnf":
        return compiler.compile_grammar(source)
    return compiler.compile_regex(source)


@pytest.fixture(scope="module")
def grammars(smollm2_compiler) -> dict[str, stencil.Grammar]:
    return {name: compile_kind(smollm2_compiler, kind, src) for name, (kind, src) in GRAMMARS.items()}


def replay(grammar: stencil.Grammar, tokens) -> stencil.Matcher:
    """A fresh matcher fed `tokens` (each must be accepted)."""
    m = stencil.Matcher(grammar)
    for i, t in enumerate(tokens):
        assert m.consume_token(int(t)), f"replay: token {i} ({t}) refused after {prefix_text(grammar.vocab, tokens[:i])!r}"
    return m


def assert_same_state(m: stencil.Matcher, oracle: stencil.Matcher, what: str) -> None:
    a, b = matcher_mask(m), matcher_mask(oracle)
    if not np.array_equal(a, b):
        v = m.grammar.vocab
        only_m = np.setdiff1d(row_ids(a), row_ids(b))
        only_o = np.setdiff1d(row_ids(b), row_ids(a))
        pytest.fail(f"{what}: mask differs from the replay; only the matcher: {describe(v, only_m)}; only the replay: {describe(v, only_o)}")
    assert m.num_tokens == oracle.num_tokens, what
    assert m.is_terminated() == oracle.is_terminated(), what
    assert m.is_accepting() == oracle.is_accepting(), what


def walk(grammar: stencil.Grammar, seed: int, steps: int = 40) -> list[int]:
    return random_walk(grammar, seed=seed, max_steps=steps)


# -- rollback / reset / fork ------------------------------------------------------------


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_rollback_equals_replay(grammars, name):
    g = grammars[name]
    for seed in range(3):
        tokens = walk(g, seed)
        assert tokens, "empty walk"
        rng = random.Random(seed)
        m = replay(g, tokens)
        total = len(tokens)
        # Several rollbacks in a row, each checked against a fresh replay of the prefix.
        remaining = total
        while remaining > 0:
            n = rng.randint(1, min(7, remaining))
            m.rollback(n)
            remaining -= n
            assert_same_state(m, replay(g, tokens[:remaining]), f"{name} seed {seed}: rollback({n}) to {remaining}/{total}")
        # Re-advancing after a rollback reaches the same state as the straight walk.
        assert m.consume_tokens(tokens)
        assert_same_state(m, replay(g, tokens), f"{name} seed {seed}: re-advance after rollback")
        m.rollback(0)
        assert_same_state(m, replay(g, tokens), f"{name} seed {seed}: rollback(0)")


def test_rollback_past_eos(grammars):
    g = grammars["regex_date"]
    vocab = g.vocab
    for seed in range(6):
        tokens = walk(g, seed, steps=60)
        if tokens and tokens[-1] in vocab.eos_ids:
            break
    else:
        pytest.fail("no walk over the date regex reached EOS in 6 seeds")
    m = replay(g, tokens)
    assert m.is_terminated() and m.is_accepting()
    assert not matcher_mask(m).any(), "a terminated matcher must write an all-zero row"
    assert not m.consume_token(tokens[-1]), "a terminated matcher accepted another token"
    m.rollback(1)
    assert not m.is_terminated()
    assert m.is_accepting(), "the text before EOS was complete"
    assert_same_state(m, replay(g, tokens[:-1]), "rollback(1) of EOS")


def test_rollback_too_far_is_match_error(grammars):
    g = grammars["schema_person"]
    m = stencil.Matcher(g)
    with pytest.raises(stencil.MatchError):
        m.rollback(1)
    tokens = walk(g, 0, steps=5)
    assert m.consume_tokens(tokens)
    with pytest.raises(stencil.MatchError) as err:
        m.rollback(len(tokens) + 1)
    assert isinstance(err.value, stencil.StencilError)
    assert_same_state(m, replay(g, tokens), "a refused rollback must change nothing")
    with pytest.raises((OverflowError, ValueError, TypeError)):
        m.rollback(-1)
    assert_same_state(m, replay(g, tokens), "a negative rollback must change nothing")


@pytest.mark.parametrize("name", ["schema_person", "gbnf_json"])
def test_reset(grammars, name):
    g = grammars[name]
    tokens = walk(g, 3)
    m = replay(g, tokens)
    m.reset()
    assert m.num_tokens == 0 and not m.is_terminated()
    assert_same_state(m, stencil.Matcher(g), "reset")
    assert m.consume_tokens(tokens), "after reset the same walk must be accepted again"
    assert_same_state(m, replay(g, tokens), "walk after reset")


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_fork_is_independent(grammars, name):
    g = grammars[name]
    a_tokens = walk(g, 11)
    k = len(a_tokens) // 2
    if a_tokens[-1] in g.vocab.eos_ids:
        k = min(k, len(a_tokens) - 1)
    # A second continuation of the same prefix, from another seed.
    b_tokens = random_walk(g, seed=12, max_steps=20, prefix=a_tokens[:k])
    base = replay(g, a_tokens[:k])
    before = matcher_mask(base)
    fork = base.fork()
    assert fork.num_tokens == base.num_tokens == k
    assert fork.consume_tokens(a_tokens[k:])
    assert np.array_equal(matcher_mask(base), before), "advancing a fork changed the original"
    assert base.num_tokens == k
    assert_same_state(fork, replay(g, a_tokens), f"{name}: fork advanced")
    # The original follows the other continuation.
    assert base.consume_tokens(b_tokens[k:])
    assert_same_state(base, replay(g, b_tokens), f"{name}: original after the fork moved")
    assert_same_state(fork, replay(g, a_tokens), f"{name}: fork after the original moved")
    # A fork of a fork, rolled back, leaves both others alone.
    ff = fork.fork()
    ff.rollback(ff.num_tokens)
    assert_same_state(ff, stencil.Matcher(g), "fork of fork rolled back to the start")
    assert_same_state(fork, replay(g, a_tokens), "fork after its own fork rolled back")
    assert_same_state(base, replay(g, b_tokens), "original after the fork's fork rolled back")


# -- validate_tokens / consume_tokens ---------------------------------------------------


def corrupt(g: stencil.Grammar, tokens: list[int], rng: random.Random) -> list[int]:
    """`tokens` with one token, at a random position, replaced by a random id (often one
    the grammar refuses there), plus a random tail."""
    n = len(g.vocab)
    out = list(tokens)
    if out:
        out[rng.randrange(len(out))] = rng.randrange(n)
    out += [rng.randrange(n) for _ in range(rng.randint(0, 3))]
    return out


def longest_accepted_prefix(m: stencil.Matcher, tokens) -> int:
    f = m.fork()
    for i, t in enumerate(tokens):
        if not f.consume_token(t):
            return i
    return len(tokens)


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_validate_tokens_equals_longest_prefix(grammars, name):
    g = grammars[name]
    rng = random.Random(name)
    refused_somewhere = False
    for seed in range(4):
        tokens = walk(g, 100 + seed)
        for start in sorted({0, len(tokens) // 3, len(tokens) // 2}):
            m = replay(g, tokens[:start])
            before = matcher_mask(m)
            for draft in (tokens[start:], corrupt(g, tokens[start:], rng), [rng.randrange(len(g.vocab)) for _ in range(4)]):
                expected = longest_accepted_prefix(m, draft)
                refused_somewhere |= expected < len(draft)
                got = m.validate_tokens(draft)
                assert got == expected, f"{name}: validate_tokens gave {got}, a fork accepts {expected} of {draft}"
                assert m.num_tokens == start, "validate_tokens advanced the matcher"
                assert np.array_equal(matcher_mask(m), before), "validate_tokens changed the mask"
    assert refused_somewhere, "the drafts never contained a refused token: the test checks nothing"


def test_validate_tokens_edge_cases(grammars):
    g = grammars["schema_person"]
    m = stencil.Matcher(g)
    assert m.validate_tokens([]) == 0
    assert m.validate_tokens([-1]) == 0
    assert m.validate_tokens([len(g.vocab) + 5]) == 0
    assert m.validate_tokens([2**40]) == 0
    assert m.num_tokens == 0


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_consume_tokens_is_atomic(grammars, name):
    g = grammars[name]
    rng = random.Random(name + "atomic")
    for seed in range(3):
        tokens = walk(g, 200 + seed)
        start = len(tokens) // 3
        m = replay(g, tokens[:start])
        before = matcher_mask(m)
        bad = corrupt(g, tokens[start:], rng)
        ok_prefix = longest_accepted_prefix(m, bad)
        if ok_prefix < len(bad):
            assert m.consume_tokens(bad) is False
            assert m.num_tokens == start, f"{name}: a refused consume_tokens kept {m.num_tokens - start} tokens"
            assert np.array_equal(matcher_mask(m), before), f"{name}: a refused consume_tokens changed the mask"
        assert m.consume_tokens(tokens[start:]) is True
        assert_same_state(m, replay(g, tokens), f"{name}: consume_tokens of the valid tail")


def test_consume_token_refusals(grammars):
    g = grammars["schema_person"]
    m = stencil.Matcher(g)
    row = matcher_mask(m)
    refused = [t for t in range(len(g.vocab)) if not (row[t // 32] >> (t % 32)) & 1][:50]
    for t in refused + [-1, len(g.vocab), g.vocab.size + 100, 2**40]:
        assert m.consume_token(t) is False, f"token {t} outside the mask was accepted"
    assert m.num_tokens == 0
    assert np.array_equal(matcher_mask(m), row)
    assert m.consume_tokens([]) is True and m.num_tokens == 0


# -- terminated / accepting -------------------------------------------------------------


@pytest.fixture(scope="module")
def toy_vocab() -> stencil.Vocab:
    # ids: 0 <eos>, 1 "a", 2 "b", 3 "c", 4 "ab", 5 "abc", 6 unused, 7 <ctl>, 8 "cab"
    tokens = [b"<eos>", b"a", b"b", b"c", b"ab", b"abc", None, b"<ctl>", b"cab"]
    return stencil.Vocab.from_tokens(tokens, eos_ids=[0], special_ids=[7], vocab_size=40)


def test_toy_vocab(toy_vocab):
    assert len(toy_vocab) == 9 and toy_vocab.size == 40
    assert toy_vocab.eos_ids == [0]
    assert toy_vocab.is_text(1) and not toy_vocab.is_text(0) and not toy_vocab.is_text(7)
    assert toy_vocab.token_bytes(5) == b"abc"


def test_accepting_and_terminated(toy_vocab):
    g = stencil.Compiler(toy_vocab).compile_regex("(ab)+c?")
    m = stencil.Matcher(g)
    assert sorted(m.next_token_mask()) == [1, 4, 5]
    assert not m.is_accepting() and not m.is_terminated()
    assert m.consume_token(4)  # "ab"
    assert m.is_accepting() and not m.is_terminated()
    assert sorted(m.next_token_mask()) == [0, 1, 3, 4, 5], "after 'ab': EOS, 'a', 'c', 'ab', 'abc'"
    assert m.consume_token(3)  # "c"
    assert m.is_accepting()
    assert m.next_token_mask() == [0], "after 'abc' only EOS"
    assert m.consume_token(0)
    assert m.is_terminated() and m.is_accepting() and m.num_tokens == 3
    assert m.next_token_mask() == []
    row = np.full(stencil.bitmask_words(toy_vocab.size), -1, dtype=np.int32)
    m.fill_next_token_bitmask(row)
    assert not row.any(), "a terminated matcher writes an all-zero row"
    assert m.consume_token(1) is False and m.consume_token(0) is False
    assert m.forced_tokens() == [] and m.forced_bytes() == b""
    m.rollback(1)
    assert not m.is_terminated() and m.next_token_mask() == [0]
    # EOS is refused where the text is incomplete; control tokens never match text.
    m.reset()
    assert m.consume_token(0) is False and m.consume_token(7) is False and m.consume_token(6) is False
    assert m.num_tokens == 0


def test_padding_ids_never_allowed(toy_vocab):
    g = stencil.Compiler(toy_vocab).compile_regex("[abc]*")
    m = stencil.Matcher(g)
    ids = m.next_token_mask()
    assert ids and max(ids) < len(toy_vocab), f"ids past the tokenizer's {len(toy_vocab)} allowed: {ids}"
    assert 6 not in ids and 7 not in ids
    assert sorted(ids) == [0, 1, 2, 3, 4, 5, 8]
    # A wider row than needed: the extra words are zeroed; the rows' own words match.
    wide = np.full((2, stencil.bitmask_words(toy_vocab.size) + 3), -1, dtype=np.int32)
    m.fill_next_token_bitmask(wide, 1)
    assert (wide[0] == -1).all(), "another row was written"
    assert list(row_ids(wide[1])) == sorted(ids)


# -- forced tokens / bytes --------------------------------------------------------------


def test_forced_bytes_and_tokens_real_vocab(smollm2_compiler, smollm2_vocab):
    v = smollm2_vocab
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "kind": {"const": "person"}},
        "required": ["name", "kind"],
        "additionalProperties": False,
    }
    g = smollm2_compiler.compile_json_schema(schema)
    byte_token = {v.token_bytes(t): t for t in range(len(v)) if v.is_text(t) and len(v.token_bytes(t)) == 1}
    assert all(bytes([b]) in byte_token for b in range(32, 127)), "SmolLM2 has a token per printable ASCII byte"

    def spell(tokens):
        return b"".join(v.token_bytes(t) for t in tokens)

    def follow_forced(m, expected: bytes) -> None:
        assert m.forced_bytes() == expected
        assert m.forced_bytes(limit=3) == expected[:3]
        n = m.num_tokens
        forced = m.forced_tokens()
        assert forced, f"the fixed text {expected!r} forces no token"
        assert expected.startswith(spell(forced)), f"forced tokens spell {spell(forced)!r}, not a prefix of {expected!r}"
        assert m.num_tokens == n, "forced_tokens must not advance"
        assert m.consume_tokens(forced)
        rest = expected[len(spell(forced)) :]
        assert m.forced_bytes() == rest
        assert m.consume_tokens([byte_token[bytes([b])] for b in rest])
        assert m.forced_bytes() == b""

    m = stencil.Matcher(g)
    follow_forced(m, b'{"name":"')
    assert m.forced_tokens() == [], "inside a free string nothing is forced"
    assert m.consume_tokens([byte_token[bytes([b])] for b in b'Ada"'])
    follow_forced(m, b',"kind":"person"}')
    assert m.is_accepting() and not m.is_terminated()
    assert m.next_token_mask() == sorted(v.eos_ids), "after the closing brace only EOS"


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_forced_tokens_are_accepted_along_walks(grammars, name):
    """At every step of a walk: the forced tokens spell a prefix of the forced bytes, and
    a fork accepts them all; every allowed token agrees with the forced bytes."""
    g = grammars[name]
    v = g.vocab
    tokens = walk(g, 300, steps=30)
    m = stencil.Matcher(g)
    for i, t in enumerate(tokens + [None]):
        fb = m.forced_bytes()
        ft = m.forced_tokens()
        spelled = b"".join(v.token_bytes(x) for x in ft)
        assert fb.startswith(spelled), f"{name} step {i}: forced tokens spell {spelled!r}, forced bytes are {fb!r}"
        f = m.fork()
        assert f.consume_tokens(ft), f"{name} step {i}: forced tokens {ft} refused"
        if fb:
            for a in m.next_token_mask()[:200]:
                if v.is_text(a):
                    b = v.token_bytes(a)
                    n = min(len(b), len(fb))
                    assert b[:n] == fb[:n], f"{name} step {i}: allowed token {a} {b!r} contradicts forced bytes {fb!r}"
        if t is None or m.is_terminated():
            break
        assert m.consume_token(t)


# -- errors -----------------------------------------------------------------------------


def test_compile_errors_are_located(smollm2_compiler):
    c = smollm2_compiler
    with pytest.raises(stencil.CompileError) as e:
        c.compile_json_schema({"type": "object", "properties": {"a": {"type": "string", "pattern": "(a"}}})
    assert "/properties/a" in str(e.value), f"no JSON pointer in: {e.value}"
    with pytest.raises(stencil.CompileError) as e:
        c.compile_json_schema({"$ref": "#/$defs/missing"})
    assert "#/$defs/missing" in str(e.value)
    with pytest.raises(stencil.CompileError) as e:
        c.compile_json_schema('{"type": "object", ')
    assert "line" in str(e.value) and "column" in str(e.value), f"no position in: {e.value}"
    with pytest.raises(stencil.CompileError) as e:
        c.compile_json_schema({"type": "object", "properties": {"x": {"type": "strng"}}})
    assert "/properties/x" in str(e.value), f"no JSON pointer in: {e.value}"
    with pytest.raises(stencil.CompileError) as e:
        c.compile_grammar('root ::= ("a" | "b"\n')
    assert "line 1, column 20" in str(e.value), f"no line/column in: {e.value}"
    with pytest.raises(stencil.CompileError) as e:
        c.compile_grammar('root ::= "a" item\n')
    assert "item" in str(e.value)
    with pytest.raises(stencil.CompileError) as e:
        c.compile_regex("a(b")
    assert "a(b" in str(e.value) and "unclosed group" in str(e.value), f"regex error lacks the pattern: {e.value}"
    with pytest.raises((ValueError, stencil.CompileError)):
        c.compile_json_schema({"type": "object"}, whitespace="sparse")
    with pytest.raises(stencil.CompileError):
        c.compile_tools([{"type": "function", "function": {"name": "f", "parameters": {"type": "strng"}}}])
    assert issubclass(stencil.CompileError, stencil.StencilError) and issubclass(stencil.StencilError, Exception)


def _expected_errors(suffix: str) -> list[tuple[Path, str]]:
    out = []
    for exp in sorted((BAD / "vocab").glob(f"*{suffix}.expected")):
        text = exp.read_text(encoding="utf-8")
        if text.startswith("error: "):
            out.append((exp.with_suffix(""), text.splitlines()[0][len("error: ") :]))
    assert out, f"no bad {suffix} fixtures"
    return out


@pytest.mark.parametrize("path,message", _expected_errors(".gguf"), ids=lambda x: getattr(x, "name", ""))
def test_bad_gguf_is_vocab_error(path, message):
    with pytest.raises(stencil.VocabError) as e:
        stencil.Vocab.from_gguf(str(path))
    assert message in str(e.value)


@pytest.mark.parametrize("path,message", _expected_errors(".tokenizer.json"), ids=lambda x: getattr(x, "name", ""))
def test_bad_tokenizer_json_is_vocab_error(path, message):
    with pytest.raises(stencil.VocabError) as e:
        stencil.Vocab.from_tokenizer_json(path.read_text(encoding="utf-8"))
    assert message in str(e.value)


@pytest.mark.parametrize("path,message", _expected_errors(".vocab.json"), ids=lambda x: getattr(x, "name", ""))
def test_bad_token_list_is_vocab_error(path, message):
    spec = json.loads(path.read_text(encoding="utf-8"))
    tokens = [t.encode() for t, _ in spec["tokens"]]
    special = [i for i, (_, kind) in enumerate(spec["tokens"]) if kind == "control"]
    with pytest.raises(stencil.VocabError) as e:
        stencil.Vocab.from_tokens(tokens, eos_ids=spec["eos"], special_ids=special, vocab_size=spec["mask_width"])
    # The engine's message, or the binding's own check of the ids it is given (it runs
    # first and names the id: "token id 5 is outside the 2 tokens given").
    ids = [str(i) for i in spec["eos"]]
    assert message in str(e.value) or ("outside" in str(e.value) and any(i in str(e.value) for i in ids)), str(e.value)


def test_missing_files_are_vocab_errors(tmp_path):
    with pytest.raises(stencil.VocabError):
        stencil.Vocab.from_gguf(str(tmp_path / "missing.gguf"))
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(stencil.VocabError):
        stencil.Vocab.from_gguf(str(junk))
    with pytest.raises(stencil.VocabError):
        stencil.Vocab.from_tokenizer_json("[1, 2, 3]")


# Every hostile call, in a child interpreter: a crash there is a failed test with its
# signal, not a dead test run. Each call must raise an Exception (the kinds listed are what
# the binding documents), and the matcher must still work afterwards.
HOSTILE = r"""
import numpy as np, stencil, sys
import torch
vocab = stencil.Vocab.from_tokens([b"<eos>", b"a", b"b", b"ab"], eos_ids=[0], vocab_size=70)
g = stencil.Compiler(vocab).compile_regex("(a|b)+")
m = stencil.Matcher(g)
W = stencil.bitmask_words(vocab.size)
good = np.zeros((2, W), dtype=np.int32)
ro = np.zeros((1, W), dtype=np.int32); ro.setflags(write=False)
cases = {
    "float32": (lambda: m.fill_next_token_bitmask(np.zeros((1, W), dtype=np.float32)), TypeError),
    "int64": (lambda: m.fill_next_token_bitmask(np.zeros((1, W), dtype=np.int64)), TypeError),
    "int16": (lambda: m.fill_next_token_bitmask(np.zeros((1, 2 * W), dtype=np.int16)), TypeError),
    "big-endian": (lambda: m.fill_next_token_bitmask(np.zeros((1, W), dtype=">i4")), TypeError),
    "3-D": (lambda: m.fill_next_token_bitmask(np.zeros((1, 1, W), dtype=np.int32)), ValueError),
    "0-D": (lambda: m.fill_next_token_bitmask(np.zeros((), dtype=np.int32)), ValueError),
    "too narrow": (lambda: m.fill_next_token_bitmask(np.zeros((1, W - 1), dtype=np.int32)), ValueError),
    "empty rows": (lambda: m.fill_next_token_bitmask(np.zeros((0, W), dtype=np.int32)), IndexError),
    "non-contiguous": (lambda: m.fill_next_token_bitmask(np.zeros((2, 2 * W), dtype=np.int32)[:, ::2]), ValueError),
    "fortran": (lambda: m.fill_next_token_bitmask(np.asfortranarray(np.zeros((3, W), dtype=np.int32))), ValueError),
    "read-only": (lambda: m.fill_next_token_bitmask(ro), ValueError),
    "frombuffer bytes": (lambda: m.fill_next_token_bitmask(np.frombuffer(bytes(4 * W), dtype=np.int32)), ValueError),
    "row out of range": (lambda: m.fill_next_token_bitmask(good, 2), IndexError),
    "row huge": (lambda: m.fill_next_token_bitmask(good, 2**62), (IndexError, OverflowError)),
    "row negative": (lambda: m.fill_next_token_bitmask(good, -1), (IndexError, OverflowError, ValueError)),
    "list": (lambda: m.fill_next_token_bitmask([0] * W), TypeError),
    "None": (lambda: m.fill_next_token_bitmask(None), TypeError),
    "bytearray": (lambda: m.fill_next_token_bitmask(bytearray(4 * W)), TypeError),
    "torch int64": (lambda: m.fill_next_token_bitmask(torch.zeros((1, W), dtype=torch.int64)), TypeError),
    "torch float": (lambda: m.fill_next_token_bitmask(torch.zeros((1, W), dtype=torch.float32)), TypeError),
    "torch non-contiguous": (lambda: m.fill_next_token_bitmask(torch.zeros((W, 2), dtype=torch.int32).t()), ValueError),
    "torch narrow": (lambda: m.fill_next_token_bitmask(torch.zeros((1, W - 1), dtype=torch.int32)), ValueError),
    "torch row out of range": (lambda: m.fill_next_token_bitmask(torch.zeros((1, W), dtype=torch.int32), 1), IndexError),
    "batch twice": (lambda: stencil.fill_next_token_bitmask_batch([m, m], good), Exception),
    "batch same row": (lambda: stencil.fill_next_token_bitmask_batch([m, m.fork()], good, [0, 0]), ValueError),
    "batch indices length": (lambda: stencil.fill_next_token_bitmask_batch([m], good, [0, 1]), ValueError),
    "batch row out of range": (lambda: stencil.fill_next_token_bitmask_batch([m], good, [5]), IndexError),
    "batch not matchers": (lambda: stencil.fill_next_token_bitmask_batch([1, 2], good), TypeError),
    "rollback too far": (lambda: m.rollback(10), stencil.MatchError),
    "rollback negative": (lambda: m.rollback(-3), (OverflowError, ValueError)),
    "forced limit negative": (lambda: m.forced_tokens(-1), (OverflowError, ValueError)),
    "consume str": (lambda: m.consume_token("a"), TypeError),
    "consume_tokens str": (lambda: m.consume_tokens("ab"), TypeError),
    "token_bytes out of range": (lambda: vocab.token_bytes(10**6), (IndexError, ValueError, stencil.VocabError)),
    "token_bytes negative": (lambda: vocab.token_bytes(-1), (IndexError, ValueError, OverflowError, stencil.VocabError)),
    "from_tokens eos out of range": (lambda: stencil.Vocab.from_tokens([b"a"], eos_ids=[9]), stencil.VocabError),
    "from_tokens narrow": (lambda: stencil.Vocab.from_tokens([b"<e>", b"a", b"b"], eos_ids=[0], vocab_size=2), stencil.VocabError),
    "from_tokens not bytes": (lambda: stencil.Vocab.from_tokens([1, 2], eos_ids=[0]), TypeError),
    "from_huggingface object": (lambda: stencil.Vocab.from_huggingface(object()), (stencil.VocabError, TypeError, AttributeError)),
    "compile schema not json": (lambda: stencil.Compiler(vocab).compile_json_schema("{nope"), stencil.CompileError),
    "compile schema list": (lambda: stencil.Compiler(vocab).compile_json_schema([1, 2]), (stencil.CompileError, TypeError)),
    "compile schema set": (lambda: stencil.Compiler(vocab).compile_json_schema({"enum": {1, 2}}), (stencil.CompileError, TypeError, ValueError)),
    "compile schema nan": (lambda: stencil.Compiler(vocab).compile_json_schema({"const": float("nan")}), (stencil.CompileError, TypeError, ValueError)),
    "compile regex bad": (lambda: stencil.Compiler(vocab).compile_regex("(("), stencil.CompileError),
    "compile gbnf empty": (lambda: stencil.Compiler(vocab).compile_grammar(""), stencil.CompileError),
    "compile gbnf nul": (lambda: stencil.Compiler(vocab).compile_grammar('root ::= "\x00"'), stencil.CompileError),
    "compile tools bad": (lambda: stencil.Compiler(vocab).compile_tools("[{]"), stencil.CompileError),
    "indent negative": (lambda: stencil.Compiler(vocab).compile_json_schema({}, indent=-2), (OverflowError, ValueError, stencil.CompileError)),
    "separators wrong": (lambda: stencil.Compiler(vocab).compile_json_schema({}, separators=(",",)), (TypeError, ValueError, stencil.CompileError)),
    "property_order bad": (lambda: stencil.Compiler(vocab).compile_json_schema({}, property_order="random"), (ValueError, stencil.CompileError)),
    "Matcher of non-grammar": (lambda: stencil.Matcher(vocab), TypeError),
}
bad = []
for name, (call, kinds) in cases.items():
    try:
        call()
    except kinds:
        pass
    except Exception as e:
        bad.append(f"{name}: raised {type(e).__name__}: {e} (expected {kinds})")
    else:
        bad.append(f"{name}: no exception")
    # The matcher still works after every refused call.
    m.fill_next_token_bitmask(good, 0)
    assert sorted(m.next_token_mask()) == [1, 2, 3], (name, m.next_token_mask())
for line in bad:
    print(line)
print("DONE", len(cases))
"""


def test_hostile_calls_raise_and_never_crash():
    proc = subprocess.run(
        [sys.executable, "-c", HOSTILE], capture_output=True, text=True, timeout=120, cwd=str(Path(__file__).parent)
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"the child interpreter died (status {proc.returncode}):\n{out[-3000:]}"
    lines = proc.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("DONE"), out[-3000:]
    wrong = lines[:-1]
    assert not wrong, "calls that did not raise the expected exception:\n" + "\n".join(wrong)


def test_uint32_and_torch_int32_buffers(toy_vocab):
    try:
        import torch
    except ImportError as exc:
        pytest.fail(f"torch is missing ({exc}): run scripts/test-python.sh", pytrace=False)
    g = stencil.Compiler(toy_vocab).compile_regex("(ab)+")
    m = stencil.Matcher(g)
    ref = matcher_mask(m)
    u = np.zeros((1, len(ref)), dtype=np.uint32)
    m.fill_next_token_bitmask(u)
    assert np.array_equal(u[0].view(np.int32), ref)
    t = torch.full((3, len(ref)), -1, dtype=torch.int32)
    m.fill_next_token_bitmask(t, 2)
    assert np.array_equal(t[2].numpy(), ref) and (t[:2] == -1).all()
    one = torch.zeros(len(ref), dtype=torch.int32)
    m.fill_next_token_bitmask(one)
    assert np.array_equal(one.numpy(), ref)
    # A contiguous row view of a larger tensor (non-zero storage offset).
    big = torch.zeros((4, len(ref)), dtype=torch.int32)
    m.fill_next_token_bitmask(big[1:3], 1)
    assert np.array_equal(big[2].numpy(), ref) and not big[[0, 1, 3]].any()
