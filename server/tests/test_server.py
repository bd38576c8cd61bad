"""Black-box tests of `stencil serve` through the official `openai` client.

The server runs SmolLM2-135M-Instruct with --parallel 2 and --ctx-size 4096 (see
scripts/test-server.sh). Outputs are checked with Python's own `jsonschema` and `re`, not
with anything of Stencil's. Requests are few, short (max_tokens) and each has a timeout.
"""

import concurrent.futures
import json
import math
import os
import re
import socket
import subprocess
import tempfile
import time

import jsonschema
import openai
import pytest

from helpers import http, metric, own_server

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
PERSON_PROMPT = "Ada Lovelace was 36. Give her name and age as JSON."


def user(text):
    return [{"role": "user", "content": text}]


def schema_format(schema, strict=True, name="answer"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": strict}}


# First, while the server's KV cache is fresh: the same greedy decode as `stencil generate`.
def test_greedy_output_equals_stencil_generate(client):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(PERSON, f)
        schema_path = f.name
    try:
        out = subprocess.run(
            [
                os.environ["STENCIL_BIN"], "generate", "--model", os.environ["STENCIL_SERVER_MODEL"],
                "--schema", schema_path, "--prompt", PERSON_PROMPT, "--max-tokens", "48",
                "--threads", "1", "--ctx-size", "4096", "--quiet",
            ],
            capture_output=True, text=True, timeout=120,
        )
    finally:
        os.unlink(schema_path)
    assert out.returncode == 0, out.stderr
    expected = out.stdout.removesuffix("\n")
    r = client.chat.completions.create(
        model="any", messages=user(PERSON_PROMPT), temperature=0, max_tokens=48,
        response_format=schema_format(PERSON),
    )
    assert r.choices[0].message.content == expected
    jsonschema.validate(json.loads(expected), PERSON)


def test_health_and_models(client, url):
    status, _, body = http(url, "/health")
    assert (status, json.loads(body)) == (200, {"status": "ok"})
    models = client.models.list()
    assert [m.id for m in models.data] == ["smollm2-135m-instruct.q4_1"]
    assert models.data[0].owned_by == "stencil"


def test_same_seed_same_text(client):
    kwargs = dict(model="m", messages=user("Write a short line about the sea."), temperature=0.9,
                  top_p=0.95, seed=1234, max_tokens=16)
    a = client.chat.completions.create(**kwargs)
    b = client.chat.completions.create(**kwargs)
    assert a.choices[0].message.content == b.choices[0].message.content
    assert a.choices[0].message.content
    assert a.usage.completion_tokens == b.usage.completion_tokens > 0
    assert a.usage.total_tokens == a.usage.prompt_tokens + a.usage.completion_tokens


def test_json_object(client):
    r = client.chat.completions.create(
        model="m", messages=user("Describe a cat as a JSON object."), temperature=0, max_tokens=64,
        response_format={"type": "json_object"},
    )
    choice = r.choices[0]
    if choice.finish_reason == "stop":
        assert isinstance(json.loads(choice.message.content), dict)
    else:
        assert choice.finish_reason == "length"
        assert choice.message.content.lstrip().startswith("{")


def test_json_schema_strict(client):
    r = client.chat.completions.create(
        model="m", messages=user(PERSON_PROMPT), temperature=0.7, seed=3, max_tokens=48,
        response_format=schema_format(PERSON),
    )
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)


def test_json_schema_lenient_validates_after_the_fact(client):
    # Unique integers are beyond a token mask: strict refuses the schema, lenient leaves the
    # keyword to validation and says when the output fails it.
    schema = {"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "integer"},
                                                       "uniqueItems": True, "minItems": 3, "maxItems": 4}},
              "required": ["ids"], "additionalProperties": False}
    r = client.chat.completions.create(
        model="m", messages=user("Give three ids as JSON."), temperature=0, max_tokens=40,
        response_format=schema_format(schema, strict=False),
    )
    choice = r.choices[0]
    assert choice.finish_reason == "stop"
    instance = json.loads(choice.message.content)
    valid = jsonschema.Draft202012Validator(schema).is_valid(instance)
    errors = (choice.model_extra or {}).get("validation_errors", [])
    assert valid == (not errors), (instance, errors)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="m", messages=user("Give ids."), max_tokens=8, response_format=schema_format(schema, strict=True),
        )
    message = e.value.body["message"]
    assert "uniqueItems" in message and "#/properties/ids" in message, message
    assert e.value.body["param"] == "response_format.json_schema.schema"


