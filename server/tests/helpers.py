"""Raw HTTP helpers of the black-box suite (urllib: status codes and headers as sent)."""

import json
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
