"""tools.retrieval (`make retrieval`): the fsc train command it runs for each backbone."""

from __future__ import annotations

import pytest

from tools import retrieval


def _train_args(monkeypatch, argv: list[str], job=("passkey_mamba", 1)) -> list[str]:
    seen: list[list[str]] = []
    monkeypatch.setattr(retrieval, "run_json", lambda args: seen.append(args) or
                        {"step": 1, "final_loss": 0.0})
    retrieval.train(job, retrieval.options(argv))
    [args] = seen
    return args


def _value(args: list[str], option: str) -> str:
    return args[args.index(option) + 1]


def test_make_retrieval_supervises_the_needle_by_default(monkeypatch):
    args = _train_args(monkeypatch, [])
    assert args[:2] == ["train", "passkey_mamba"]
    assert "--supervise-needle" in args
    assert _value(args, "--lr") == "0.01" and _value(args, "--train-steps") == "8000"
    assert _value(args, "--seed") == "1" and _value(args, "--out").endswith("passkey_mamba-s1")


def test_no_supervise_needle_trains_on_the_answer_alone(monkeypatch):
    assert "--supervise-needle" not in _train_args(monkeypatch, ["--no-supervise-needle"])


def test_per_recipe_values_name_every_recipe(monkeypatch):
    args = _train_args(monkeypatch, ["--train-steps", "passkey_attn=10,passkey_mamba=20,"
                                     "passkey_hybrid=30"])
    assert _value(args, "--train-steps") == "20"
    with pytest.raises(SystemExit, match="no value for passkey_hybrid"):
        retrieval.options(["--train-steps", "passkey_attn=10,passkey_mamba=20"])
