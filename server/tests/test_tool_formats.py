"""Tool calls in each model family's format through the server (issue 47), with the
official client: one definition constrains the reply, reads it into `tool_calls`, and
streams it.

SmolLM2 has no tool format of its own: each format is asked for by the `tool_format`
field, and the prompt shows it (stencil-tools renders the format's example into the
system prompt). Under `tool_choice: "required"` every format must give calls that name a
tool of the list and whose arguments validate against its schema, by construction; the
stream of the same request must put together to the same calls.
"""

import json

import jsonschema
import openai
import pytest

from test_server import PARAMETERS, TOOLS, bad, user

FORMATS = ["hermes", "qwen3-coder", "llama3", "llama3-python-tag", "mistral", "mistral-args", "harmony",
           "deepseek-v3.1", "envelope"]
WEATHER = user("What is the weather in Paris?")


def create(client, **kwargs):
    kwargs.setdefault("model", "m")
    kwargs.setdefault("messages", WEATHER)
    kwargs.setdefault("tools", TOOLS)
    kwargs.setdefault("temperature", 0)
    kwargs.setdefault("max_tokens", 120)
    return client.chat.completions.create(**kwargs)


def streamed(client, **kwargs):
    """The stream's deltas put together: (content, reasoning, calls, finish_reason)."""
    content, reasoning, calls, finish = "", "", {}, None
    for chunk in create(client, stream=True, **kwargs):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            reasoning += getattr(choice.delta, "reasoning_content", None) or ""
            for d in choice.delta.tool_calls or []:
                c = calls.setdefault(d.index, {"name": "", "arguments": ""})
                c["name"] += d.function.name or ""
                c["arguments"] += d.function.arguments or ""
            finish = choice.finish_reason or finish
    return content, reasoning, [calls[i] for i in sorted(calls)], finish


def whole(message):
    calls = [{"name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls or []]
    return message.content or "", getattr(message, "reasoning_content", None) or "", calls


def valid(call):
    jsonschema.validate(json.loads(call["arguments"]), PARAMETERS[call["name"]])


@pytest.mark.parametrize("fmt", FORMATS)
def test_required_calls_are_valid_in_every_format_streamed_or_not(client, fmt):
    kwargs = dict(tool_choice="required", parallel_tool_calls=False, extra_body={"tool_format": fmt})
    r = create(client, **kwargs)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", (fmt, choice)
    calls = whole(choice.message)[2]
    assert len(calls) == 1, (fmt, calls)
    valid(calls[0])
    assert choice.message.tool_calls[0].id.isalnum() and len(choice.message.tool_calls[0].id) == 9
    content, reasoning, stream_calls, finish = streamed(client, **kwargs)
    assert (content, reasoning, stream_calls, finish) == (*whole(choice.message), "tool_calls"), fmt


def test_a_named_tool_and_parallel_calls(client):
    r = create(client, tool_choice={"type": "function", "function": {"name": "get_time"}},
               extra_body={"tool_format": "qwen3-coder"})
    calls = whole(r.choices[0].message)[2]
    assert calls and all(c["name"] == "get_time" for c in calls), calls
    for c in calls:
        valid(c)


def test_reasoning_is_apart_and_within_its_budget(client):
    kwargs = dict(tool_choice="required", parallel_tool_calls=False,
                  extra_body={"tool_format": "hermes", "reasoning": "required", "reasoning_budget": 12})
    r = create(client, **kwargs)
    message = r.choices[0].message
    content, reasoning, calls = whole(message)
    assert reasoning, message
    assert "<think>" not in reasoning and "</think>" not in reasoning and "<tool_call>" not in reasoning
    assert len(calls) == 1 and not content, message
    valid(calls[0])
    # The budget bounds the reasoning's tokens: the whole reply is the reasoning (at most 12
    # tokens, the markers around it a few more) and one call.
    assert r.usage.completion_tokens <= 12 + 8 + 60, r.usage
    assert streamed(client, **kwargs) == (content, reasoning, calls, "tool_calls")


def test_a_conversation_with_calls_and_results_renders_in_the_format(client):
    messages = WEATHER + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "abcDEF123", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "abcDEF123", "content": json.dumps({"temp_c": 21})},
    ]
    for fmt in ("mistral-args", "qwen3-coder"):
        r = create(client, messages=messages, tool_choice="none", max_tokens=16, extra_body={"tool_format": fmt})
        assert r.choices[0].message.content and r.choices[0].message.tool_calls is None


def test_tool_format_errors_are_400s(client):
    body = bad(client, tools=TOOLS, extra_body={"tool_format": "klingon"})
    assert body["param"] == "tool_format" and "hermes" in body["message"], body
    spaced = [{"type": "function", "function": {"name": "get weather", "parameters": {"type": "object"}}}]
    body = bad(client, tools=spaced, extra_body={"tool_format": "qwen3-coder"})
    assert body["param"] == "tools" and "get weather" in body["message"], body
    body = bad(client, tools=TOOLS, extra_body={"reasoning": "sometimes"})
    assert body["param"] == "reasoning", body


CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
        "additionalProperties": False}


def test_reasoning_then_a_schema_without_tools_whole_and_streamed(client):
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY, "strict": True}}
    kwargs = dict(tools=openai.NOT_GIVEN, messages=user("Where is the Eiffel Tower? Think, then answer in JSON."),
                  response_format=fmt, max_tokens=80, extra_body={"reasoning": "required", "reasoning_budget": 12})
    r = create(client, **kwargs)
    message = r.choices[0].message
    assert r.choices[0].finish_reason == "stop", r
    assert message.reasoning_content and "</think>" not in message.reasoning_content, message
    jsonschema.validate(json.loads(message.content), CITY)
    assert not message.tool_calls
    content, reasoning, calls, finish = streamed(client, **kwargs)
    assert (content, reasoning, calls, finish) == (message.content, message.reasoning_content, [], "stop")


def test_tool_choice_none_keeps_the_response_format(client):
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY, "strict": True}}
    r = create(client, tool_choice="none", response_format=fmt, max_tokens=60,
               messages=user("Where is the Eiffel Tower? Answer in JSON."))
    assert r.choices[0].finish_reason == "stop" and not r.choices[0].message.tool_calls
    jsonschema.validate(json.loads(r.choices[0].message.content), CITY)


def test_auto_gives_text_then_a_call_as_content_and_tool_calls(client):
    # One earlier turn shows the model text before a call; with Mistral's
    # [TOOL_CALLS]NAME[ARGS]{…} SmolLM2 then writes a sentence and calls (greedy).
    messages = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": "Let me check the weather in Paris.", "tool_calls": [
            {"id": "abcDEF123", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "abcDEF123", "content": json.dumps({"temp_c": 21})},
        {"role": "assistant", "content": "It is 21 degrees in Paris."},
        {"role": "user", "content": "What is the weather in Oslo?"},
    ]
    kwargs = dict(messages=messages, tool_choice="auto", extra_body={"tool_format": "mistral-args"})
    r = create(client, **kwargs)
    message = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls", r
    assert message.content and "Oslo" in message.content and "[TOOL_CALLS]" not in message.content, message
    content, reasoning, calls = whole(message)
    assert len(calls) == 1 and calls[0]["name"] == "get_weather", calls
    valid(calls[0])
    assert streamed(client, **kwargs) == (content, reasoning, calls, "tool_calls")
