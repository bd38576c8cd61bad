#!/usr/bin/env python3
"""`stencil serve` against llama.cpp's `llama-server`: aggregate tokens/s and time to first
token with 1, 4 and 8 concurrent clients sending schema-constrained requests.

For each model and each server, in turn (never both at once): start the server on
127.0.0.1 with the same settings (slots, total context, threads, batch size), wait for
/health, send one warm-up request, then run each concurrency level
(server/bench/load.py: closed loop, streamed requests); stop the server (SIGTERM, then
SIGKILL). Every output is parsed and validated against the schema with `jsonschema`
(Draft 2020-12, formats checked). Writes a Markdown report (`--out`) and prints it.

The request: `fixtures/prompts/person.txt` under `fixtures/schemas/person.json`, greedy
(temperature 0), `max_tokens` capped, streamed with `stream_options.include_usage`.
SmolLM2-135M-Instruct has a chat template: `/v1/chat/completions` with `response_format`
`json_schema` (strict). The Gemma 3 270M GGUF is a base model without one (`stencil serve`
refuses chat without a template; llama-server would fall back to ChatML), so both servers
get the prompt text itself on `/v1/completions`: Stencil with `response_format`,
llama-server with its own `json_schema` field (its `/v1/completions` ignores
`response_format`).

    scripts/bench-server.sh [--models smollm2,gemma3] [--clients 1,4,8] [--requests 8] [--threads 2]
                            [--llama-kv-unified] [--max-tokens 256] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import jsonschema

import load

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCHEMA = REPO / "fixtures/schemas/person.json"
PROMPT = REPO / "fixtures/prompts/person.txt"
# name -> (file, title, API: "chat" or "completions").
MODELS = {
    "smollm2": ("smollm2-135m-instruct.q4_1.gguf", "SmolLM2-135M-Instruct (Q4_1)", "chat"),
    "gemma3": ("gemma-3-270m-q4_k_m.gguf", "Gemma 3 270M base (Q4_K_M)", "completions"),
}
SERVERS = ("stencil", "llama-server")
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def server_command(kind: str, args: argparse.Namespace, model: Path, port: int) -> list[str]:
    """The same settings for both: slots, total context, threads (decode and prompt) and
    batch (Stencil's session uses n_batch = n_ubatch = 512). The KV cache is each server's
    own: Stencil's is one pool shared by its sequences; llama-server, given --parallel,
    splits the context into one stream per slot unless told `--kv-unified`."""
    common = [str(model), "--host", HOST, "--port", str(port)]
    if kind == "stencil":
        return [str(args.stencil), "serve", "--model", *common, "--parallel", str(args.parallel),
                "--ctx-size", str(args.ctx_size), "--threads", str(args.threads),
                "--queue-size", "64"]
    return [str(args.llama_server), "--model", *common, "--parallel", str(args.parallel),
            "--ctx-size", str(args.ctx_size), "--threads", str(args.threads),
            "--threads-batch", str(args.threads), "--batch-size", "512", "--ubatch-size", "512",
            "--kv-unified" if args.llama_kv_unified else "--no-kv-unified", "--no-ui"]


def request(kind: str, api: str, schema: dict, prompt: str, max_tokens: int) -> tuple[str, dict]:
    """The path and body of the benchmark's request for a server."""
    body = {"model": "default", "temperature": 0, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}}
    response_format = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
        body["response_format"] = response_format
        return "/v1/chat/completions", body
    body["prompt"] = prompt
    if kind == "stencil":
        body["response_format"] = response_format
    else:
        body["json_schema"] = schema
    return "/v1/completions", body


