"""An eval run's time, as `fsc runs` shows it, is its work's: loading the model scored is part
of it (a loss eval's load is most of its seconds)."""

import json
import time

import pytest

from fsc.store import Store


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_an_eval_runs_time_holds_loading_its_model(fsc_main, tmp_path, monkeypatch):
    from fsc.scale import evaluation

    real = evaluation.model_to_score

    def slow_load(*a, **k):  # a load of a second and a half
        time.sleep(1.5)
        return real(*a, **k)

    monkeypatch.setattr(evaluation, "model_to_score", slow_load)
    store = tmp_path / "store"
    fsc_main("eval", "tiny_attn", "--task", "loss", "--data", "shakespeare", "--lengths", "64",
             "--samples", "1", "--store", store, check=0)
    _, [(seconds,)] = Store(store).query(
        "select epoch(ended_at) - epoch(started_at) from runs where kind = 'eval'")
    assert seconds >= 1.5
    shown = fsc_main("runs", "--store", store, "--json", check=0)
    [run] = [r for r in json.loads(shown.stdout) if r["kind"] == "eval"]
    assert run["duration_s"] >= 1.5
