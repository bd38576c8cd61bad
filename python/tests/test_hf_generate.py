"""transformers `generate()` with `StencilLogitsProcessor` on SmolLM2-135M-Instruct, loaded
from its GGUF by transformers (`gguf_file=`), on the CPU. For each fixture schema, greedy
decoding must end (EOS) within the token budget with output that parses and validates
with `jsonschema`."""

from __future__ import annotations

import json

import pytest
import torch

import stencil
from stencil.hf import StencilLogitsProcessor

from conftest import gguf_logits_width, load_instances, load_schema

# Three small fixture schemas (fixtures/schemas/), the text to turn into JSON and a token
# budget that greedy decoding stays within (compact JSON). The prompt shows the first
# valid instance of fixtures/schemas/NAME.valid.jsonl as the format to follow. Running out
# of budget before the output is complete is a failure.
CASES = [
    ("answer", 40, "What is 6 times 7?"),
    ("person", 40, "Alan Turing, 41, was an employee of the university."),
    ("tree", 30, "A tree with a single node, labelled top."),
]
BATCH_BUDGET = 40


@pytest.fixture(scope="module")
def model(smollm2_gguf):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    torch.set_num_threads(2)
    m = AutoModelForCausalLM.from_pretrained(
        str(smollm2_gguf.parent), gguf_file=smollm2_gguf.name, dtype=torch.float32
    )
    m.eval()
    return m


def prompt_ids(tokenizer, name: str, text: str):
    example = json.dumps(load_instances(name)[0], ensure_ascii=False, separators=(",", ":"))
    messages = [
        {"role": "system", "content": f"Reply with one line of JSON in this format: {example}"},
        {"role": "user", "content": text},
    ]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(prompt, return_tensors="pt", add_special_tokens=False)


def generate(model, tokenizer, enc, proc, max_new_tokens):
    with torch.no_grad():
        return model.generate(
            **enc,
            logits_processor=[proc],
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
        )


def check_row(proc, row, tokenizer, schema, name, max_new_tokens, new_tokens):
    import jsonschema

    m = proc.matchers[row]
    text_ids = [t for t in new_tokens if t not in proc.end_token_ids]
    text = tokenizer.decode(text_ids, skip_special_tokens=False)
    if not m.is_terminated():
        # The generation stopped without EOS: only the token budget can do that.
        assert m.is_accepting(), (
            f"{name}: max_new_tokens={max_new_tokens} cut the output before it was complete "
            f"(raise the budget): {text!r}"
        )
    value = json.loads(text)
    cls = jsonschema.validators.validator_for(schema)
    errors = [e.message for e in cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value)]
    assert not errors, f"{name}: {text!r} does not validate: {errors}"
    assert proc.grammar.validate(text) == [], f"{name}: the engine's own validator disagrees"
    return text


@pytest.mark.parametrize("name,max_new_tokens,question", CASES, ids=[c[0] for c in CASES])
def test_generate_validates(model, smollm2_tokenizer, smollm2_gguf, name, max_new_tokens, question):
    schema = load_schema(name)
    width = gguf_logits_width(str(smollm2_gguf))
    assert model.config.vocab_size == width
    proc = StencilLogitsProcessor.from_json_schema(smollm2_tokenizer, schema, vocab_size=width)
    enc = prompt_ids(smollm2_tokenizer, name, question)
    out = generate(model, smollm2_tokenizer, enc, proc, max_new_tokens)
    new = out[0, enc["input_ids"].shape[1]:].tolist()
    assert len(new) <= max_new_tokens
    check_row(proc, 0, smollm2_tokenizer, schema, name, max_new_tokens, new)
    # The matcher consumed exactly what generate() produced up to the last step.
    assert proc.matchers[0].num_tokens in (len(new), len(new) - 1)


def test_generate_batch_left_padded(model, smollm2_tokenizer, smollm2_gguf):
    """Two prompts of different lengths in one batch (left padding): one matcher per row,
    each output valid; a row that ends first is held to EOS/pad."""
    schema = load_schema("answer")
    width = gguf_logits_width(str(smollm2_gguf))
    tok = smollm2_tokenizer
    old_side = tok.padding_side
    tok.padding_side = "left"
    try:
        example = json.dumps(load_instances("answer")[0], separators=(",", ":"))
        texts = [
            tok.apply_chat_template(
                [{"role": "system", "content": f"Reply with one line of JSON in this format: {example}"},
                 {"role": "user", "content": q}],
                add_generation_prompt=True,
                tokenize=False,
            )
            for q in ("What is 2 plus 2?", "What is 5 plus 1?")
        ]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    finally:
        tok.padding_side = old_side
    proc = StencilLogitsProcessor.from_json_schema(tok, schema, vocab_size=width)
    out = generate(model, tok, enc, proc, BATCH_BUDGET)
    assert len(proc.matchers) == 2
    for row in range(2):
        new = out[row, enc["input_ids"].shape[1]:].tolist()
        check_row(proc, row, tok, schema, f"answer row {row}", BATCH_BUDGET, new)


def test_processor_refuses_reordered_rows(smollm2_tokenizer, smollm2_vocab):
    """Beam search reorders rows between steps: the processor must notice and raise."""
    g = stencil.Compiler(smollm2_vocab).compile_regex("[a-z]{1,20}")
    proc = StencilLogitsProcessor(g)
    letters = [t for t in range(smollm2_vocab.size) if smollm2_vocab.token_bytes(t) in (b"a", b"b")]
    a, b = letters[:2]
    ids = torch.tensor([[5, 6], [5, 6]])
    scores = torch.zeros((2, smollm2_vocab.size))
    proc(ids, scores)
    proc(torch.cat([ids, torch.tensor([[a], [b]])], dim=1), scores)
    swapped = torch.cat([ids, torch.tensor([[b], [a]]), torch.tensor([[a], [a]])], dim=1)
    with pytest.raises(ValueError, match="num_beams"):
        proc(swapped, scores)
    with pytest.raises(ValueError, match="rows"):
        proc(torch.zeros((3, 4), dtype=torch.long), torch.zeros((3, smollm2_vocab.size)))
    proc.reset()
    out = proc(ids, scores.clone())
    allowed = torch.isfinite(out[0]).nonzero().flatten().tolist()
    assert allowed == sorted(stencil.Matcher(g).next_token_mask())


def test_terminated_rows_allow_only_end_tokens(smollm2_vocab):
    g = stencil.Compiler(smollm2_vocab).compile_regex("a")
    proc = StencilLogitsProcessor(g, pad_token_id=7)
    a = next(t for t in range(smollm2_vocab.size) if smollm2_vocab.token_bytes(t) == b"a")
    eos = smollm2_vocab.eos_ids[0]
    scores = torch.zeros((1, smollm2_vocab.size + 64))  # wider than the vocabulary
    proc(torch.tensor([[1, 2]]), scores)
    proc(torch.tensor([[1, 2, a]]), scores)
    out = proc(torch.tensor([[1, 2, a, eos]]), scores)
    assert proc.matchers[0].is_terminated()
    allowed = torch.isfinite(out[0]).nonzero().flatten().tolist()
    assert allowed == sorted(set(smollm2_vocab.eos_ids) | {7})
