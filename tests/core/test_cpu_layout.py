"""fsc.model.cpu_layout: inference loads store linear weights by columns on the CPU; values,
shapes and saved files are unchanged, every pass of the converted model agrees with the others,
and training keeps the row layout."""

import hashlib

import torch

from fsc.checkpoint.io import load_checkpoint, save_checkpoint
from fsc.decode import DecodeConfig, generate
from fsc.loading import load_model
from fsc.model.cpu_layout import by_columns
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.tokenizer import ByteTokenizer


def _by_columns(t: torch.Tensor) -> bool:
    return t.dim() == 2 and t.stride() == (1, t.shape[0])


def _files(d):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in d.iterdir()}


def test_a_one_token_load_stores_projections_by_columns_and_saves_the_same_files(tmp_path):
    model = build_model(load_recipe("tiny_hybrid"), seed=1)
    save_checkpoint(model, tmp_path / "a")
    _, plain = load_model(tmp_path / "a")  # passes of many tokens: rows
    assert not any(_by_columns(m.weight) for m in plain.modules() if isinstance(m, torch.nn.Linear))
    _, loaded = load_model(tmp_path / "a", one_token_steps=True)
    linears = [m.weight for m in loaded.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(_by_columns(w) for w in linears)
    assert _by_columns(loaded.embed.weight) == (loaded.lm_head is None)  # tied: it is the head
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    save_checkpoint(loaded, tmp_path / "b")
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    _, trained = load_checkpoint(tmp_path / "a")  # the training path keeps rows
    assert not any(_by_columns(m.weight) for m in trained.modules() if isinstance(m, torch.nn.Linear))


@torch.no_grad()
def test_the_converted_model_agrees_with_itself_and_nearly_with_the_rows():
    rows = build_model(load_recipe("tiny_attn"), seed=3).eval()
    cols = by_columns(build_model(load_recipe("tiny_attn"), seed=3).eval())
    x = torch.randint(0, 256, (2, 24), generator=torch.Generator().manual_seed(0))
    blocks = [4] * 6
    torch.testing.assert_close(cols.forward_blockwise(x, blocks), rows.forward_blockwise(x, blocks),
                               rtol=1e-5, atol=1e-5)
    tok = ByteTokenizer()
    prompt = [tok.bos_id] + tok.encode("Hi there")
    for mode in ("ar", "diffusion"):
        runs = [generate(cols, tok, prompt, DecodeConfig(length=12, G=4, steps=2, mode=mode,
                                                         use_cache=c)) for c in (True, False)]
        assert runs[0].token_ids == runs[1].token_ids  # cached against the uncached reference


def test_by_columns_is_idempotent_and_leaves_other_devices_alone():
    model = by_columns(build_model(load_recipe("tiny_mamba"), seed=0))
    ptrs = [p.data_ptr() for p in model.parameters()]
    by_columns(model)
    assert [p.data_ptr() for p in model.parameters()] == ptrs
    meta = by_columns(build_model(load_recipe("tiny_mamba"), device="meta"))
    assert not any(_by_columns(m.weight) for m in meta.modules() if isinstance(m, torch.nn.Linear))
