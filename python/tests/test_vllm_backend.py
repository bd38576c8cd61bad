"""stencil.vllm's classes on their own, on the SmolLM2 tokenizer: the edge cases of the
grammar object (tokens after EOS, refused tokens, stop tokens, rollback counts) and the
request compilation, Lark included. They run in both Python environments: without vLLM
(the package's stand-in base classes) and in .venv-vllm/ (vLLM's own). How vLLM drives
the backend is tested against the real vLLM in engines/test_vllm_real.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import stencil
from stencil import vllm as sv

from harness import RECORD, json_spec, mask_row, replay, tokens_for

def vllm_config(disable_any_whitespace=False, disable_additional_properties=False):
    return SimpleNamespace(
        structured_outputs_config=SimpleNamespace(
            disable_any_whitespace=disable_any_whitespace,
            disable_additional_properties=disable_additional_properties,
        ),
        speculative_config=None,
    )


@pytest.fixture(scope="module")
def backend(smollm2_tokenizer, smollm2_gguf):
    from conftest import gguf_logits_width

    b = sv.StencilBackend(
        vllm_config(), tokenizer=smollm2_tokenizer, vocab_size=gguf_logits_width(str(smollm2_gguf))
    )
    yield b
    b.destroy()


def test_backend_vocab_matches_reference(backend, smollm2_vocab):
    assert backend.vocab_size == smollm2_vocab.size
    assert sorted(backend.vocab.eos_ids) == sorted(smollm2_vocab.eos_ids)
    for t in (0, 1, 2, 100, 1000, smollm2_vocab.size - 1):
        assert backend.vocab.token_bytes(t) == smollm2_vocab.token_bytes(t)


def test_disable_additional_properties(smollm2_tokenizer, smollm2_compiler):
    """The guidance backend's option: objects with properties get additionalProperties
    false, so only the declared keys can appear."""
    b = sv.StencilBackend(
        vllm_config(disable_any_whitespace=True, disable_additional_properties=True),
        smollm2_tokenizer,
        49152,
    )
    open_schema = {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]}
    closed = dict(open_schema, additionalProperties=False)
    g = b.compile_grammar(sv.StructuredOutputOptions.JSON, json.dumps(open_schema))
    ref = smollm2_compiler.compile_json_schema(closed, whitespace="compact", strict=False)
    assert_masks_along(g, ref, tokens_for(smollm2_compiler.vocab, ref, '{"a":true}'), b.vocab_size)


def assert_masks_along(g, ref, tokens, vocab_size):
    """Accepting `tokens` one by one, each mask of `g` equals a replay of `ref`'s."""
    words = stencil.bitmask_words(vocab_size)
    for n in range(len(tokens) + 1):
        row = torch.zeros((1, words), dtype=torch.int32)
        g.fill_bitmask(row, 0)
        np.testing.assert_array_equal(row[0].numpy(), mask_row(replay(ref, tokens[:n]), words))
        if n < len(tokens):
            assert g.accept_tokens("r", [tokens[n]])