def test_json_schema_default_schema_is_any_json(client):
    r = client.chat.completions.create(
        model="m", messages=user("Say hi in JSON."), temperature=0, max_tokens=32,
        response_format={"type": "json_schema", "json_schema": {"name": "anything", "strict": True}},
    )
    if r.choices[0].finish_reason == "stop":
        json.loads(r.choices[0].message.content)


def test_grammar_extension(client):
    r = client.chat.completions.create(
        model="m", messages=user("Is water wet? Answer yes or no."), temperature=0.8, seed=5, max_tokens=8,
        extra_body={"grammar": 'root ::= ("yes" | "no") "."'},
    )
    assert r.choices[0].message.content in ("yes.", "no.")
    assert r.choices[0].finish_reason == "stop"


def test_regex_extension(client):
    r = client.chat.completions.create(
        model="m", messages=user("Give a phone number."), temperature=0.8, seed=9, max_tokens=16,
        extra_body={"regex": "[0-9]{3}-[0-9]{4}"},
    )
    assert re.fullmatch("[0-9]{3}-[0-9]{4}", r.choices[0].message.content)


def test_tiny_max_tokens_is_length(client):
    r = client.chat.completions.create(
        model="m", messages=user("Tell me a long story about dragons."), temperature=0, max_tokens=3,
    )
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 3
    r = client.chat.completions.create(
        model="m", messages=user(PERSON_PROMPT), temperature=0, max_completion_tokens=4,
        response_format=schema_format(PERSON),
    )
    assert r.choices[0].finish_reason == "length"


def test_stop_strings(client):
    r = client.chat.completions.create(
        model="m", messages=user("Count."), temperature=0, max_tokens=32,
        extra_body={"regex": "1, 2, 3, 4, 5"}, stop=[", 3"],
    )
    assert r.choices[0].message.content == "1, 2"
    assert r.choices[0].finish_reason == "stop"


def test_streaming_reassembles_to_the_whole_message(client):
    kwargs = dict(model="m", messages=user(PERSON_PROMPT), temperature=0, max_tokens=48,
                  response_format=schema_format(PERSON))
    whole = client.chat.completions.create(**kwargs)
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs))
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert len({c.id for c in chunks}) == 1
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) >= 2


def test_stream_ends_with_done(url, key):
    status, headers, body = http(url, "/v1/chat/completions", key=key, body={
        "model": "m", "messages": user("Hi"), "max_tokens": 4, "temperature": 0, "stream": True,
    })
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = [line[len("data: "):] for line in body.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2])["choices"][0]["finish_reason"] == "length"


def test_concurrent_requests_with_different_schemas(client):
    # More requests than the server's 2 sequences, each with its own schema.
    schemas = [
        {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16}}, "required": ["city"],
         "additionalProperties": False},
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["n"],
         "additionalProperties": False},
        {"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 3},
        {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}}, "required": ["color"],
         "additionalProperties": False},
        {"type": "string", "pattern": "^[A-Z][a-z]{2,8}$"},
    ]

    def ask(i):
        return client.chat.completions.create(
            model="m", messages=user(f"Answer {i} in JSON."), temperature=0.8, seed=i, max_tokens=40,
            response_format=schema_format(schemas[i], name=f"s{i}"),
        )

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(len(schemas)) as pool:
        results = list(pool.map(ask, range(len(schemas))))
    assert time.monotonic() - started < 90
    for schema, r in zip(schemas, results):
        assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
        jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_n_completions(client):
    r = client.chat.completions.create(
        model="m", messages=user(PERSON_PROMPT), temperature=1.0, seed=11, max_tokens=48, n=2,
        response_format=schema_format(PERSON),
    )
    assert [c.index for c in r.choices] == [0, 1]
    for c in r.choices:
        jsonschema.validate(json.loads(c.message.content), PERSON)


