"""Raw HTTP helpers of the black-box suite (urllib: status codes and headers as sent)."""

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request

# Every request is bounded: no test waits on a stuck server.
TIMEOUT = 60.0


def http(url, path, body=None, key=None, timeout=TIMEOUT):
    """A raw request: (status, headers, body text)."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(url + path, data=data, method="GET" if data is None else "POST")
    request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def metric(url, name):
    """The value of an unlabelled sample of /metrics."""
    status, _, text = http(url, "/metrics")
    assert status == 200
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def own_server(*flags):
    """A server of its own on 127.0.0.1 (the suite's binary and model, one thread, `flags`
    added), healthy within 60 s; yields its URL and stops it with SIGTERM."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [os.environ["STENCIL_BIN"], "serve", "--model", os.environ["STENCIL_SERVER_MODEL"], "--host", "127.0.0.1",
         "--port", str(port), "--threads", "1", *flags],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"the server exited: {proc.stderr.read()}"
            try:
                if http(url, "/health", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the server did not become healthy within 60 s"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