def test_tokens_after_eos_are_ignored_and_not_counted(backend, smollm2_compiler):
    """As in vLLM's xgrammar and guidance backends: tokens after EOS are accepted and
    ignored; a rollback counts EOS and the tokens before it."""
    spec = json_spec(RECORD, "record")
    g = backend.compile_grammar(sv.StructuredOutputOptions.JSON, spec.spec)
    ref = smollm2_compiler.compile_json_schema(RECORD, whitespace="flexible", strict=False)
    body = tokens_for(smollm2_compiler.vocab, ref, '{"id":5,"tag":"beta","ok":false}')
    eos = smollm2_compiler.vocab.eos_ids[0]
    extra = body[0]
    assert g.accept_tokens("r", body + [eos, extra, extra])  # post-EOS artifacts: ignored
    assert g.is_terminated()
    assert g.num_processed_tokens == len(body) + 1
    assert g.validate_tokens([extra]) == []
    g.rollback(3)  # EOS and the last two tokens of the body
    assert not g.is_terminated()
    assert g.num_processed_tokens == len(body) - 2
    words = stencil.bitmask_words(backend.vocab_size)
    row = torch.zeros((1, words), dtype=torch.int32)
    g.fill_bitmask(row, 0)
    np.testing.assert_array_equal(row[0].numpy(), mask_row(replay(ref, body[:-2]), words))
    g.rollback(0)
    g.rollback(-1)
    assert g.num_processed_tokens == len(body) - 2
    assert g.accept_tokens("r", body[-2:] + [eos]) and g.is_terminated()
    g.rollback(10**6)  # more than were accepted: back to the start
    assert g.num_processed_tokens == 0 and g.matcher.num_tokens == 0
    assert g.accept_tokens("r", [eos]) is False  # nothing yet: EOS refused
    g.reset()
    assert not g.is_terminated() and g.num_processed_tokens == 0
    g.fill_bitmask(row, 0)
    np.testing.assert_array_equal(row[0].numpy(), mask_row(stencil.Matcher(ref), words))


def test_disable_additional_properties_leaves_literals_alone(smollm2_tokenizer):
    """const/enum values holding a "properties" key are data, not schemas (vLLM #58695)."""
    feature = {"type": "Feature", "properties": {"name": "HQ"}}
    for schema in ({"const": feature}, {"enum": [feature]}, {"type": "object", "default": feature}):
        assert sv._no_additional_properties(schema) == schema
    nested = {"anyOf": [{"properties": {"a": {"type": "object", "properties": {}}}}], "$defs": {"x": {"properties": {}}}}
    out = sv._no_additional_properties(nested)
    assert out["anyOf"][0]["additionalProperties"] is False
    assert out["anyOf"][0]["properties"]["a"]["additionalProperties"] is False
    assert out["$defs"]["x"]["additionalProperties"] is False
    assert "additionalProperties" not in nested["anyOf"][0]  # the input is not modified


def test_refused_token_returns_false(backend, smollm2_compiler):
    g = backend.compile_grammar(sv.StructuredOutputOptions.REGEX, "[0-9]+")
    vocab = smollm2_compiler.vocab
    letter = next(t for t in range(vocab.size) if vocab.token_bytes(t) == b"a")
    assert g.accept_tokens("r", [letter]) is False
    assert g.num_processed_tokens == 0
    assert g.validate_tokens([letter]) == []
    assert g.validate_tokens([-1, 5]) == []  # vLLM pads drafts with -1
    assert g.validate_tokens([]) == []


def test_structural_tags_compile_and_unsupported_formats_are_named(backend):
    tag = json.dumps({"structures": [{"begin": "<f>", "schema": {"type": "integer"}, "end": "</f>"}], "triggers": ["<f"]})
    g = backend.compile_grammar(sv.StructuredOutputOptions.STRUCTURAL_TAG, tag)
    assert not g.is_terminated()
    bad = json.dumps({"type": "structural_tag", "format": {"type": "dispatch", "rules": []}})
    with pytest.raises(ValueError, match="dispatch"):
        backend.compile_grammar(sv.StructuredOutputOptions.STRUCTURAL_TAG, bad)


@pytest.mark.parametrize(
    "kind,spec",
    [("JSON", "{not json"), ("JSON", '{"type": "frobnicate"}'), ("REGEX", "a(b"),
     ("GRAMMAR", "root ::= missing"), ("CHOICE", '"not a list"'), ("STRUCTURAL_TAG", "{not json")],
)
def test_bad_specs_raise_value_error(backend, kind, spec):
    with pytest.raises(ValueError):
        backend.compile_grammar(sv.StructuredOutputOptions[kind], spec)


def test_bitmask_allocation(backend):
    bm = backend.allocate_token_bitmask(5)
    assert bm.dtype == torch.int32 and tuple(bm.shape) == (5, stencil.bitmask_words(backend.vocab_size))
    assert bool((bm == -1).all())




