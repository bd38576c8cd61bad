"""`response_format: {"type": "structural_tag", …}` (issue 46), with the official client.

The tag is a reasoning segment, then a JSON answer under a schema: the reply must be exactly
`<think>` text `</think>` and JSON that validates, whatever the model (SmolLM2) writes; a
reasoning budget (`any_text`'s `max_tokens`) is counted in model tokens and the end of the
reasoning is forced once it is spent; a bad tag is a 400 naming the field.
"""

import json

import jsonschema
import openai
import pytest

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                           "sunny": {"type": "boolean"}},
          "required": ["city", "sunny"], "additionalProperties": False}
MESSAGES = [{"role": "user", "content": "Think briefly, then answer in JSON: is it sunny in Oslo?"}]


def tag(max_tokens=None):
    text = {"type": "any_text"}
    if max_tokens is not None:
        text["max_tokens"] = max_tokens
    return {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<think>", "content": text, "end": "</think>"},
        {"type": "json_schema", "json_schema": SCHEMA}]}}


def split(text):
    """(reasoning, answer) of a reply the tag allows; fails on any other text."""
    assert text.startswith("<think>"), text
    reasoning, sep, answer = text[len("<think>"):].partition("</think>")
    assert sep, text
    return reasoning, answer


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_reply_is_reasoning_then_valid_json(client, seed):
    r = client.chat.completions.create(model="m", messages=MESSAGES, response_format=tag(), seed=seed,
                                       temperature=1.0, max_tokens=200)
    choice = r.choices[0]
    if choice.finish_reason == "length":
        # Cut: still a prefix of what the tag allows.
        assert choice.message.content.startswith("<think>"[:len(choice.message.content)])
        return
    reasoning, answer = split(choice.message.content)
    jsonschema.validate(json.loads(answer), SCHEMA)


def reasoning_tokens(choice):
    """The tokens that start after `<think>` and before `</think>` (or the end)."""
    tokens = [t.token for t in choice.logprobs.content]
    text = "".join(tokens)
    end = text.find("</think>", len("<think>"))
    end = len(text) if end < 0 else end
    starts = [sum(map(len, tokens[:i])) for i in range(len(tokens))]
    return sum(1 for s in starts if len("<think>") <= s < end)


def test_the_reasoning_budget_forces_the_close(client):
    budget = 4
    ask = dict(model="m", messages=MESSAGES, seed=5, temperature=1.0, max_tokens=60, logprobs=True)
    free = client.chat.completions.create(response_format=tag(), **ask).choices[0]
    # The test has power: unbounded, this seed thinks past the budget (here, to max_tokens).
    assert reasoning_tokens(free) > budget, free.message.content
    bounded = client.chat.completions.create(response_format=tag(budget), **ask).choices[0]
    _, answer = split(bounded.message.content)
    jsonschema.validate(json.loads(answer), SCHEMA)
    assert reasoning_tokens(bounded) <= budget, bounded.message.content


def test_a_bad_tag_is_a_400_naming_the_field(client):
    bad = {"type": "structural_tag", "format": {"type": "sequence", "elements": [{"type": "nonsense"}]}}
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=MESSAGES, response_format=bad, max_tokens=8)
    body = e.value.body
    assert body["param"] == "response_format" and body["code"] == "invalid_structural_tag", body
    assert "nonsense" in body["message"], body
