"""Fixtures of the black-box suite: the server `scripts/test-server.sh` started.

The script exports STENCIL_SERVER_URL (http://127.0.0.1:PORT), STENCIL_SERVER_KEY (its
--api-key), STENCIL_BIN (the `stencil` binary) and STENCIL_SERVER_MODEL (the GGUF file).
"""

import os

import openai
import pytest

from helpers import TIMEOUT


def env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run the suite through scripts/test-server.sh")
    return value


@pytest.fixture(scope="session")
def url():
    return env("STENCIL_SERVER_URL")


@pytest.fixture(scope="session")
def key():
    return env("STENCIL_SERVER_KEY")


@pytest.fixture(scope="session")
def client(url, key):
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, timeout=TIMEOUT, max_retries=0)
