"""A full queue is a 429 (`queue_full`, openai's RateLimitError), never a hang or a crash,
and the server serves again once it drains. Runs its own server: one sequence, a queue of
one, so that a burst of requests overflows it."""

import concurrent.futures
import threading

import openai
import pytest

from helpers import own_server

BURST = 6


@pytest.fixture(scope="module")
def small_server():
    with own_server("--parallel", "1", "--queue-size", "1", "--ctx-size", "1024") as url:
        yield url


def test_a_full_queue_is_a_429_and_the_server_recovers(small_server):
    client = openai.OpenAI(base_url=f"{small_server}/v1", api_key="x", timeout=60, max_retries=0)
    start = threading.Barrier(BURST)

    def one(i):
        start.wait()
        try:
            # 40 forced-length tokens: the first request is still decoding when the rest arrive.
            r = client.completions.create(model="m", prompt=f"Say a {i}:", max_tokens=64, temperature=0,
                                          extra_body={"regex": "(a ){40}"})
            return "ok", r.choices[0].text
        except openai.RateLimitError as e:
            return "429", e

    with concurrent.futures.ThreadPoolExecutor(BURST) as pool:
        results = list(pool.map(one, range(BURST)))
    rejected = [e for kind, e in results if kind == "429"]
    served = [text for kind, text in results if kind == "ok"]
    # One decoding, one first in line, one in the queue of one: the others are refused.
    assert rejected, "a burst past the queue must be refused"
    assert served, "the requests that fit must be served"
    assert all(text == "a " * 40 for text in served)
    for e in rejected:
        assert e.status_code == 429 and e.body["code"] == "queue_full", e.body
        assert "retry" in e.body["message"]
    # Drained: the server answers again.
    r = client.completions.create(model="m", prompt="Say a:", max_tokens=8, temperature=0,
                                  extra_body={"regex": "(a ){3}"})
    assert r.choices[0].text == "a a a "