def test_logprobs(client):
    r = client.chat.completions.create(
        model="m", messages=user(PERSON_PROMPT), temperature=0, max_tokens=48, logprobs=True,
        response_format=schema_format(PERSON),
    )
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    assert "".join(t.token for t in content) == r.choices[0].message.content
    assert all(t.logprob <= 0 for t in content)
    # Some tokens are forced by the grammar ({"name": ...): probability 1.
    assert any(t.logprob == 0 for t in content)


def test_top_logprobs(client):
    # Greedy: the chosen token is always the most likely alternative, with its log-probability.
    r = client.chat.completions.create(
        model="m", messages=user(PERSON_PROMPT), temperature=0, max_tokens=32, logprobs=True, top_logprobs=3,
        response_format=schema_format(PERSON),
    )
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    forced = 0
    for t in content:
        alts = t.top_logprobs
        assert 1 <= len(alts) <= 3
        assert [a.logprob for a in alts] == sorted((a.logprob for a in alts), reverse=True)
        assert sum(math.exp(a.logprob) for a in alts) <= 1 + 1e-4
        assert alts[0].token == t.token and abs(alts[0].logprob - t.logprob) < 1e-4, (t, alts)
        if t.logprob == 0:
            forced += 1
            assert len(alts) == 1, "a forced token's only alternative is itself"
    assert forced > 0 and forced < len(content)
    # Sampled: the chosen token is one of the allowed ones, never likelier than the best.
    r = client.chat.completions.create(
        model="m", messages=user(PERSON_PROMPT), temperature=1.0, seed=5, max_tokens=24, logprobs=True,
        top_logprobs=5, response_format=schema_format(PERSON),
    )
    for t in r.choices[0].logprobs.content:
        assert t.logprob <= t.top_logprobs[0].logprob + 1e-4
    # Legacy completions: `logprobs: n` gives `{text: logprob}` per token.
    r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=6, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.top_logprobs) == len(lp.tokens) == 6
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert 1 <= len(top) <= 2 and max(top.values()) == pytest.approx(logprob, abs=1e-4)
        assert token in top
    with pytest.raises(openai.BadRequestError, match="top_logprobs"):
        client.chat.completions.create(model="m", messages=user("x"), max_tokens=2, logprobs=True, top_logprobs=21)


def test_completions_endpoint(client):
    r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=5, temperature=0)
    assert r.choices[0].finish_reason == "length" and r.choices[0].text
    assert r.usage.completion_tokens == 5
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="m", prompt="Once upon a time", max_tokens=5, temperature=0, stream=True) if c.choices)
    assert streamed == r.choices[0].text
    r = client.completions.create(model="m", prompt="The answer is ", max_tokens=8, temperature=0,
                                  extra_body={"regex": "[0-9]+"})
    assert re.fullmatch("[0-9]+", r.choices[0].text)


LANDMARK = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 40}, "city": {"type": "string", "maxLength": 30},
                   "year": {"type": "integer"}, "designer": {"type": "string", "maxLength": 40}},
    "required": ["name", "city", "year", "designer"],
    "additionalProperties": False,
}
LANDMARK_PROMPT = ("The Eiffel Tower stands in Paris. It was completed in 1889 and designed by Gustave Eiffel's "
                   "company. Give its name, city, year and designer as JSON.")


@pytest.fixture(scope="module")
def whole_drafts():
    """A server whose prompt-lookup drafts are verified whole (`--draft-cut off`): what is
    drafted then depends on the text alone, not on the pass times the cut policy measures
    (on a busy machine, it may rightly decide that no draft pays)."""
    flags = ("--parallel", "2", "--ctx-size", "4096", "--speculate", "prompt-lookup", "--draft-cut", "off")
    with own_server(*flags) as url:
        yield url


