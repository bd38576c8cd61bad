"""Tool replies streamed and whole agree, cut by max_tokens or not (issue 44).

With `tool_choice: "required"`, parallel calls and Mistral's `[TOOL_CALLS]NAME[ARGS]{…}`
format (issue 47), SmolLM2 keeps calling (5 calls, then it ends); `max_tokens` then cuts
the reply inside a call. Both modes must give the same
result: the complete calls as `tool_calls`, the call being written with its name and the
arguments written so far (the stream has sent those already), `finish_reason` "length".
Greedy decoding, the prompt warmed first so that every compared request finds it cached.
"""

import json

import jsonschema

from test_server import PARAMETERS, TOOLS

FORMAT = {"tool_format": "mistral-args"}
MESSAGES = [{"role": "user", "content": "What is the weather in Paris, Oslo, Rome and Lima? Also the time in Tokyo."}]


def ask(client, max_tokens):
    return client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS, tool_choice="required",
                                          temperature=0, max_tokens=max_tokens, extra_body=FORMAT)


def streamed(client, max_tokens):
    """The stream's deltas put together: (content, calls, finish_reason)."""
    content, calls, finish = "", {}, None
    for chunk in client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS, tool_choice="required",
                                                temperature=0, max_tokens=max_tokens, stream=True,
                                                extra_body=FORMAT):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for d in choice.delta.tool_calls or []:
                c = calls.setdefault(d.index, {"name": "", "arguments": ""})
                c["name"] += d.function.name or ""
                c["arguments"] += d.function.arguments or ""
            finish = choice.finish_reason or finish
    return content, [calls[i] for i in sorted(calls)], finish


def whole(client, max_tokens):
    r = ask(client, max_tokens)
    message = r.choices[0].message
    calls = [{"name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls or []]
    return (message.content or ""), calls, r.choices[0].finish_reason, r.usage.completion_tokens


def complete(call):
    try:
        arguments = json.loads(call["arguments"])
    except ValueError:
        return False
    jsonschema.validate(arguments, PARAMETERS[call["name"]])
    return True


def test_cut_and_whole_tool_replies_agree_streamed_and_not(client):
    ask(client, 8)  # warm the prompt cache
    _, calls, finish, used = whole(client, 400)
    assert finish == "tool_calls" and len(calls) >= 2, (finish, calls)
    assert all(complete(c) for c in calls)
    # Cut in the first call's head, half-way, and just before the end.
    for max_tokens in (6, used // 2, used - 2):
        content, calls, finish, _ = whole(client, max_tokens)
        assert finish == "length", (max_tokens, finish)
        assert streamed(client, max_tokens) == (content, calls, finish), max_tokens
        # Every call but the last is whole and valid; the last may be unfinished.
        assert all(complete(c) for c in calls[:-1]), calls
        if max_tokens > 6:
            assert calls, f"a reply cut at {max_tokens} tokens lost its calls"
    # Mixed: some complete calls and an unfinished one.
    _, calls, _, _ = whole(client, used - 2)
    assert len(calls) >= 2 and complete(calls[0]), calls
    # Not cut: the same in both modes too.
    content, calls, finish, _ = whole(client, 400)
    assert streamed(client, 400) == (content, calls, finish)
