"""Fixtures of the hub tests: a fake Hub per test, the environment the real client reads,
`fsc` run as a subprocess (huggingface_hub reads its settings at import)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest
from fakehub import FakeHub
from fsc_run import new_process

RUN_TIMEOUT_S = 120


@pytest.fixture
def token() -> str:
    return "hf_fsctest_" + secrets.token_hex(16)


@pytest.fixture
def hub(token):
    with FakeHub(token) as h:
        yield h


@pytest.fixture
def hf_env(hub, token, tmp_path) -> dict[str, str]:
    """The environment of one `fsc` subprocess: the fake Hub, the token, a private HF_HOME."""
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith(("HF_", "HUGGINGFACE_", "FSC_", "HTTP_PROXY", "HTTPS_PROXY",
                                        "ALL_PROXY"))}
    env.update(HF_ENDPOINT=hub.url, HF_HUB_DISABLE_XET="1", HF_TOKEN=token,
               HF_HOME=str(tmp_path / "hf_home"), HF_HUB_DISABLE_TELEMETRY="1",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
               FSC_STORE=str(tmp_path / "store"))
    return env


@pytest.fixture
def fsc(hf_env, tmp_path):
    """fsc(*args, env=None, cwd=None) -> CompletedProcess of `python -m fsc ARGS`."""

    def run(*args, env: dict | None = None, cwd: Path | None = None):
        # a new process: huggingface_hub reads HF_ENDPOINT and HF_HOME when it is imported
        return new_process(*args, env=hf_env if env is None else env, cwd=cwd or tmp_path,
                           timeout=RUN_TIMEOUT_S)

    return run