def _row(g, words):
    row = torch.zeros((1, words), dtype=torch.int32)
    g.fill_bitmask(row, 0)
    return row[0].numpy().view(np.uint32)


def _bit(row, t):
    return bool(row[t >> 5] >> np.uint32(t & 31) & np.uint32(1))


def test_stop_tokens_are_masked_until_the_grammar_can_end(backend, smollm2_compiler):
    """vLLM 0.33 passes the request's stop tokens: a stop token the grammar would take
    as text (",") is allowed exactly where EOS is, and ends the grammar like EOS."""
    vocab = smollm2_compiler.vocab
    comma = next(t for t in range(len(vocab)) if vocab.token_bytes(t) == b",")
    letter = next(t for t in range(len(vocab)) if vocab.token_bytes(t) == b"a")
    eos = vocab.eos_ids[0]
    g = backend.compile_grammar(sv.StructuredOutputOptions.REGEX, "[a,]+", stop_token_ids={eos, comma, 10**9})
    words = stencil.bitmask_words(backend.vocab_size)
    row = _row(g, words)
    assert not _bit(row, comma) and not _bit(row, eos) and _bit(row, letter)
    assert g.validate_tokens([comma]) == []
    assert g.accept_tokens("r", [letter])
    row = _row(g, words)
    assert _bit(row, comma) and _bit(row, eos)
    assert g.validate_tokens([comma, letter]) == [comma]
    assert g.accept_tokens("r", [comma]) and g.is_terminated()
    g.rollback(1)
    assert not g.is_terminated() and g.num_processed_tokens == 1
    as_numpy = np.zeros((1, words), dtype=np.int32)  # a numpy bitmask takes the same bits
    g.fill_bitmask(as_numpy, 0)
    np.testing.assert_array_equal(as_numpy[0].view(np.uint32), _row(g, words))
    # Without stop tokens (vLLM before 0.33), "," is text.
    plain = backend.compile_grammar(sv.StructuredOutputOptions.REGEX, "[a,]+")
    assert _bit(_row(plain, words), comma)


LARK = 'start: "id=" NUM\nNUM: /[0-9]{2,4}/\n'


def test_lark_grammar_is_converted(backend, smollm2_compiler):
    """The grammar vLLM users send in Lark: masks equal those of the same language
    written in GBNF by hand."""
    g = backend.compile_grammar(sv.StructuredOutputOptions.GRAMMAR, LARK)
    ref = smollm2_compiler.compile_grammar('root ::= "id=" [0-9]{2,4}')
    assert_masks_along(g, ref, tokens_for(smollm2_compiler.vocab, ref, "id=2024"), backend.vocab_size)


def test_lark_errors_are_located(backend):
    with pytest.raises(ValueError, match=r"Lark grammar: \S+ is not defined at line 2, column 6"):
        backend.compile_grammar(sv.StructuredOutputOptions.GRAMMAR, 'start: "a"\nfoo: bar')


def test_an_eos_vllm_does_not_stop_on_is_never_allowed(backend, smollm2_compiler):
    """The tokenizer declares more end tokens than the request stops on (vLLM passes
    only its stop set): those would end the grammar while vLLM keeps generating, so they
    are masked and refused."""
    vocab = smollm2_compiler.vocab
    assert len(vocab.eos_ids) >= 2, vocab.eos_ids
    keep, other = vocab.eos_ids[-1], vocab.eos_ids[0]
    digit = next(t for t in range(len(vocab)) if vocab.token_bytes(t) == b"7")
    g = backend.compile_grammar(sv.StructuredOutputOptions.REGEX, "[0-9]", stop_token_ids={keep})
    words = stencil.bitmask_words(backend.vocab_size)
    assert g.accept_tokens("r", [digit])
    row = _row(g, words)
    assert _bit(row, keep) and not _bit(row, other)
    assert g.validate_tokens([other]) == []
    assert g.accept_tokens("r", [other]) is False
    assert g.accept_tokens("r", [keep]) and g.is_terminated()
