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


def chi_square_critical(df):
    """The chi-square quantile at 1 - 0.001 (Wilson-Hilferty)."""
    z = 3.090232
    return df * (1 - 2 / (9 * df) + z * (2 / (9 * df)) ** 0.5) ** 3


def homogeneity(a, b):
    """Pearson's chi-square that two samples of categories come from one distribution (cells
    pooled until each expects 5), and its degrees of freedom."""
    keys = sorted(set(a) | set(b))
    na, nb = sum(a.values()), sum(b.values())
    rows, pool = [], [0, 0]
    for k in keys:
        ca, cb = a.get(k, 0), b.get(k, 0)
        if min((ca + cb) * na, (ca + cb) * nb) / (na + nb) < 5:
            pool[0] += ca
            pool[1] += cb
        else:
            rows.append((ca, cb))
    if sum(pool):
        rows.append(tuple(pool))
    stat = 0.0
    for ca, cb in rows:
        for c, n in ((ca, na), (cb, nb)):
            e = (ca + cb) * n / (na + nb)
            stat += (c - e) ** 2 / e
    return stat, max(len(rows) - 1, 1)


def test_draft_model_sampling_keeps_the_distribution():
    """The model as its own draft (q = p), 1,000 seeded temperature-1 samples each way under a
    short regex: finish reasons and lengths distributed alike, stop rates within 3.3 standard
    errors. Before the fix of issue 44 (a drawn EOS was dropped from the draft), P(EOS) at a
    drafted position was p(EOS)^2 and the stop rate fell (0.66 plain, 0.57 drafted, z = 6.0)."""
    model = os.environ["STENCIL_SERVER_MODEL"]
    with own_server("--parallel", "8", "--ctx-size", "4096", "--draft-model", model, "--draft-tokens", "4") as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", timeout=120, max_retries=0)

        def outcomes(speculation):
            counts = {}
            for seed in range(0, 1000, 8):
                r = client.chat.completions.create(
                    model="m", messages=user("Name some animals."), temperature=1.0, seed=seed, n=8, max_tokens=8,
                    extra_body={"regex": "[a-z]+( [a-z]+)*", "speculation": speculation})
                for c in r.choices:
                    key = (c.finish_reason, len(c.message.content.split()))
                    counts[key] = counts.get(key, 0) + 1
            return counts

        plain, drafted = outcomes("none"), outcomes("draft-model")
    stat, df = homogeneity(plain, drafted)
    assert stat < chi_square_critical(df), (stat, df, plain, drafted)
    stops = [sum(v for (reason, _), v in c.items() if reason == "stop") / sum(c.values()) for c in (plain, drafted)]
    pooled = (stops[0] + stops[1]) / 2
    z = (stops[0] - stops[1]) / (pooled * (1 - pooled) * (2 / 1000)) ** 0.5
    assert abs(z) < 3.3, (stops, z)
