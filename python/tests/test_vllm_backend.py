"""stencil.vllm against a replay of vLLM v1's scheduler calls (tests/harness.py), on the
SmolLM2 tokenizer. vLLM itself is GPU-only and not installed: the adapter's classes are
checked against the method names of vLLM's base classes instead."""

from __future__ import annotations

import inspect
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import stencil
from stencil import vllm as sv

from harness import POINTS, RECORD, VllmSim, assert_compact, all_specs, json_spec, mask_row, replay, tokens_for

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


def test_batch_of_requests(backend, smollm2_compiler):
    """Eight requests of every supported kind, four sequences at a time, admitted at
    different steps: every mask equals a replay, every output passes its check."""
    specs = all_specs()
    sim = VllmSim(backend, smollm2_compiler, max_num_seqs=4, seed=1234)
    reqs = sim.run(specs, arrivals=[0, 0, 1, 3, 3, 5, 8, 8])
    for req in reqs:
        assert req.done and req.adapter.is_terminated()
        req.spec.check(req.text())


@pytest.mark.parametrize("seed", [7, 8])
def test_speculative_decoding(backend, smollm2_compiler, seed):
    """Drafts of 4 tokens, half with a refused token: validate_tokens, per-position masks
    with accept + rollback, rejection rollback; state equals a replay after each."""
    sim = VllmSim(backend, smollm2_compiler, max_num_seqs=2, seed=seed, num_spec_tokens=4)
    for i, spec in enumerate(all_specs()):
        req = sim.speculative(spec, rid=f"spec-{i}", k=4, invalid_rate=0.5)
        spec.check(req.text())


def test_compact_whitespace(smollm2_tokenizer, smollm2_compiler):
    """disable_any_whitespace -> compact JSON: masks equal the compact grammar's."""
    b = sv.StencilBackend(vllm_config(disable_any_whitespace=True), smollm2_tokenizer, 49152)
    sim = VllmSim(b, smollm2_compiler, max_num_seqs=2, seed=99, whitespace="compact")
    for req in sim.run([json_spec(RECORD, "record"), json_spec(POINTS, "points")]):
        text = req.text()
        req.spec.check(text)
        assert_compact(text)


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
    text_tokens = tokens_for(smollm2_compiler.vocab, ref, '{"a":true}')
    words = stencil.bitmask_words(b.vocab_size)
    for n in range(len(text_tokens) + 1):
        row = torch.zeros((1, words), dtype=torch.int32)
        g.fill_bitmask(row, 0)
        np.testing.assert_array_equal(row[0].numpy(), mask_row(replay(ref, text_tokens[:n]), words))
        if n < len(text_tokens):
            assert g.accept_tokens("r", [text_tokens[n]])


def test_tokens_after_eos_are_ignored_and_counted_by_rollback(backend, smollm2_compiler):
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
    g.rollback(3)  # the two ignored tokens, then EOS
    assert not g.is_terminated()
    assert g.num_processed_tokens == len(body)
    words = stencil.bitmask_words(backend.vocab_size)
    row = torch.zeros((1, words), dtype=torch.int32)
    g.fill_bitmask(row, 0)
    np.testing.assert_array_equal(row[0].numpy(), mask_row(replay(ref, body), words))
    g.rollback(0)
    g.rollback(-1)
    assert g.num_processed_tokens == len(body)
    assert g.accept_tokens("r", [eos]) and g.is_terminated()
    g.reset()
    assert not g.is_terminated() and g.num_processed_tokens == 0
    g.fill_bitmask(row, 0)
    np.testing.assert_array_equal(row[0].numpy(), mask_row(stencil.Matcher(ref), words))


def test_refused_token_returns_false(backend, smollm2_compiler):
    g = backend.compile_grammar(sv.StructuredOutputOptions.REGEX, "[0-9]+")
    vocab = smollm2_compiler.vocab
    letter = next(t for t in range(vocab.size) if vocab.token_bytes(t) == b"a")
    assert g.accept_tokens("r", [letter]) is False
    assert g.num_processed_tokens == 0
    assert g.validate_tokens([letter]) == []
    assert g.validate_tokens([-1, 5]) == []  # vLLM pads drafts with -1
    assert g.validate_tokens([]) == []


