"""Vocabularies: the one built from a transformers tokenizer must be the one llama.cpp's
GGUF holds (token for token: bytes and whether it is text), whichever door it comes in by;
bad inputs are VocabError, never a crash."""

from __future__ import annotations

import pytest

import stencil


def assert_same_tokens(a: stencil.Vocab, b: stencil.Vocab) -> None:
    assert len(a) == len(b)
    differ = [
        t
        for t in range(len(a))
        if a.is_text(t) != b.is_text(t) or (a.is_text(t) and a.token_bytes(t) != b.token_bytes(t))
    ]
    assert not differ, [(t, a.token_bytes(t), a.is_text(t), b.token_bytes(t), b.is_text(t)) for t in differ[:10]]


@pytest.mark.parametrize("model", ["smollm2", "gemma"])
def test_huggingface_vocab_is_the_gguf_vocab(model, request):
    gguf = request.getfixturevalue(f"{model}_gguf")
    tokenizer = request.getfixturevalue(f"{model}_tokenizer")
    from_gguf = stencil.Vocab.from_gguf(str(gguf))
    from_hf = stencil.Vocab.from_huggingface(tokenizer)
    assert_same_tokens(from_gguf, from_hf)
    assert tokenizer.eos_token_id in from_hf.eos_ids
    # The same tokenizer.json text, given directly.
    from_json = stencil.Vocab.from_tokenizer_json(
        tokenizer.backend_tokenizer.to_str(), eos_ids=from_hf.eos_ids
    )
    assert_same_tokens(from_hf, from_json)
    assert from_json.eos_ids == from_hf.eos_ids


def test_mask_width_may_exceed_the_tokenizer(smollm2_tokenizer):
    vocab = stencil.Vocab.from_huggingface(smollm2_tokenizer, vocab_size=len(smollm2_tokenizer) + 100)
    assert vocab.size == len(smollm2_tokenizer) + 100 and len(vocab) == len(smollm2_tokenizer)
    grammar = stencil.Compiler(vocab).compile_regex("[0-9]+")
    allowed = stencil.Matcher(grammar).next_token_mask()
    assert allowed and max(allowed) < len(vocab), "padding ids are never allowed"
    with pytest.raises(stencil.VocabError):
        stencil.Vocab.from_huggingface(smollm2_tokenizer, vocab_size=10)


def test_from_tokens_kinds_and_several_eos():
    vocab = stencil.Vocab.from_tokens([b"<s>", b"</s>", b"a", b"b", None, b"<eot>"], eos_ids=[1, 5], special_ids=[0])
    assert (len(vocab), vocab.size, vocab.eos_ids) == (6, 6, [1, 5])
    assert [vocab.is_text(t) for t in range(6)] == [False, False, True, True, False, False]
    m = stencil.Matcher(stencil.Compiler(vocab).compile_regex("ab?"))
    assert m.next_token_mask() == [2]
    assert m.consume_token(2)
    assert m.next_token_mask() == [1, 3, 5], "every EOS id ends the text"
    assert m.consume_token(5) and m.is_terminated()


@pytest.mark.parametrize(
    "call",
    [
        lambda: stencil.Vocab.from_gguf("/nonexistent/model.gguf"),
        lambda: stencil.Vocab.from_tokenizer_json("{not json"),
        lambda: stencil.Vocab.from_tokenizer_json('{"model": {"type": "BPE", "vocab": {}}}'),
        lambda: stencil.Vocab.from_tokens([], eos_ids=[0]),
        lambda: stencil.Vocab.from_tokens([b"a"], eos_ids=[]),
        lambda: stencil.Vocab.from_tokens([b"a"], eos_ids=[3]),
        lambda: stencil.Vocab.from_tokens([b"a", b"b"], eos_ids=[0], special_ids=[7]),
        lambda: stencil.Vocab.from_huggingface(object()),
    ],
)
def test_bad_vocabularies_are_vocab_errors(call, tmp_path):
    with pytest.raises(stencil.VocabError):
        call()


def test_a_file_that_is_not_gguf_is_a_vocab_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 64)
    with pytest.raises(stencil.VocabError, match="bad.gguf"):
        stencil.Vocab.from_gguf(str(bad))


def test_token_ids_out_of_range_are_index_errors():
    vocab = stencil.Vocab.from_tokens([b"a", b"</s>"], eos_ids=[1])
    with pytest.raises(IndexError):
        vocab.token_bytes(2)
    with pytest.raises(OverflowError):
        vocab.is_text(-1)
