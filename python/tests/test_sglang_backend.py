"""stencil.sglang against a replay of SGLang's scheduler and sampling calls
(tests/harness.py), on the SmolLM2 tokenizer. SGLang itself is GPU-only and not installed:
the adapter is checked against the method names of SGLang's base classes instead."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest
import torch

import stencil
from stencil import sglang as sg

from conftest import gguf_logits_width
from harness import (
    GBNF,
    GBNF_PY,
    PAIRS,
    POINTS,
    RECORD,
    SglangSim,
    all_specs,
    assert_compact,
    grammar_spec,
    json_spec,
    mask_row,
    regex_spec,
    replay,
    tokens_for,
)


@pytest.fixture(scope="module")
def backend(smollm2_tokenizer, smollm2_gguf):
    return sg.create_backend(
        None, smollm2_tokenizer, gguf_logits_width(str(smollm2_gguf)), {smollm2_tokenizer.eos_token_id}
    )


@pytest.fixture(scope="module")
def model_width(smollm2_gguf):
    return gguf_logits_width(str(smollm2_gguf))


def test_batch_with_plain_rows(backend, smollm2_compiler, model_width):
    """Every request kind at once, cached grammars copied per request, a request without
    a grammar in the batch: masks equal replays, outputs pass their checks."""
    specs = all_specs() + [json_spec(RECORD, "record again")]  # a cache hit
    sim = SglangSim(backend, smollm2_compiler, seed=4321, model_vocab_size=model_width)
    reqs = sim.run(specs)
    for req in reqs:
        assert req.adapter.is_terminated()
        req.spec.check(req.text())
    assert reqs[0].adapter is not reqs[-1].adapter


@pytest.mark.parametrize("seed", [11, 12])
def test_speculative_drafts(backend, smollm2_compiler, model_width, seed):
    sim = SglangSim(backend, smollm2_compiler, seed=seed, model_vocab_size=model_width)
    for i, spec in enumerate(all_specs()):
        req = sim.speculative(spec, rid=f"spec-{i}", k=5, invalid_rate=0.5)
        spec.check(req.text())


def test_compact_backend(smollm2_tokenizer, smollm2_compiler, model_width):
    class Args:
        constrained_json_disable_any_whitespace = True

    b = sg.create_backend(Args(), smollm2_tokenizer, model_width, None)
    sim = SglangSim(b, smollm2_compiler, seed=5, model_vocab_size=model_width, whitespace="compact")
    for req in sim.run([json_spec(POINTS, "points"), json_spec(PAIRS, "pairs")]):
        text = req.text()
        req.spec.check(text)
        assert_compact(text)


def test_any_json(backend, smollm2_compiler, model_width):
    """("json", "$$ANY$$"): any JSON value."""
    g = backend.dispatch_json("$$ANY$$")
    assert isinstance(g, sg.StencilGrammar)
    ref = smollm2_compiler.compile_json_schema(True, whitespace="flexible", strict=False)
    words = stencil.bitmask_words(smollm2_compiler.vocab.size)
    toks = tokens_for(smollm2_compiler.vocab, ref, '[1,{"a":null},"x"]')
    for n, t in enumerate(toks):
        row = g.allocate_vocab_mask(model_width, 1, "cpu")
        g.fill_vocab_mask(row, 0)
        np.testing.assert_array_equal(row[0].numpy(), mask_row(replay(ref, toks[:n]), words))
        g.accept_token(t)
    g.accept_token(smollm2_compiler.vocab.eos_ids[0])
    assert g.is_terminated()


def test_refused_token_raises_and_leaves_state(backend, smollm2_compiler):
    g = backend.dispatch_regex("[0-9]+")
    vocab = smollm2_compiler.vocab
    letter = next(t for t in range(vocab.size) if vocab.token_bytes(t) == b"a")
    with pytest.raises(ValueError, match="not accepted"):
        g.accept_token(letter)
    assert g.matcher.num_tokens == 0 and g.accepted_tokens == []


def test_invalid_requests_give_invalid_grammar_objects(backend):
    for g in (
        backend.dispatch_json("{not json"),
        backend.dispatch_regex("a(b"),
        backend.dispatch_ebnf("root ::= missing"),
        backend.dispatch_structural_tag(json.dumps({"structures": [], "triggers": []})),
    ):
        assert not isinstance(g, sg.StencilGrammar)
        if not sg.HAVE_SGLANG:
            assert isinstance(g, sg.InvalidGrammar) and g.error_message
    msg = backend.dispatch_structural_tag("{}").error_message
    assert "structural_tag" in msg


def test_jump_and_retokenize(backend, smollm2_compiler):
    """Roll back to the common prefix of old and new ids, accept the rest: the state
    equals a replay of the new ids."""
    ref = smollm2_compiler.compile_grammar(GBNF)
    spec = grammar_spec(GBNF, GBNF_PY)
    g = backend.dispatch_ebnf(spec.spec)
    vocab = smollm2_compiler.vocab
    old = tokens_for(vocab, ref, "[a1,b")
    single = [next(t for t in range(vocab.size) if vocab.token_bytes(t) == ch.encode()) for ch in "[a1,b"]
    for t in old:
        g.accept_token(t)
    g.jump_and_retokenize(old, single, -1)
    assert g.accepted_tokens == single
    words = stencil.bitmask_words(vocab.size)
    row = g.allocate_vocab_mask(vocab.size, 1, "cpu")
    g.fill_vocab_mask(row, 0)
    np.testing.assert_array_equal(row[0].numpy(), mask_row(replay(ref, single), words))


def test_apply_vocab_mask_extra_columns(backend):
    """Logits wider than the mask (model padding ids): the extra columns are masked."""
    g = backend.dispatch_regex("[0-9]")
    mask = g.allocate_vocab_mask(backend.vocab_size, 2, "cpu")
    g.fill_vocab_mask(mask, 0)
    logits = torch.zeros((2, backend.vocab_size + 40))
    g.apply_vocab_mask(logits=logits, vocab_mask=mask)
    assert bool(torch.isinf(logits[:, backend.vocab_size :]).all())
    assert bool(torch.isfinite(logits[1, : backend.vocab_size]).all())  # an all-allowed row
    allowed0 = torch.isfinite(logits[0]).nonzero().flatten().tolist()
    assert allowed0 == sorted(g.matcher.next_token_mask())


# SGLang's BaseGrammarObject / BaseGrammarBackend methods the scheduler and the sampler
# call (python/sglang/srt/constrained/base_grammar_backend.py), with their parameters.
SGLANG_OBJECT_METHODS = {
    "accept_token": ["token"],
    "rollback": ["k"],
    "is_terminated": [],
    "allocate_vocab_mask": ["vocab_size", "batch_size", "device"],
    "fill_vocab_mask": ["vocab_mask", "idx"],
    "move_vocab_mask": ["vocab_mask", "device"],
    "apply_vocab_mask": ["logits", "vocab_mask"],
    "copy": [],
    "try_jump_forward": ["tokenizer"],
    "jump_forward_str_state": ["helper"],
    "jump_and_retokenize": ["old_output_ids", "new_output_ids", "next_state"],
}
SGLANG_BACKEND_METHODS = {
    "dispatch_json": ["key_string"],
    "dispatch_regex": ["key_string"],
    "dispatch_ebnf": ["key_string"],
    "dispatch_structural_tag": ["key_string"],
}


def test_signatures_mirror_sglang():
    for cls, methods in ((sg.StencilGrammar, SGLANG_OBJECT_METHODS), (sg.StencilGrammarBackend, SGLANG_BACKEND_METHODS)):
        for name, params in methods.items():
            got = [p for p in inspect.signature(getattr(cls, name)).parameters if p != "self"]
            assert got == params, (cls.__name__, name, got)
    assert isinstance(inspect.getattr_static(sg.StencilGrammar, "move_vocab_mask"), staticmethod)
    assert isinstance(inspect.getattr_static(sg.StencilGrammar, "apply_vocab_mask"), staticmethod)
    # init_func(server_args, tokenizer, vocab_size, eos_token_ids)
    assert list(inspect.signature(sg.create_backend).parameters)[:4] == [
        "server_args", "tokenizer", "vocab_size", "eos_token_ids"
    ]


def test_finished_flag(backend):
    g = backend.dispatch_regex("x")
    assert g.finished is False
    g.finished = True
    assert g.finished is True
    assert g.copy().finished is False


class _WrongRow(sg.StencilGrammar):
    def fill_vocab_mask(self, vocab_mask, idx):
        super().fill_vocab_mask(vocab_mask, 0)  # always the first row

    def copy(self):
        return _WrongRow(self.grammar, self.key_string)


def test_harness_catches_a_wrong_row(backend, smollm2_compiler, model_width):
    """The replay checks can fail: a grammar object that fills the wrong mask row."""

    class Wrapper:
        def __getattr__(self, name):
            return getattr(backend, name)

        def dispatch_regex(self, key_string):
            g = backend.dispatch_regex(key_string)
            return _WrongRow(g.grammar, key_string)

    sim = SglangSim(Wrapper(), smollm2_compiler, seed=6, model_vocab_size=model_width)
    with pytest.raises(AssertionError):
        sim.run([regex_spec(r"[a-c]{1,2}-[0-9]"), regex_spec(r"[0-9]{2}")], with_plain_rows=True)