class Server:
    """A server process on a free port, its log in a temporary file; a context manager
    that stops it however the block ends."""

    def __init__(self, command_for_port):
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile("w+b", prefix="bench-server-", suffix=".log")
        self.proc = subprocess.Popen(command_for_port(self.port), stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
        self.log.close()

    def wait_healthy(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://{HOST}:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the server was not healthy within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self, lines: int = 30) -> str:
        self.log.flush()
        self.log.seek(0)
        return "\n".join(self.log.read().decode(errors="replace").splitlines()[-lines:])


def cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU time so far, in seconds: the whole machine's (busy: all but idle and iowait,
    steal included) and the server process's (user + system, all its threads)."""
    tick = os.sysconf("SC_CLK_TCK")
    machine = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    busy = sum(machine) - machine[3] - machine[4]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return busy / tick, (int(fields[11]) + int(fields[12])) / tick


def invalid(text: str, validator: jsonschema.protocols.Validator) -> str | None:
    """Why an output fails the schema (None: it is valid)."""
    try:
        instance = json.loads(text)
    except ValueError:
        return "does not parse as JSON"
    error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
    if error is None:
        return None
    return f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"[:100]


def percentile(xs: list[float], q: float) -> float | None:
    """Nearest rank: the smallest value with at least q% of the values at or below it."""
    if not xs:
        return None
    xs = sorted(xs)
    return xs[max(0, math.ceil(q / 100 * len(xs)) - 1)]


def summarize(r: load.Run, validator) -> dict:
    ok = [o for o in r.outcomes if o.ok]
    ttft = [o.ttft_s * 1e3 for o in ok if o.ttft_s is not None]
    tokens = sum(o.completion_tokens for o in ok)
    cached = [o.cached_tokens for o in ok if o.cached_tokens is not None]
    return {
        "clients": r.clients,
        "requests": len(r.outcomes),
        "ok": len(ok),
        "valid": sum(invalid(o.text, validator) is None for o in ok),
        "why_invalid": sorted({w for o in ok if (w := invalid(o.text, validator))}),
        "tokens": tokens,
        "wall_s": r.wall_s,
        "tok_s": tokens / r.wall_s if r.wall_s > 0 else 0.0,
        "client_cpu_pct": 100 * r.client_cpu_s / r.wall_s if r.wall_s > 0 else 0.0,
        "ttft_p50_ms": percentile(ttft, 50),
        "ttft_p99_ms": percentile(ttft, 99),
        "prompt_tokens": sorted({o.prompt_tokens for o in ok}),
        "cached_tokens_mean": sum(cached) / len(cached) if cached else None,
        "truncated": sum(o.finish_reason == "length" for o in ok),
        "errors": sorted({o.error for o in r.outcomes if not o.ok})[:3],
        "outputs": sorted({o.text for o in ok}),
    }


def bench_server(kind: str, model_key: str, args, schema: dict, prompt: str, validator) -> list[dict]:
    file, _, api = MODELS[model_key]
    model = args.models_dir / file
    path, body = request(kind, api, schema, prompt, args.max_tokens)
    rows = []
    with Server(lambda port: server_command(kind, args, model, port)) as server:
        server.wait_healthy()
        print(f"== {model_key} / {kind}: warm-up", file=sys.stderr, flush=True)
        warm = load.stream(HOST, server.port, path, body, args.timeout)
        if not warm.ok:
            raise RuntimeError(f"{kind} failed the warm-up request: {warm.error}\n{server.log_tail()}")
        for clients in args.clients:
            before = cpu_seconds(server.proc.pid)
            r = load.run(HOST, server.port, path, body, clients, args.requests, args.timeout)
            busy, server_cpu = (b - a for a, b in zip(before, cpu_seconds(server.proc.pid)))
            row = {"model": model_key, "server": kind, **summarize(r, validator),
                   "server_cpu_pct": 100 * server_cpu / r.wall_s,
                   "other_cpu_pct": 100 * (busy - server_cpu - r.client_cpu_s) / r.wall_s}
            print(f"== {model_key} / {kind} / {clients} clients: {row['ok']}/{row['requests']} ok, "
                  f"{row['valid']} valid, {row['tok_s']:.1f} tok/s, TTFT p50 {fmt(row['ttft_p50_ms'], 0)} ms, "
                  f"CPU server {row['server_cpu_pct']:.0f}% other {row['other_cpu_pct']:.0f}%",
                  file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def fmt(x: float | None, nd: int = 1) -> str:
    return "–" if x is None else f"{x:,.{nd}f}"


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a and b else "–"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def llama_build(binary: Path) -> str:
    """What scripts/build-llama-server.sh says it built (target/llama-server/STAMP)."""
    stamp = binary.resolve().parents[2] / "STAMP"
    return stamp.read_text().strip() if stamp.is_file() else f"an unknown build ({binary})"


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def method(args) -> list[str]:
    """The method paragraph, sentence by sentence."""
    slot_ctx = args.ctx_size // args.parallel
    kv = ("llama-server's too (`--kv-unified`)" if args.llama_kv_unified else
          f"llama-server's is its default with `--parallel`, one stream of {slot_ctx} tokens per slot "
          f"(with `--kv-unified` it was slower in trials)")
    return [
        "Method: each server in turn on 127.0.0.1, alone with the load generator, with the same settings:",
        f"{args.parallel} slots (`--parallel`), {args.ctx_size} tokens of context in all,",
        f"{args.threads} llama.cpp thread{'s' if args.threads > 1 else ''} for decoding and prompts",
        "(both servers were 1.5–2× faster with 2 threads than with 1 in trials), batches of 512;",
        "llama.cpp is the same build (the pinned `llama-cpp-sys-2` sources, the same compiler options).",
        f"KV cache: Stencil's is one pool shared by the slots; {kv}.",
        "Stencil computes the next mask on another thread during the forward pass; llama-server's",
        "grammar sampler runs on its main thread after it.",
        "Request: `fixtures/prompts/person.txt` under `fixtures/schemas/person.json`, greedy,",
        f"`max_tokens` {args.max_tokens}, streamed; SmolLM2 (chat template) on `/v1/chat/completions` with",
        "`response_format` `json_schema` (strict); Gemma 3 270M (a base model, no chat template) on",
        "`/v1/completions` with the prompt text, `response_format` for Stencil and llama-server's own",
        "`json_schema` field (the same prompt tokens for both, as *prompt tokens* shows).",
        f"Each level: N clients start together, each sends {args.requests} requests one after another",
        f"(closed loop; {args.timeout:.0f} s bound per request), after one warm-up request per server.",
        "*tokens*: the servers' `usage.completion_tokens` of the successful requests; *tok/s*: tokens over",
        "the level's wall time (first request sent to last answer read); *TTFT*: request sent to the first",
        "event with text, p50 and p99 by nearest rank over the level's requests (with few requests, p99",
        "is the slowest). *valid*: the output parses and validates with Python's `jsonschema` (Draft",
        "2020-12, formats checked); *truncated*: stopped by `max_tokens`.",
        "Greedy outputs may still differ between requests (*distinct outputs*): a batch's sums depend on",
        "what else is in it.",
        "Prompt caching is each server's default (llama-server reuses a slot's matching prompt prefix: the",
        "number in brackets is its mean `prompt_tokens_details.cached_tokens`).",
        "*CPU*: CPU time over the level's wall time (one core = 100%,",
        f"{os.cpu_count() * 100}% in all) of the server process, of the load generator, and of everything",
        "else on the machine (/proc/stat less those two: other work shows there).",
    ]


def report(rows: list[dict], args, meta: dict) -> str:
    by = {(r["model"], r["server"], r["clients"]): r for r in rows}
    out = ["# Serving: `stencil serve` vs `llama-server`", ""]
    out.append(
        f"Run {meta['date']} on {meta['cpu']} ({os.cpu_count()} cores), load average "
        f"{meta['load_start']} at start, {meta['load_end']} at end; {meta['minutes']:.0f} minutes. "
        f"Stencil commit {meta['commit']}; llama-server built from {meta['llama']}. Command: `{meta['command']}`."
    )
    out.append("")
    out.append(" ".join(method(args)))
    for model_key in args.models:
        _, title, _ = MODELS[model_key]
        out += ["", f"## {title}", ""]
        out.append("| server | clients | requests | valid | truncated | prompt tokens (cached) | tokens | tok/s "
                   "| TTFT p50 ms | TTFT p99 ms | CPU server / client / other |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for kind in SERVERS:
            for c in args.clients:
                r = by.get((model_key, kind, c))
                if not r:
                    continue
                prompt = "/".join(map(str, r["prompt_tokens"])) or "–"
                if r["cached_tokens_mean"] is not None:
                    prompt += f" ({r['cached_tokens_mean']:.0f})"
                failed = ""
                if r["ok"] < r["requests"]:
                    failed = f" ({r['requests'] - r['ok']} failed: {'; '.join(r['errors'])})"
                out.append(
                    f"| {kind} | {c} | {r['requests']}{failed} | {r['valid']} | {r['truncated']} | {prompt} | "
                    f"{r['tokens']:,} | {r['tok_s']:.1f} | {fmt(r['ttft_p50_ms'], 0)} | {fmt(r['ttft_p99_ms'], 0)} | "
                    f"{r['server_cpu_pct']:.0f}% / {r['client_cpu_pct']:.0f}% / {r['other_cpu_pct']:.0f}% |"
                )
        out += ["", "| clients | tok/s Stencil / llama-server | TTFT p50 llama-server / Stencil |", "|---:|---:|---:|"]
        for c in args.clients:
            s, l = by.get((model_key, "stencil", c)), by.get((model_key, "llama-server", c))
            if s and l:
                out.append(f"| {c} | {ratio(s['tok_s'], l['tok_s'])} | {ratio(l['ttft_p50_ms'], s['ttft_p50_ms'])} |")
        out += ["", "| server | distinct outputs | tokens per request "
                "| an output (whitespace collapsed; beginning … end) | why outputs were invalid |",
                "|---|---:|---:|---|---|"]
        for kind in SERVERS:
            mine = [r for r in rows if (r["model"], r["server"]) == (model_key, kind)]
            outputs = sorted({o for r in mine for o in r["outputs"]})
            if outputs:
                shown = " ".join(outputs[0].split())
                if len(shown) > 160:
                    shown = shown[:100] + " … " + shown[-60:]
                shown = shown.replace("|", "\\|")
                why = "; ".join(sorted({w for r in mine for w in r["why_invalid"]})).replace("|", "\\|") or "–"
                n_ok = sum(r["ok"] for r in mine)
                out.append(f"| {kind} | {len(outputs)} | {sum(r['tokens'] for r in mine) / n_ok:.0f} | `{shown}` "
                           f"| {why} |")
        lo, hi = min(args.clients), max(args.clients)
        scaling = []
        for kind in SERVERS:
            a, b = by.get((model_key, kind, lo)), by.get((model_key, kind, hi))
            if a and b:
                scaling.append(f"{kind} {ratio(b['tok_s'], a['tok_s'])}")
        if scaling:
            out += ["", f"Aggregate tok/s, {hi} clients over {lo}: " + ", ".join(scaling) + "."]
    out += ["", "## Goals", ""]
    out += goals(by, args)
    return "\n".join(out) + "\n"


def goals(by: dict, args) -> list[str]:
    """The issue's two goals, stated plainly from the measurements."""
    lines = []
    if "gemma3" in args.models:
        levels = [(c, by.get(("gemma3", "stencil", c)), by.get(("gemma3", "llama-server", c))) for c in args.clients]
        if all(s and l for _, s, l in levels):
            def verdict(behind: list[int]) -> str:
                return "**met**" if not behind else f"**not met** (behind at {', '.join(map(str, behind))} clients)"
            slower = [c for c, s, l in levels if s["tok_s"] <= l["tok_s"]]
            later = [c for c, s, l in levels if (s["ttft_p50_ms"] or math.inf) >= (l["ttft_p50_ms"] or math.inf)]
            lines.append(f"- Ahead of llama-server at every concurrency on Gemma 3, in aggregate tok/s: "
                         f"{verdict(slower)}; in TTFT p50: {verdict(later)}.")
    lo, hi = min(args.clients), max(args.clients)
    for model_key in args.models:
        a, b = by.get((model_key, "stencil", lo)), by.get((model_key, "stencil", hi))
        if a and b and a["tok_s"]:
            x = b["tok_s"] / a["tok_s"]
            verdict = "met" if x >= 2 else "not met"
            lines.append(f"- {hi} clients ≥ 2× one client's aggregate tok/s ({MODELS[model_key][1]}, Stencil): "
                         f"{x:.2f}×, **{verdict}**.")
    return lines


def main() -> None:
    # SIGTERM unwinds like Ctrl-C, so that the running server is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stencil", type=Path, default=REPO / "target/release/stencil")
    ap.add_argument("--llama-server", type=Path, default=REPO / "target/llama-server/build/bin/llama-server")
    ap.add_argument("--models-dir", type=Path,
                    default=Path(os.environ.get("STENCIL_MODELS_DIR", Path.home() / ".cache/stencil/models")))
    ap.add_argument("--models", default="smollm2,gemma3", type=lambda s: s.split(","))
    ap.add_argument("--servers", default=",".join(SERVERS), type=lambda s: s.split(","))
    ap.add_argument("--clients", default="1,4,8", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--requests", type=int, default=8, help="requests per client and level")
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--ctx-size", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--llama-kv-unified", action="store_true",
                    help="one KV cache shared by llama-server's slots, as Stencil's (default: one per slot)")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per request")
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    ap.add_argument("--json", type=Path, help="also write every row as JSON")
    args = ap.parse_args()
    for m in args.models:
        if m not in MODELS:
            sys.exit(f"unknown model {m} ({', '.join(MODELS)})")
        if not (args.models_dir / MODELS[m][0]).is_file():
            sys.exit(f"{args.models_dir / MODELS[m][0]} is missing: run scripts/fetch-models.sh")
    for kind in args.servers:
        binary = args.stencil if kind == "stencil" else args.llama_server
        if kind not in SERVERS or not binary.is_file():
            sys.exit(f"no {kind} binary at {binary}")

    schema = json.loads(SCHEMA.read_text())
    prompt = PROMPT.read_text()
    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    load_start = [round(x, 2) for x in os.getloadavg()]
    t0 = time.monotonic()
    rows = []
    for model_key in args.models:
        for kind in args.servers:
            rows += bench_server(kind, model_key, args, schema, prompt, validator)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": cpu_model(),
        "load_start": load_start,
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "minutes": (time.monotonic() - t0) / 60,
        "commit": git_commit(),
        "llama": llama_build(args.llama_server),
        "command": " ".join(["scripts/bench-server.sh", *sys.argv[1:]]),
    }
    md = report(rows, args, meta)
    print(md)
    args.out.write_text(md, encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
