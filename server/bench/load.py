"""Closed-loop load on an OpenAI-compatible server: `clients` threads, each sending
`requests` streamed requests one after another, all at once.

Only the standard library (`http.client`, one connection per request), so that the client
costs the same against any server and as little CPU as possible (the server shares the
machine). What one request measures:

* time to first token (TTFT): from sending the request to the first server-sent event
  that carries non-empty text (a first event with only the role does not count);
* completion tokens: `usage.completion_tokens` of the last event
  (`stream_options: {"include_usage": true}`), as the server counts them;
* the text, which the caller validates.

A request is bounded by `timeout` seconds in all (each socket read too); one over its time,
or answered with an error, is recorded as failed with the reason.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Outcome:
    """One request, as the client saw it."""

    ok: bool
    error: str = ""
    ttft_s: float | None = None
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Prompt tokens the server reused from its cache, when it says so (llama-server does).
    cached_tokens: int | None = None
    text: str = ""
    finish_reason: str | None = None


@dataclass
class Run:
    """One concurrency level: every request, the wall time from the first request sent to
    the last answer read, and the CPU time the client process used meanwhile (it shares the
    machine with the server)."""

    clients: int
    outcomes: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0
    client_cpu_s: float = 0.0


def stream(host: str, port: int, path: str, body: dict, timeout: float) -> Outcome:
    """Sends one streamed request and reads its events to the end."""
    start = time.perf_counter()
    deadline = start + timeout
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    out = Outcome(ok=False)
    pieces: list[str] = []
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            out.error = f"HTTP {resp.status}: {resp.read(300).decode(errors='replace')}"
            return out
        done = False
        for line in resp:
            if time.perf_counter() > deadline:
                out.error = f"over {timeout:.0f} s"
                return out
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                done = True
                break
            event = json.loads(data)
            if "error" in event:
                out.error = json.dumps(event["error"])[:300]
                return out
            for choice in event.get("choices") or []:
                text = (choice.get("delta") or {}).get("content") or choice.get("text") or ""
                if text:
                    if out.ttft_s is None:
                        out.ttft_s = time.perf_counter() - start
                    pieces.append(text)
                if choice.get("finish_reason"):
                    out.finish_reason = choice["finish_reason"]
            usage = event.get("usage")
            if usage:
                out.prompt_tokens = usage.get("prompt_tokens", 0)
                out.completion_tokens = usage.get("completion_tokens", 0)
                details = usage.get("prompt_tokens_details") or {}
                if "cached_tokens" in details:
                    out.cached_tokens = details["cached_tokens"]
        if not done:
            out.error = "the stream ended without [DONE]"
        elif not out.completion_tokens:
            out.error = "no usage in the stream"
        else:
            out.ok = True
        return out
    except (OSError, http.client.HTTPException, json.JSONDecodeError) as e:
        out.error = f"{type(e).__name__}: {e}"
        return out
    finally:
        out.latency_s = time.perf_counter() - start
        out.text = "".join(pieces)
        conn.close()


def run(host: str, port: int, path: str, body: dict, clients: int, requests: int, timeout: float) -> Run:
    """`clients` threads start together; each sends `requests` requests in turn."""
    result = Run(clients=clients)
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def client() -> None:
        barrier.wait()
        for _ in range(requests):
            outcome = stream(host, port, path, body, timeout)
            with lock:
                result.outcomes.append(outcome)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    start, cpu = time.perf_counter(), time.process_time()
    for t in threads:
        # Each request is bounded, so is each client; the margin covers the connects.
        t.join(timeout=requests * (timeout + 5))
    result.wall_s = time.perf_counter() - start
    result.client_cpu_s = time.process_time() - cpu
    return result
