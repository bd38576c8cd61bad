"""Speculative decoding in the server: a server of its own with the model as its own draft
model (`--draft-model`, the default for its requests) decodes concurrent greedy requests to
the text it gives without speculation, and reports the drafts in `usage` and `/metrics`."""

import concurrent.futures
import json
import os

import jsonschema
import openai
import pytest

from helpers import metric, own_server
from test_server import LANDMARK, LANDMARK_PROMPT, PERSON, PERSON_PROMPT, schema_format, user


@pytest.fixture(scope="module")
def drafting_server():
    model = os.environ["STENCIL_SERVER_MODEL"]
    with own_server("--parallel", "2", "--ctx-size", "4096", "--draft-model", model, "--draft-tokens", "3") as url:
        yield url


def test_draft_model_speculation_keeps_greedy_outputs(drafting_server):
    client = openai.OpenAI(base_url=f"{drafting_server}/v1", api_key="x", timeout=60, max_retries=0)
    asks = [dict(model="m", messages=user(LANDMARK_PROMPT), temperature=0, max_tokens=80,
                 response_format=schema_format(LANDMARK)),
            dict(model="m", messages=user(PERSON_PROMPT), temperature=0, max_tokens=48,
                 response_format=schema_format(PERSON))]
    # Without speculation, twice each: the second from the cached prompt, as those below.
    plain = [[client.chat.completions.create(**a, extra_body={"speculation": "none"}) for _ in range(2)][1]
             for a in asks]
    assert all(p.usage.completion_tokens_details is None for p in plain)
    drafted = metric(drafting_server, "stencil_draft_tokens_total")
    # With the server's default (the draft model), both at once: one batch per step.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        fast = list(pool.map(lambda a: client.chat.completions.create(**a), asks))
    total = 0
    for a, p, f, schema in zip(asks, plain, fast, [LANDMARK, PERSON]):
        text = p.choices[0].message.content
        assert f.choices[0].message.content == text
        jsonschema.validate(json.loads(text), schema)
        d = f.usage.completion_tokens_details
        # The model drafting for itself, greedily: its drafts are its own choices.
        assert d.accepted_prediction_tokens >= 4 * d.rejected_prediction_tokens, d
        assert d.accepted_prediction_tokens > 0, d
        total += d.accepted_prediction_tokens + d.rejected_prediction_tokens
    assert metric(drafting_server, "stencil_draft_tokens_total") == drafted + total
    # A request may still choose prompt lookup.
    r = client.chat.completions.create(**asks[0], extra_body={"speculation": "prompt-lookup"})
    assert r.choices[0].message.content == plain[0].choices[0].message.content