def test_prompt_lookup_keeps_the_greedy_output(client, whole_drafts):
    url = whole_drafts
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", timeout=60, max_retries=0)
    args = dict(model="m", messages=user(LANDMARK_PROMPT), temperature=0, max_tokens=80,
                response_format=schema_format(LANDMARK))
    # Twice without: the second from the cached prompt, as the speculative ones.
    client.chat.completions.create(**args, extra_body={"speculation": "none"})
    plain = client.chat.completions.create(**args, extra_body={"speculation": "none"})
    assert plain.usage.completion_tokens_details is None
    drafted = metric(url, "stencil_draft_tokens_total")
    accepted = metric(url, "stencil_draft_tokens_accepted_total")
    fast = client.chat.completions.create(**args, extra_body={"speculation": "prompt-lookup"})
    text = plain.choices[0].message.content
    assert fast.choices[0].message.content == text
    jsonschema.validate(json.loads(text), LANDMARK)
    details = fast.usage.completion_tokens_details
    assert details.accepted_prediction_tokens > 0, details
    assert fast.usage.completion_tokens == plain.usage.completion_tokens
    assert metric(url, "stencil_draft_tokens_accepted_total") == accepted + details.accepted_prediction_tokens
    assert metric(url, "stencil_draft_tokens_total") == \
        drafted + details.accepted_prediction_tokens + details.rejected_prediction_tokens
    chunks = list(client.chat.completions.create(**args, stream=True, stream_options={"include_usage": True},
                                                 extra_body={"speculation": "prompt-lookup"}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    assert chunks[-1].usage.completion_tokens_details.accepted_prediction_tokens > 0
    # This server has no draft model.
    body = bad(client, extra_body={"speculation": "draft-model"})
    assert body["param"] == "speculation" and "--draft-model" in body["message"], body
    body = bad(client, extra_body={"speculation": "ngram"})
    assert body["param"] == "speculation", body


def test_a_repeated_schema_is_compiled_once(client, url):
    schema = {"type": "object", "properties": {"unique_field_for_cache": {"type": "boolean"}},
              "required": ["unique_field_for_cache"], "additionalProperties": False}
    misses = metric(url, "stencil_grammar_cache_misses_total")
    hits = metric(url, "stencil_grammar_cache_hits_total")
    for _ in range(2):
        client.chat.completions.create(model="m", messages=user("Yes?"), temperature=0, max_tokens=16,
                                       response_format=schema_format(schema))
    assert metric(url, "stencil_grammar_cache_misses_total") == misses + 1
    assert metric(url, "stencil_grammar_cache_hits_total") == hits + 1


def bad(client, **kwargs):
    kwargs.setdefault("model", "m")
    kwargs.setdefault("messages", user("Hi"))
    kwargs.setdefault("max_tokens", 4)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(**kwargs)
    assert e.value.status_code == 400
    return e.value.body


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                                         "unit": {"enum": ["c", "f"]}},
                       "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Current time in a time zone",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string", "maxLength": 30}},
                       "required": ["tz"], "additionalProperties": False}}},
]
PARAMETERS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
WEATHER = user("What is the weather in Paris?")


def check_calls(message, names=PARAMETERS, alone=True):
    """Valid calls of `names`; `alone`: nothing else (one call, `parallel_tool_calls: false`)."""
    assert message.tool_calls and (message.content is None or not alone), message
    for call in message.tool_calls:
        # 9 letters and digits: the ids Mistral's templates want, given in every format.
        assert call.type == "function" and call.id.isalnum() and len(call.id) == 9
        assert call.function.name in names
        jsonschema.validate(json.loads(call.function.arguments), PARAMETERS[call.function.name])


