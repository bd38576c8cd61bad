"""stencil.sglang's classes on their own, on the SmolLM2 tokenizer: the edge cases of the
grammar object (any JSON, refused tokens, invalid requests, jump-and-retokenize, masks
wider than the vocabulary) in both Python environments, without SGLang (the package's
stand-ins) and in .venv-vllm/ (SGLang's own base classes). How SGLang drives the backend
is tested against the real SGLang in engines/test_sglang_real.py."""

from __future__ import annotations

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
    grammar_spec,
    mask_row,
    replay,
    tokens_for,
)


@pytest.fixture(scope="module")
def backend(smollm2_tokenizer, smollm2_gguf):
    return sg.create_backend(
        None, smollm2_tokenizer, gguf_logits_width(str(smollm2_gguf)), {smollm2_tokenizer.eos_token_id}
    )


@pytest.fixture(scope="module")
def sglang_compiler(smollm2_tokenizer, smollm2_gguf):
    """The reference: the model's EOS is the only end token (SGLang stops on it alone)."""
    vocab = stencil.Vocab.from_huggingface(
        smollm2_tokenizer, vocab_size=gguf_logits_width(str(smollm2_gguf)), eos_ids=[smollm2_tokenizer.eos_token_id]
    )
    return stencil.Compiler(vocab)


@pytest.fixture(scope="module")
def model_width(smollm2_gguf):
    return gguf_logits_width(str(smollm2_gguf))


def test_any_json(backend, sglang_compiler, model_width):
    """("json", "$$ANY$$"): any JSON value."""
    g = backend.dispatch_json("$$ANY$$")
    assert isinstance(g, sg.StencilGrammar)
    ref = sglang_compiler.compile_json_schema(True, whitespace="flexible", strict=False)
    words = stencil.bitmask_words(sglang_compiler.vocab.size)
    toks = tokens_for(sglang_compiler.vocab, ref, '[1,{"a":null},"x"]')
    for n, t in enumerate(toks):
        row = g.allocate_vocab_mask(model_width, 1, "cpu")
        g.fill_vocab_mask(row, 0)
        np.testing.assert_array_equal(row[0].numpy(), mask_row(replay(ref, toks[:n]), words))
        g.accept_token(t)
    g.accept_token(sglang_compiler.vocab.eos_ids[0])
    assert g.is_terminated()


def test_refused_token_raises_and_leaves_state(backend, sglang_compiler):
    g = backend.dispatch_regex("[0-9]+")
    vocab = sglang_compiler.vocab
    letter = next(t for t in range(vocab.size) if vocab.token_bytes(t) == b"a")
    with pytest.raises(ValueError, match="not accepted"):
        g.accept_token(letter)
    assert g.matcher.num_tokens == 0 and g.accepted_tokens == []


def test_invalid_requests_give_invalid_grammar_objects(backend):
    for g in (
        backend.dispatch_json("{not json"),
        backend.dispatch_regex("a(b"),
        backend.dispatch_ebnf("root ::= missing"),
        backend.dispatch_structural_tag(json.dumps({"type": "structural_tag", "format": {"type": "any_tokens"}})),
    ):
        assert not isinstance(g, sg.StencilGrammar)
        if not sg.HAVE_SGLANG:
            assert isinstance(g, sg.InvalidGrammar) and g.error_message
    msg = backend.dispatch_structural_tag("{}").error_message
    assert "structural_tag" in msg
    tag = {"structures": [{"begin": "<f>", "schema": {"type": "integer"}, "end": "</f>"}], "triggers": ["<f"]}
    assert isinstance(backend.dispatch_structural_tag(json.dumps(tag)), sg.StencilGrammar)


def test_jump_and_retokenize(backend, sglang_compiler):
    """Roll back to the common prefix of old and new ids, accept the rest: the state
    equals a replay of the new ids."""
    ref = sglang_compiler.compile_grammar(GBNF)
    spec = grammar_spec(GBNF, GBNF_PY)
    g = backend.dispatch_ebnf(spec.spec)
    vocab = sglang_compiler.vocab
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


def test_the_grammar_ends_on_the_models_eos_only(backend, smollm2_tokenizer, smollm2_vocab):
    """SGLang passes the model's EOS ids, the tokens its scheduler stops on; the
    tokenizer's other end token (<|endoftext|>) must not end the grammar."""
    assert len(smollm2_vocab.eos_ids) > 1
    assert backend.vocab.eos_ids == [smollm2_tokenizer.eos_token_id]
    other = next(t for t in smollm2_vocab.eos_ids if t != smollm2_tokenizer.eos_token_id)
    g = backend.dispatch_regex("[0-9]")
    digit = next(t for t in range(len(backend.vocab)) if backend.vocab.token_bytes(t) == b"7")
    g.accept_token(digit)
    assert other not in g.matcher.next_token_mask()
    with pytest.raises(ValueError, match="not accepted"):
        g.accept_token(other)


def test_finished_flag(backend):
    g = backend.dispatch_regex("x")
    assert g.finished is False
    g.finished = True
    assert g.finished is True
    assert g.copy().finished is False


