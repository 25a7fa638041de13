"""Test-wide setup. The Triton interpreter switch is read when kernels are decorated, so it is
set here, before anything imports fsc.kernels: on (TRITON_INTERPRET=1, unless the caller set
it), except in a run that selects the gpu tests on a CUDA machine (`pytest -m gpu tests/gpu`),
which compiles them for the GPU. A gpu run that cannot run them (no CUDA, or the interpreter
on) stops with one line rather than skip every one of them."""

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

CALLER_INTERPRET = os.environ.get("TRITON_INTERPRET")  # None: the tests decide (pytest_configure)
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.pop("FSC_KERNEL_TUNING", None)  # tests see the kernels' own defaults
os.environ.setdefault("FSC_STORE", os.path.join(os.path.dirname(__file__), ".store-unused"))
# The harness's datasets library reads this when it is imported: tests never download, and a
# dataset that is not local fails at once instead of after network retries.
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import torch  # noqa: E402

torch.set_num_threads(1)  # see fsc.cli.common.torch_threads

import pytest  # noqa: E402
from fsc_run import in_process, new_process  # noqa: E402
from gpu_run import refusal, selects_gpu  # noqa: E402


def pytest_configure(config):
    """A run of the gpu tests (-m gpu) on a CUDA machine compiles the kernels for the GPU: the
    switch is set again here, before collection imports any test module (and fsc.kernels),
    unless the caller set it; a gpu run that cannot run its tests stops in one line."""
    cuda = torch.cuda.is_available()
    if (selects_gpu(config.option.markexpr) and cuda and CALLER_INTERPRET is None
            and "fsc.kernels" not in sys.modules):
        os.environ["TRITON_INTERPRET"] = "0"
        os.environ["FSC_GPU_TESTS"] = "1"  # tests/kernels/conftest.py leaves the switch as it is
    why = refusal(config.option.markexpr, cuda, os.environ.get("TRITON_INTERPRET"))
    if why is not None:
        raise pytest.UsageError(why)


@pytest.fixture(autouse=True)
def _stop_handlers():
    """Each test leaves the stop signals' handlers as it found them: the console script run
    in this process (fsc.cli.main.run) ignores them once its command has ended, which would
    leave a later test's SIGTERM ignored."""
    import signal

    from fsc.interrupts import STOP_SIGNALS

    saved = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    yield
    for s, handler in saved.items():
        if signal.getsignal(s) is not handler:
            signal.signal(s, handler)


@pytest.fixture
def run_fsc(tmp_path):
    """run_fsc(*args, env=None, cwd=None, check=None, timeout=300): `python -m fsc ARGS` in a
    new process, the real boundary (exit status, a fresh interpreter). It costs ~3 s of
    imports: use `fsc_main` unless the process itself is what the test checks."""

    def run(*args, cwd=None, **kw):
        return new_process(*args, cwd=cwd or tmp_path, **kw)

    return run


@pytest.fixture
def fsc_main(tmp_path, monkeypatch):
    """fsc_main(*args, check=None): fsc ARGS in this process, through the same error boundary,
    run in tmp_path; returns what run_fsc does (returncode, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FSC_DEBUG", raising=False)
    return in_process


@pytest.fixture
def snapshot():
    """snapshot(dir): sha256 of every file in a directory, to show a command changed nothing."""

    def take(folder: Path) -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(folder.iterdir())}

    return take


@pytest.fixture
def save_tiny(tmp_path):
    """save_tiny(name, **save_checkpoint kwargs) -> directory of a seeded tiny_hybrid checkpoint."""
    from fsc.checkpoint.io import save_checkpoint
    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe

    def save(name: str = "ckpt", seed: int = 1, **kwargs) -> Path:
        path = tmp_path / name
        model = build_model(load_recipe("tiny_hybrid"), seed=seed)
        save_checkpoint(model, path, seed=seed, **kwargs)
        return path

    return save


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys, monkeypatch):
    """cli(*args): fsc ARGS in this process through the real error boundary
    (fsc.cli.main.main), without FSC_DEBUG; returns Result(code, out, err)."""
    from fsc.cli.main import main

    monkeypatch.delenv("FSC_DEBUG", raising=False)

    def run(*args) -> Result:
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run