def test_tool_choice_required_and_named(client):
    r = client.chat.completions.create(model="m", messages=WEATHER, tools=TOOLS, tool_choice="required",
                                       parallel_tool_calls=False, temperature=0, max_tokens=80)
    assert r.choices[0].finish_reason == "tool_calls"
    check_calls(r.choices[0].message)
    assert len(r.choices[0].message.tool_calls) == 1
    r = client.chat.completions.create(model="m", messages=WEATHER, tools=TOOLS, parallel_tool_calls=False,
                                       tool_choice={"type": "function", "function": {"name": "get_time"}},
                                       temperature=0.7, seed=2, max_tokens=80)
    assert r.choices[0].finish_reason == "tool_calls"
    check_calls(r.choices[0].message, names=["get_time"])
    r = client.chat.completions.create(model="m", messages=WEATHER, tools=TOOLS, tool_choice="required",
                                       temperature=0, max_tokens=200)
    assert r.choices[0].finish_reason == "tool_calls"
    # Parallel calls: text may come between and after them (not before: `required`).
    check_calls(r.choices[0].message, alone=False)
    assert r.choices[0].message.tool_calls


def test_tool_choice_auto_and_none(client):
    r = client.chat.completions.create(model="m", messages=WEATHER, tools=TOOLS, temperature=0, max_tokens=80)
    message = r.choices[0].message
    if message.tool_calls:
        assert r.choices[0].finish_reason == "tool_calls"
        check_calls(message, alone=False)
    else:
        assert message.content and r.choices[0].finish_reason in ("stop", "length")
    r = client.chat.completions.create(model="m", messages=WEATHER, tools=TOOLS, tool_choice="none",
                                       temperature=0, max_tokens=16)
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content


def test_streamed_tool_calls_reassemble(client):
    kwargs = dict(model="m", messages=WEATHER, tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
                  temperature=0, max_tokens=80)
    # Both compared requests find the prompt cached. A cold prompt and a cached one are not
    # computed alike (the prefill's batch, reused KV cells), and on the native build a
    # near-tie after `{` (a space or a newline) went one way for each.
    client.chat.completions.create(**kwargs)
    whole = client.chat.completions.create(**kwargs).choices[0].message
    calls, pieces = {}, {}
    finish = None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for choice in chunk.choices:
            for d in choice.delta.tool_calls or []:
                if d.index not in calls:
                    # A call's first delta names it; the next ones carry more arguments.
                    assert d.id and d.type == "function" and d.function.name, d
                c = calls.setdefault(d.index, {"name": "", "arguments": ""})
                c["name"] += d.function.name or ""
                c["arguments"] += d.function.arguments or ""
                pieces[d.index] = pieces.get(d.index, 0) + 1
            finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    assert [calls[i] for i in sorted(calls)] == [
        {"name": c.function.name, "arguments": c.function.arguments} for c in whole.tool_calls]
    # The arguments stream as they are decoded, not in one piece at the end.
    assert max(pieces.values()) >= 3, pieces


def test_tool_results_in_the_conversation(client):
    messages = WEATHER + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"temp_c": 21, "sky": "clear"})},
    ]
    r = client.chat.completions.create(model="m", messages=messages, tools=TOOLS, tool_choice="none",
                                       temperature=0, max_tokens=24)
    assert r.choices[0].message.content
    r = client.chat.completions.create(model="m", messages=messages, tools=TOOLS, temperature=0, max_tokens=80)
    if r.choices[0].message.tool_calls:
        check_calls(r.choices[0].message, alone=False)


