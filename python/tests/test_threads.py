"""Threads: matchers on one shared Grammar (Gemma's 262,144-token vocabulary) filled from
several Python threads give exactly the masks of a single-threaded replay; the calls that
compute release the GIL (another Python thread makes progress while one is inside
`Grammar.warm_up()`, a cold mask fill or a batch fill); and
`fill_next_token_bitmask_batch` writes the rows the per-matcher fills write.

The GIL checks do not compare wall times (the test machine may have 2 loaded cores): a
counter thread runs a pure-Python loop, and the calls are timed from inside; while a call
holds the GIL the counter cannot move (beyond a switch interval at each end), while it
releases it the counter runs at a good fraction of its solo rate.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import stencil

from _agreement_util import matcher_mask, new_row, random_walk, row_ids

REPO = Path(__file__).resolve().parents[2]
PERSON = json.loads((REPO / "fixtures" / "schemas" / "person.json").read_text(encoding="utf-8"))
INVOICE = json.loads((REPO / "fixtures" / "schemas" / "invoice.json").read_text(encoding="utf-8"))
THREADS = 4
STEPS = 40
SWITCH = 0.0001  # sys.setswitchinterval during the GIL checks (seconds)


def compile_person(compiler: stencil.Compiler) -> stencil.Grammar:
    return compiler.compile_json_schema(PERSON, whitespace="flexible")


@pytest.fixture(scope="module")
def walks(gemma_compiler) -> list[list[int]]:
    """One seeded walk per thread (on a grammar compiled for this purpose only)."""
    g = compile_person(gemma_compiler)
    return [random_walk(g, seed=40 + i, max_steps=STEPS) for i in range(THREADS)]


@pytest.fixture(scope="module")
def replay_masks(gemma_compiler, walks) -> list[list[np.ndarray]]:
    """Single-threaded masks along each walk, on its own grammar."""
    g = compile_person(gemma_compiler)
    out = []
    for tokens in walks:
        m = stencil.Matcher(g)
        rows = []
        for t in tokens:
            rows.append(matcher_mask(m))
            assert m.consume_token(t)
        rows.append(matcher_mask(m))
        out.append(rows)
    return out


def test_threaded_fills_equal_replay(gemma_compiler, walks, replay_masks):
    # A fresh grammar: its state caches are cold, so the threads race to fill them.
    shared = compile_person(gemma_compiler)
    results: list[list[np.ndarray] | None] = [None] * THREADS
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def worker(i: int) -> None:
        try:
            m = stencil.Matcher(shared)
            row = new_row(shared.vocab)
            rows = []
            start.wait()
            for t in walks[i]:
                m.fill_next_token_bitmask(row)
                rows.append(row.copy())
                assert m.consume_token(t), f"thread {i}: token {t} refused"
            m.fill_next_token_bitmask(row)
            rows.append(row.copy())
            results[i] = rows
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread did not finish in 300 s"
    assert not errors, f"thread errors: {errors!r}"
    for i in range(THREADS):
        got, want = results[i], replay_masks[i]
        assert len(got) == len(want)
        for step, (a, b) in enumerate(zip(got, want)):
            if not np.array_equal(a, b):
                pytest.fail(
                    f"thread {i} step {step}: threaded mask differs from the replay "
                    f"(only threaded: {np.setdiff1d(row_ids(a), row_ids(b))[:10]}, only replay: {np.setdiff1d(row_ids(b), row_ids(a))[:10]})"
                )


def test_threads_sharing_one_matcher_get_errors_not_crashes(gemma_compiler):
    """A Matcher is not for concurrent use: a second thread entering it while a fill runs
    must get an exception (PyO3's borrow check), never corrupt memory."""
    g = compile_person(gemma_compiler)
    m = stencil.Matcher(g)
    failures: list[BaseException] = []

    def hammer() -> None:
        row = new_row(g.vocab)
        for _ in range(30):
            try:
                m.fill_next_token_bitmask(row)
            except RuntimeError as e:  # "Already borrowed"
                failures.append(e)
            except BaseException as e:  # noqa: BLE001
                failures.append(e)
                raise

    ts = [threading.Thread(target=hammer) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert all(isinstance(e, RuntimeError) for e in failures), failures
    assert np.array_equal(matcher_mask(m), matcher_mask(stencil.Matcher(g)))


# -- the GIL is released ----------------------------------------------------------------


class Counter:
    """A Python thread that counts as fast as it can until stopped."""

    def __init__(self) -> None:
        self.n = 0
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop:
            self.n += 1

    def __enter__(self) -> "Counter":
        self.thread.start()
        time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.stop = True
        self.thread.join(10)


def solo_rate() -> float:
    """Counter increments per second with nothing else running in Python."""
    with Counter() as c:
        n0, t0 = c.n, time.perf_counter()
        time.sleep(0.2)  # sleeping releases the GIL: the counter runs alone
        n1, t1 = c.n, time.perf_counter()
    return (n1 - n0) / (t1 - t0)


def progress_during(calls, min_seconds: float = 0.25, max_calls: int = 50) -> tuple[float, float, int]:
    """Runs `calls()` (an iterator of zero-argument callables, each a long native call)
    with the counter thread running; returns (counter increments inside the calls, seconds
    inside the calls, number of calls). The counter is read just before and just after each
    call, on this thread."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH)
    inside_n = inside_t = 0.0
    k = 0
    try:
        with Counter() as c:
            for call in calls:
                n0, t0 = c.n, time.perf_counter()
                call()
                t1, n1 = time.perf_counter(), c.n
                inside_n += n1 - n0
                inside_t += t1 - t0
                k += 1
                if inside_t >= min_seconds or k >= max_calls:
                    break
    finally:
        sys.setswitchinterval(old)
    return inside_n, inside_t, k


def gil_fraction(calls) -> tuple[float, float, float, int]:
    """(the counter's rate inside the calls as a fraction of its solo rate, the fraction a
    held GIL would allow, seconds inside the calls, calls). Holding the GIL, the counter
    can move for at most about one switch interval at each end of each call."""
    rate = solo_rate()
    n, t, k = progress_during(calls)
    return n / (rate * t), 2 * SWITCH * k / t, t, k


def assert_gil_released(what: str, calls) -> None:
    frac, held_bound, t, k = gil_fraction(calls)
    assert t >= 0.05, f"{what}: the calls took only {t * 1e3:.1f} ms: too short to tell (make the workload bigger)"
    print(f"\n{what}: {k} calls, {t * 1e3:.0f} ms inside, counter at {frac:.0%} of its solo rate (held bound {held_bound:.1%})")
    assert frac > max(0.10, 3 * held_bound), (
        f"{what}: the counter thread ran at {frac:.1%} of its solo rate during {k} calls ({t * 1e3:.0f} ms): "
        f"the GIL is held (a held GIL allows about {held_bound:.1%})"
    )


def test_the_gil_check_can_fail():
    """The method tells a GIL-holding call apart: `sorted` of a big list runs in C with the
    GIL held all along, and the counter must (nearly) stop during it."""
    data = list(range(300_000))
    random.Random(0).shuffle(data)

    def calls():
        while True:
            yield lambda: sorted(data)

    frac, held, t, k = gil_fraction(calls())
    print(f"\nsorted (GIL held): {k} calls, {t * 1e3:.0f} ms inside, counter at {frac:.1%} of its solo rate")
    assert frac < max(0.10, 3 * held), f"the counter ran at {frac:.1%} during a GIL-holding call: the check cannot tell"


def test_warm_up_releases_the_gil(gemma_compiler):
    def calls():
        while True:
            g = compile_person(gemma_compiler)  # outside the timing
            yield g.warm_up

    assert_gil_released("Grammar.warm_up", calls())


def test_cold_fill_releases_the_gil(gemma_compiler):
    """The first fill of a freshly compiled grammar (its start state's token-mask cache is
    built on the spot: milliseconds on Gemma's vocabulary): a long single-threaded native
    call, one matcher, one thread."""
    text = (REPO / "fixtures" / "gbnf" / "english.gbnf").read_text(encoding="utf-8")
    row = np.zeros(stencil.bitmask_words(gemma_compiler.vocab.size), dtype=np.int32)

    def calls():
        while True:
            m = stencil.Matcher(gemma_compiler.compile_grammar(text))  # outside the timing
            yield lambda m=m: m.fill_next_token_bitmask(row)

    assert_gil_released("Matcher.fill_next_token_bitmask (cold start state)", calls())


def test_batch_fill_releases_the_gil(gemma_compiler, walks):
    def calls():
        while True:
            g = compile_person(gemma_compiler)
            matchers = []
            for tokens in walks:
                for k in range(0, len(tokens), 4):
                    m = stencil.Matcher(g)
                    assert m.consume_tokens(tokens[:k])
                    matchers.append(m)
            mask = stencil.allocate_token_bitmask(len(matchers), g.vocab.size)
            yield lambda: stencil.fill_next_token_bitmask_batch(matchers, mask)

    assert_gil_released("fill_next_token_bitmask_batch", calls())


def test_compile_releases_the_gil(gemma_compiler):
    def calls():
        while True:
            yield lambda: gemma_compiler.compile_json_schema(INVOICE, whitespace="flexible")

    assert_gil_released("Compiler.compile_json_schema", calls())


def test_two_threads_report(gemma_compiler, walks):
    """Informational: wall time of a warm fill workload on 1 and on 2 threads (printed with
    -s; not asserted, the machine may be loaded). Asserts only that both runs agree."""
    g = compile_person(gemma_compiler)
    g.warm_up()

    def work(tokens, out):
        m = stencil.Matcher(g)
        row = new_row(g.vocab)
        acc = 0
        for _ in range(40):
            m.reset()
            for t in tokens:
                m.fill_next_token_bitmask(row)
                acc ^= int(row.sum())
                m.consume_token(t)
        out.append(acc)

    one: list[int] = []
    t0 = time.perf_counter()
    work(walks[0], one)
    work(walks[1], one)
    t1 = time.perf_counter() - t0
    two: list[int] = []
    ts = [threading.Thread(target=work, args=(walks[i], two)) for i in (0, 1)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    t2 = time.perf_counter() - t0
    assert sorted(one) == sorted(two)
    print(f"\nwarm fills: 2 walks sequentially {t1 * 1e3:.1f} ms, on 2 threads {t2 * 1e3:.1f} ms (ratio {t2 / t1:.2f})")


# -- batch fill = per-matcher fills -----------------------------------------------------


def test_batch_fill_equals_single_fills(gemma_compiler, walks):
    g = compile_person(gemma_compiler)
    other = gemma_compiler.compile_regex(r"[0-9]{1,4}(\.[0-9]{1,2})?")
    matchers = []
    for tokens in walks:
        for k in (0, len(tokens) // 2, len(tokens)):
            m = stencil.Matcher(g)
            assert m.consume_tokens(tokens[:k])
            matchers.append(m)
    # Grammars may differ within one batch, and a terminated matcher writes zeros.
    r = stencil.Matcher(other)
    matchers.append(r)
    done = stencil.Matcher(other)
    ids = [t for t in range(len(g.vocab)) if g.vocab.is_text(t) and g.vocab.token_bytes(t) == b"7"]
    assert ids and done.consume_token(ids[0]) and done.consume_token(g.vocab.eos_ids[0]) and done.is_terminated()
    matchers.append(done)
    n = len(matchers)
    expected = np.stack([matcher_mask(m) for m in matchers])
    assert not expected[-1].any()

    mask = stencil.allocate_token_bitmask(n, g.vocab.size)
    stencil.fill_next_token_bitmask_batch(matchers, mask)
    assert np.array_equal(np.asarray(mask), expected)

    # Explicit rows: reversed, in a bigger buffer whose other rows stay untouched.
    big = np.full((n + 3, expected.shape[1]), 0x5A5A5A5A, dtype=np.int32)
    rows = [n + 2 - i for i in range(n)]
    stencil.fill_next_token_bitmask_batch(matchers, big, rows)
    for i, row in enumerate(rows):
        assert np.array_equal(big[row], expected[i]), f"matcher {i} -> row {row}"
    untouched = sorted(set(range(n + 3)) - set(rows))
    assert (big[untouched] == 0x5A5A5A5A).all()

    # A torch tensor works the same way.
    import torch

    tmask = torch.zeros((n, expected.shape[1]), dtype=torch.int32)
    stencil.fill_next_token_bitmask_batch(matchers, tmask)
    assert np.array_equal(tmask.numpy(), expected)

    # Filling changes no matcher's state.
    assert np.array_equal(np.stack([matcher_mask(m) for m in matchers]), expected)
    stencil.fill_next_token_bitmask_batch([], np.zeros((0, expected.shape[1]), dtype=np.int32))
