"""The Responses API (`POST /v1/responses`, issue 47) with the official client: text,
`text.format` under a schema, function tools in a model family's format, reasoning, and
streams whose events put together to the whole Response.
"""

import json

import jsonschema
import openai
import pytest

from test_server import PARAMETERS

TOOLS = [{"type": "function", "name": "get_weather", "description": "Current weather in a city",
          "parameters": PARAMETERS["get_weather"]},
         {"type": "function", "name": "get_time", "description": "Current time in a time zone",
          "parameters": PARAMETERS["get_time"]}]
CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                         "country": {"type": "string", "maxLength": 20}},
        "required": ["city", "country"], "additionalProperties": False}


def create(client, **kwargs):
    kwargs.setdefault("model", "m")
    kwargs.setdefault("temperature", 0)
    kwargs.setdefault("max_output_tokens", 80)
    return client.responses.create(**kwargs)


def events_of(client, **kwargs):
    return list(create(client, stream=True, **kwargs))


def calls_of(response):
    return [(item.name, item.arguments, item.call_id) for item in response.output if item.type == "function_call"]


def test_text_and_usage(client):
    r = create(client, input="Name a colour.", instructions="Answer in one word.", max_output_tokens=8)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.status in ("completed", "incomplete") and r.output_text
    assert r.usage.output_tokens <= 8 and r.usage.input_tokens > 0
    assert [item.type for item in r.output] == ["message"]


def test_text_format_json_schema_is_enforced(client):
    fmt = {"format": {"type": "json_schema", "name": "city", "schema": CITY, "strict": True}}
    r = create(client, input="Where is the Eiffel Tower? Answer in JSON.", text=fmt, max_output_tokens=60)
    assert r.status == "completed", r
    jsonschema.validate(json.loads(r.output_text), CITY)
    cut = create(client, input="Where is the Eiffel Tower? Answer in JSON.", text=fmt, max_output_tokens=3)
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"


def test_function_calls_whole_streamed_and_as_in_chat(client):
    kwargs = dict(input="What is the weather in Paris?", tools=TOOLS, tool_choice="required",
                  parallel_tool_calls=False, extra_body={"tool_format": "hermes"})
    r = create(client, **kwargs)
    calls = calls_of(r)
    assert r.status == "completed" and len(calls) == 1, r
    name, arguments, call_id = calls[0]
    jsonschema.validate(json.loads(arguments), PARAMETERS[name])
    assert call_id.isalnum() and len(call_id) == 9
    # The chat route reads the same reply the same way.
    chat = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "What is the weather in Paris?"}], temperature=0,
        max_tokens=80, tools=[{"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters")}}
                              for t in TOOLS],
        tool_choice="required", parallel_tool_calls=False, extra_body={"tool_format": "hermes"})
    c = chat.choices[0].message.tool_calls[0].function
    assert (c.name, c.arguments) == (name, arguments)
    events = events_of(client, **kwargs)
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed", kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert deltas == arguments and done[0].arguments == arguments
    assert kinds.count("response.function_call_arguments.delta") >= 3, kinds
    final = events[-1].response
    assert [(n, a) for n, a, _ in calls_of(final)] == [(name, arguments)]


def test_streamed_text_puts_together_to_the_whole(client):
    kwargs = dict(input="Write a sentence about the sea.", max_output_tokens=24)
    whole = create(client, **kwargs).output_text
    events = events_of(client, **kwargs)
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole
    assert [e.text for e in events if e.type == "response.output_text.done"] == [whole]
    assert events[-1].type == "response.incomplete" or events[-1].type == "response.completed"
    assert events[-1].response.output_text == whole


def test_reasoning_comes_as_its_own_item(client):
    kwargs = dict(input="What is the weather in Oslo?", tools=TOOLS, tool_choice="required",
                  parallel_tool_calls=False, reasoning={"effort": "low"},
                  extra_body={"tool_format": "hermes", "reasoning_budget": 10})
    r = create(client, **kwargs)
    kinds = [item.type for item in r.output]
    assert kinds == ["reasoning", "function_call"], r.output
    text = r.output[0].content[0].text
    assert text and "</think>" not in text
    events = events_of(client, **kwargs)
    streamed = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert streamed == text


def test_function_call_outputs_continue_the_conversation(client):
    items = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"type": "function_call", "call_id": "abcDEF123", "name": "get_weather",
         "arguments": json.dumps({"city": "Paris"})},
        {"type": "function_call_output", "call_id": "abcDEF123", "output": json.dumps({"temp_c": 21})},
    ]
    r = create(client, input=items, tools=TOOLS, tool_choice="none", max_output_tokens=16)
    assert r.output_text and not calls_of(r)


@pytest.mark.parametrize("kwargs, param", [
    (dict(store=True), "store"),
    (dict(previous_response_id="resp_1"), "previous_response_id"),
    (dict(tools=[{"type": "web_search"}]), "tools[0].type"),
    (dict(text={"format": {"type": "xml"}}), "text.format.type"),
    (dict(max_output_tokens=100000), "max_output_tokens"),
    (dict(extra_body={"frobnicate": 1}), "frobnicate"),
])
def test_what_the_server_does_not_do_is_a_400_naming_the_field(client, kwargs, param):
    kwargs.setdefault("input", "Hi")
    with pytest.raises(openai.BadRequestError) as e:
        create(client, **kwargs)
    assert e.value.body["param"] == param, e.value.body