def test_bad_inputs_are_400s_with_useful_messages(client):
    body = bad(client, response_format=schema_format({"type": "object", "properties": {"a": {"type": 5}}}))
    assert body["param"] == "response_format.json_schema.schema" and "/properties/a" in body["message"]
    body = bad(client, extra_body={"grammar": 'root ::= "a" | ('})
    assert body["param"] == "grammar" and "line 1" in body["message"], body
    body = bad(client, extra_body={"grammar": "root ::= undefined-rule"})
    assert "undefined-rule" in body["message"], body
    body = bad(client, extra_body={"regex": "a(b"})
    assert body["param"] == "regex", body
    body = bad(client, messages=[{"role": "wizard", "content": "hi"}])
    assert body["param"] == "messages[0].role" and "wizard" in body["message"]
    body = bad(client, messages=[])
    assert body["param"] == "messages"
    body = bad(client, messages=user("word " * 5000))
    assert body["code"] == "context_length_exceeded" and "4096" in body["message"], body
    body = bad(client, max_tokens=100000)
    assert body["param"] == "max_tokens"
    body = bad(client, n=5)
    assert body["param"] == "n"
    body = bad(client, temperature=-1)
    assert body["param"] == "temperature"
    body = bad(client, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_stock"}})
    assert body["param"] == "tool_choice" and "get_stock" in body["message"], body
    unique = {"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}}}
    body = bad(client, tools=[{"type": "function", "function": {"name": "f", "parameters": unique}}])
    assert body["param"] == "tools" and "uniqueItems" in body["message"], body
    body = bad(client, tool_choice="required")
    assert body["param"] == "tool_choice", body
    body = bad(client, messages=[{"role": "tool", "tool_call_id": "call_9", "content": "1"}])
    assert body["param"] == "messages[0].tool_call_id", body
    body = bad(client, extra_body={"max_token": 3})
    assert body["param"] == "max_token" and "unrecognized" in body["message"]
    body = bad(client, response_format={"type": "json_object"}, extra_body={"regex": "a"})
    assert "at most one" in body["message"]


def test_malformed_bodies(url, key):
    status, _, body = http(url, "/v1/chat/completions", key=key, body=b"{not json")
    assert status == 400 and "not valid JSON" in json.loads(body)["error"]["message"]
    # A body over the limit (8 MiB) is refused on its Content-Length, before it is sent.
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {9 << 20}\r\n\r\n{{".encode())
        response = b""
        while b"\r\n\r\n" not in response or not response.rstrip().endswith(b"}"):
            data = s.recv(65536)
            if not data:
                break
            response += data
    head, _, body = response.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 413"), head
    assert json.loads(body)["error"]["code"] == "request_too_large"
    status, _, body = http(url, "/v1/nothing", key=key)
    assert status == 404 and json.loads(body)["error"]["type"] == "invalid_request_error"


def test_api_key_is_required(url):
    wrong = openai.OpenAI(base_url=f"{url}/v1", api_key="wrong-key", timeout=10, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        wrong.chat.completions.create(model="m", messages=user("Hi"), max_tokens=2)
    assert "API key" in e.value.body["message"]
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    status, _, body = http(url, "/v1/models")
    assert status == 401 and "missing API key" in json.loads(body)["error"]["message"]
    # Health and metrics stay open (load balancers, scrapers).
    assert http(url, "/health")[0] == 200


def test_a_client_that_goes_away_is_cancelled(url, key, client):
    cancelled = metric(url, "stencil_cancelled_total")
    impatient = openai.OpenAI(base_url=f"{url}/v1", api_key=key, timeout=1.0, max_retries=0)
    with pytest.raises(openai.APITimeoutError):
        # About 400 forced-free tokens: far more than a second of decoding.
        impatient.chat.completions.create(model="m", messages=user("Letters."), max_tokens=1000,
                                          temperature=1, extra_body={"regex": "[a-z ]{1200}"})
    stream = client.chat.completions.create(model="m", messages=user("Letters."), max_tokens=1000, temperature=1,
                                            stream=True, extra_body={"regex": "[a-z ]{1200}"})
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()
    deadline = time.monotonic() + 20
    while metric(url, "stencil_cancelled_total") < cancelled + 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert metric(url, "stencil_cancelled_total") >= cancelled + 2
    # The sequences are free again.
    r = client.chat.completions.create(model="m", messages=user("Hi"), max_tokens=2, temperature=0)
    assert r.choices[0].finish_reason in ("length", "stop")


def test_metrics(url):
    status, headers, text = http(url, "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    for name in ["stencil_requests_total{route=\"/v1/chat/completions\",status=\"200\"}",
                 "stencil_requests_total{route=\"/v1/chat/completions\",status=\"400\"}",
                 "stencil_time_to_first_token_seconds_count", "stencil_queue_depth",
                 "stencil_mask_seconds_per_token_count", "stencil_completion_tokens_total",
                 "stencil_draft_tokens_total", "stencil_draft_tokens_accepted_total"]:
        assert name in text, name
    assert metric(url, "stencil_time_to_first_token_seconds_count") > 0
    assert metric(url, "stencil_queue_depth") == 0
