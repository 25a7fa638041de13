"""tools/retrieval_probe.py: a checkpoint's passkey retrieval with its attention layers changed
at evaluation time (a window, a softmax temperature), by length and depth."""

import torch

from fsc.checkpoint.io import save_checkpoint
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from tools.retrieval_probe import probe


def test_the_probe_scores_a_checkpoint_with_its_attention_changed(tmp_path):
    save_checkpoint(build_model(load_recipe("passkey_hybrid"), seed=0), tmp_path / "ck", seed=0)
    torch.manual_seed(0)
    for window, scale in ((None, 1.0), (4, 1.0), (None, 0.5)):
        got = probe(str(tmp_path / "ck"), [128], window, scale, samples=1)
        assert list(got) == [128] and len(got[128]) == 5
        assert all(0.0 <= x <= 1.0 for x in got[128])
