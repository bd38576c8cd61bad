"""A chat template that thinks (issue 47): with `--chat-template-file` DeepSeek V3.1's
template (fixtures/templates/), whose generation prompt opens `<think>` when
`chat_template_kwargs` asks for thinking and closes it otherwise, a request without tools
gets its reasoning apart as `reasoning_content`, and a `response_format` applies after it.
SmolLM2 has no thinking of its own: what is checked is where the server puts each part."""

import json
import pathlib

import jsonschema
import openai
import pytest

from helpers import own_server

TEMPLATE = pathlib.Path(__file__).resolve().parents[2] / "fixtures/templates/deepseek-ai-DeepSeek-V3.1.jinja"
CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
        "additionalProperties": False}
ASK = [{"role": "user", "content": "Where is the Eiffel Tower?"}]
THINK = {"chat_template_kwargs": {"thinking": True}}


@pytest.fixture(scope="module")
def client():
    with own_server("--chat-template-file", str(TEMPLATE)) as url:
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="x", timeout=60, max_retries=0)


def ask(client, **kwargs):
    return client.chat.completions.create(model="m", messages=ASK, temperature=0, **kwargs)


def test_the_reasoning_the_template_opens_comes_apart(client):
    r = ask(client, max_tokens=30, extra_body=THINK)
    message = r.choices[0].message
    # The prompt opened the reasoning: everything until `</think>` is reasoning (here cut).
    assert message.reasoning_content and "<think>" not in message.reasoning_content, message
    assert "</think>" not in (message.content or "") and "</think>" not in message.reasoning_content
    # Not asked to think: the template closes the reasoning, the reply is content.
    r = ask(client, max_tokens=16)
    assert r.choices[0].message.content and not getattr(r.choices[0].message, "reasoning_content", None)


def test_a_schema_applies_after_the_reasoning_and_streams_alike(client):
    kwargs = dict(max_tokens=60, extra_body={**THINK, "reasoning_budget": 8},
                  response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": CITY, "strict": True}})
    r = ask(client, **kwargs)
    message = r.choices[0].message
    assert r.choices[0].finish_reason == "stop" and message.reasoning_content, r
    jsonschema.validate(json.loads(message.content), CITY)
    content, reasoning = "", ""
    for chunk in ask(client, stream=True, **kwargs):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            reasoning += getattr(choice.delta, "reasoning_content", None) or ""
    assert (content, reasoning) == (message.content, message.reasoning_content)
