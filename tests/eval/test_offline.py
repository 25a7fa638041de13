"""Names that could reach the Hugging Face Hub, offline: a mistyped local path never goes to the
Hub, and a Hub id or a harness dataset the Hub would have to serve fails at once in one line
that says the Hub is out of reach, never after the clients' retries. Nothing here reaches the
network: a name lookup of anything but this machine fails (the `no_network` fixture)."""

import socket
import sys
import time

import pytest

from fsc.hub import reach

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens, a connection is refused


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Only this machine answers; the Hub clients' offline flags are restored afterwards (a
    command that finds the Hub out of reach turns them on for its process)."""
    real = socket.getaddrinfo

    def local_only(host, *args, **kw):
        if host not in ("localhost", "127.0.0.1", "::1"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", local_only)
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", constants.HF_HUB_OFFLINE)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # restored (or removed) afterwards
    monkeypatch.delenv("HF_HUB_OFFLINE")
    config = sys.modules.get("datasets.config")
    if config is not None:
        monkeypatch.setattr(config, "HF_HUB_OFFLINE", config.HF_HUB_OFFLINE)
        monkeypatch.setattr(config, "HF_DATASETS_OFFLINE", config.HF_DATASETS_OFFLINE)


def _timed(fsc_main, *args):
    t0 = time.perf_counter()
    res = fsc_main(*args)
    return res, time.perf_counter() - t0


def _one_error(res) -> str:
    lines = [line for line in res.stderr.strip().splitlines() if not line.startswith("warning:")]
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Retrying" not in res.stderr and "Traceback" not in res.stderr
    return lines[0]


@pytest.mark.parametrize("spec", ["runs/nope", "./runs/nope", "../nope/model", "~/fsc-no-such"])
def test_a_mistyped_local_scorer_never_goes_to_the_hub(fsc_main, tmp_path, ar_recipe, spec):
    (tmp_path / "runs").mkdir()  # runs/nope: its first part is a folder here, so a path
    res, seconds = _timed(fsc_main, "eval", ar_recipe, "--task", "genppl", "--data",
                          "shakespeare", "--scorer", spec, "--store", tmp_path / "st")
    assert _one_error(res) == f"error: --scorer {spec}: no such file or directory"
    assert seconds < 5


@pytest.mark.parametrize(("env", "says"), [
    ({"HF_HUB_OFFLINE": "1"}, "(HF_HUB_OFFLINE is set)"),
    ({"HF_ENDPOINT": UNREACHABLE}, f"(no connection to {UNREACHABLE}: "),
])
def test_a_hub_scorer_offline_is_one_line_at_once(fsc_main, tmp_path, ar_recipe, monkeypatch,
                                                  env, says):
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    res, seconds = _timed(fsc_main, "eval", ar_recipe, "--task", "genppl", "--data",
                          "shakespeare", "--scorer", "fsc-nobody/no-such-model",
                          "--store", tmp_path / "st")
    line = _one_error(res)
    assert line.startswith("error: --scorer fsc-nobody/no-such-model: not a local path, and "
                           "not in the Hugging Face cache; the Hub is out of reach ")
    assert says in line and seconds < 5


@pytest.mark.parametrize(("env", "says"), [
    ({"HF_HUB_OFFLINE": "1"}, "(HF_HUB_OFFLINE is set)"),
    ({"HF_ENDPOINT": UNREACHABLE}, f"(no connection to {UNREACHABLE}: "),
])
def test_training_data_from_the_hub_offline_is_one_line_at_once(fsc_main, tmp_path, monkeypatch,
                                                                env, says):
    """`fsc train --data hf:NAME` offline took the datasets client's retries (about 23 s, a
    dozen "Retrying" lines) before its line."""
    pytest.importorskip("datasets")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)  # (the tests' own: not the case)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    res, seconds = _timed(fsc_main, "train", "tiny_attn", "--data", "hf:fsc-nobody/no-such-data",
                          "--seq-len", "32", "--train-steps", "2", "--batch", "2",
                          "--out", tmp_path / "run", "--store", tmp_path / "st")
    line = _one_error(res)
    assert line.startswith("error: --data hf:fsc-nobody/no-such-data: not a local folder, and "
                           "not in the Hugging Face cache; the Hub is out of reach ")
    assert says in line and seconds < 5


def test_looks_local(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    for spec in ("runs", "runs/nope", "./x", "../x", "/x/y", "~/x", "."):
        assert reach.looks_local(spec), spec
    for spec in ("gpt2", "openai-community/gpt2", "fsc-nobody/runs"):
        assert not reach.looks_local(spec), spec


def test_a_harness_dataset_offline_is_one_line_at_once(fsc_main, tmp_path, ar_recipe,
                                                       monkeypatch):
    """No offline variable set (as a user's shell would have none): the Hub is found out of
    reach once, and the datasets come from the cache at once."""
    pytest.importorskip("lm_eval")
    from harness_tasks import write_tasks

    tasks = write_tasks(tmp_path / "tasks", missing=True)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", UNREACHABLE)
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
    res, seconds = _timed(fsc_main, "eval", ar_recipe, "--task", "harness", "--tasks",
                          "fsc_missing", "--include-path", tasks, "--store", tmp_path / "st")
    line = _one_error(res)
    assert line.startswith("error: the harness could not run fsc_missing: ")
    assert f"the Hub is out of reach: no connection to {UNREACHABLE}: " in line
    assert seconds < 5