def test_structural_tag_is_refused_clearly(backend):
    tag = json.dumps({"structures": [{"begin": "<f>", "schema": {}, "end": "</f>"}], "triggers": ["<f"]})
    with pytest.raises(ValueError, match="structural_tag"):
        backend.compile_grammar(sv.StructuredOutputOptions.STRUCTURAL_TAG, tag)


@pytest.mark.parametrize(
    "kind,spec",
    [("JSON", "{not json"), ("JSON", '{"type": "frobnicate"}'), ("REGEX", "a(b"),
     ("GRAMMAR", "root ::= missing"), ("CHOICE", '"not a list"')],
)
def test_bad_specs_raise_value_error(backend, kind, spec):
    with pytest.raises(ValueError):
        backend.compile_grammar(sv.StructuredOutputOptions[kind], spec)


def test_bitmask_allocation(backend):
    bm = backend.allocate_token_bitmask(5)
    assert bm.dtype == torch.int32 and tuple(bm.shape) == (5, stencil.bitmask_words(backend.vocab_size))
    assert bool((bm == -1).all())


# The abstract methods of vLLM's base classes (vllm/v1/structured_output/backend_types.py),
# with their parameters; a release adding one makes the real ABC refuse to instantiate.
VLLM_GRAMMAR_METHODS = {
    "accept_tokens": ["request_id", "tokens"],
    "validate_tokens": ["tokens"],
    "rollback": ["num_tokens"],
    "fill_bitmask": ["bitmask", "idx"],
    "is_terminated": [],
    "reset": [],
}
VLLM_BACKEND_METHODS = {
    "compile_grammar": ["request_type", "grammar_spec"],
    "allocate_token_bitmask": ["max_num_seqs"],
    "destroy": [],
}


@pytest.mark.parametrize(
    "cls,methods", [(sv.StencilGrammar, VLLM_GRAMMAR_METHODS), (sv.StencilBackend, VLLM_BACKEND_METHODS)]
)
def test_signatures_mirror_vllm(cls, methods):
    for name, params in methods.items():
        sig = inspect.signature(getattr(cls, name))
        got = [p for p in sig.parameters if p != "self"]
        # vLLM's base names the fill_bitmask index `batch_index`, its xgrammar backend `idx`;
        # the scheduler passes it positionally.
        if name == "fill_bitmask":
            assert len(got) == 2, got
        else:
            assert got == params, (name, got)
    fields = [f.name for f in __import__("dataclasses").fields(sv.StencilBackend)]
    assert fields[:3] == ["vllm_config", "tokenizer", "vocab_size"]
    assert [m.name for m in sv.StructuredOutputOptions] == [
        "JSON", "JSON_OBJECT", "REGEX", "GRAMMAR", "CHOICE", "STRUCTURAL_TAG"
    ]


class _OffByOneRollback(sv.StencilGrammar):
    def rollback(self, num_tokens: int) -> None:
        super().rollback(num_tokens - 1)


class _BrokenBackend(sv.StencilBackend):
    def compile_grammar(self, request_type, grammar_spec):
        g = super().compile_grammar(request_type, grammar_spec)
        return _OffByOneRollback(matcher=g.matcher, vocab_size=g.vocab_size)


def test_harness_catches_a_broken_rollback(smollm2_tokenizer, smollm2_compiler):
    """The replay checks can fail: a backend whose rollback undoes one token too few."""
    b = _BrokenBackend(vllm_config(), smollm2_tokenizer, 49152)
    sim = VllmSim(b, smollm2_compiler, max_num_seqs=1, seed=3, num_spec_tokens=3)
    with pytest.raises(AssertionError):
        sim.speculative(json_spec(RECORD, "record"), rid="broken", k=3, invalid_rate=0.5)
