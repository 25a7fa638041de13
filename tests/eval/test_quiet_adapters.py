"""The adapters at the edge keep third-party noise off fsc's stderr: a transformers scorer
loads with `dtype=` (no deprecation note) and transformers' logging and progress bars off;
MAUVE's clustering warnings (faiss writes them from C++) never reach the terminal."""

import os
import sys
import types


def test_a_transformers_scorer_loads_quietly(monkeypatch):
    calls = {}

    class Loaded:
        def to(self, device):
            return self

        def eval(self):
            return self

    def model_from(spec, **kw):
        calls["model"] = kw
        return Loaded()

    fake = types.SimpleNamespace(
        AutoTokenizer=types.SimpleNamespace(from_pretrained=lambda spec: [0, 1, 2]),
        AutoModelForCausalLM=types.SimpleNamespace(from_pretrained=model_from),
        logging=types.SimpleNamespace(
            set_verbosity_error=lambda: calls.setdefault("verbosity", "error"),
            disable_progress_bar=lambda: calls.setdefault("progress", "off")))
    monkeypatch.setitem(sys.modules, "transformers", fake)
    from fsc.eval import scorers

    monkeypatch.setattr(scorers, "_HFText", lambda t: t)  # no tokenizer to read
    scorers.TransformersScorer("some/model", "cpu")
    assert "torch_dtype" not in calls["model"] and "dtype" in calls["model"]
    assert calls["verbosity"] == "error" and calls["progress"] == "off"


def test_mauve_clustering_warnings_stay_off_stderr(capfd):
    from fsc.eval.mauve import _quiet_stderr

    with _quiet_stderr():
        os.write(2, b"WARNING clustering 8 points to 2 centroids\n")  # as C++ writes it
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"
