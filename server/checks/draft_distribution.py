"""Issue 44's black-box check: a server whose draft model is its own model (q = p) samples
as a plain one does.

Two servers on 127.0.0.1 (`stencil serve` with SmolLM2: plain, and with `--draft-model`
the same GGUF) answer the same N seeded temperature-1 requests under a short regex
(8 samples per request); the distributions of finish reason and output length (words)
must agree (chi-square homogeneity at 0.001) and the stop rates within 3.3 standard errors.
Before the fix (a drawn EOS was dropped from the draft, so P(EOS) at a drafted position
was p(EOS)^2) the stop rate was 0.66 plain and 0.57 drafted, z = 6.0.

Run by scripts/check-draft-distribution.sh (not in CI: about 2,000 samples a side take
several minutes on 2 cores; runtime/tests/exact.rs is CI's test of the same property on
the production loop). Prints the counts, the statistics and PASS or FAIL.
"""

import os
import sys

import openai

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from helpers import own_server  # noqa: E402

SAMPLES = int(os.environ.get("SAMPLES", "2000"))
PER_REQUEST = 8


def chi_square_critical(df):
    """The chi-square quantile at 1 - 0.001 (Wilson-Hilferty)."""
    z = 3.090232
    return df * (1 - 2 / (9 * df) + z * (2 / (9 * df)) ** 0.5) ** 3


def homogeneity(a, b):
    """Pearson's chi-square that two samples of categories come from one distribution
    (cells pooled until each expects 5), and its degrees of freedom."""
    na, nb = sum(a.values()), sum(b.values())
    rows, pool = [], [0, 0]
    for k in sorted(set(a) | set(b)):
        ca, cb = a.get(k, 0), b.get(k, 0)
        if (ca + cb) * min(na, nb) / (na + nb) < 5:
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


def outcomes(*flags):
    counts = {}
    with own_server("--parallel", str(PER_REQUEST), "--ctx-size", "4096", *flags) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", timeout=300, max_retries=0)
        for seed in range(0, SAMPLES, PER_REQUEST):
            r = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Which animal says moo? One word."}],
                temperature=1.0, seed=seed, n=PER_REQUEST, max_tokens=8, extra_body={"regex": "[a-z]+( [a-z]+)*"})
            for c in r.choices:
                key = (c.finish_reason, len(c.message.content.split()))
                counts[key] = counts.get(key, 0) + 1
    return counts


def main():
    model = os.environ["STENCIL_SERVER_MODEL"]
    plain = outcomes()
    drafted = outcomes("--draft-model", model, "--draft-tokens", "4")
    stat, df = homogeneity(plain, drafted)
    stops = [sum(v for (reason, _), v in c.items() if reason == "stop") / sum(c.values()) for c in (plain, drafted)]
    pooled = (stops[0] + stops[1]) / 2
    z = (stops[0] - stops[1]) / (pooled * (1 - pooled) * (2 / SAMPLES)) ** 0.5
    print(f"plain:   {dict(sorted(plain.items()))}")
    print(f"drafted: {dict(sorted(drafted.items()))}")
    print(f"chi-square {stat:.1f}, df {df}, critical {chi_square_critical(df):.1f}")
    print(f"stop rate plain {stops[0]:.3f}, drafted {stops[1]:.3f}, z = {z:.2f}")
    ok = stat < chi_square_critical(df) and abs(z) < 3.3
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
