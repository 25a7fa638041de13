"""Position encoding per attention layer: `attention.position: rope | none`.

NoPE must keep every contract RoPE keeps (cached equals uncached, fold equals step), must really
drop the rotation (a peer attention written here without it agrees, the RoPE model does not), and
must leave recipes that do not name it as they were: same hash, same seeded weights.
"""

import json

import pytest
import torch
from model_checks import blockwise, mixing_model, peer_attention

from fsc.checkpoint.card import model_card
from fsc.model.lm import build_model
from fsc.recipe import load_recipe, parse_recipe, shipped_recipes

# The hashes of the shipped recipes when `position` was added: a recipe that does not use a new
# key keeps its hash (runs in every store are keyed by it).
SHIPPED_HASHES = {
    "attn_3b": "ef57a93537018d96", "attn_7b": "04f1edb0cd81cad6",
    "gated_delta_3b": "6709bf59d750fe55", "hybrid_24_8": "af71a6688c26f91a",
    "hybrid_3b": "09f41ee092ce66b5", "linear_24_8": "27184b03c92f7501",
    "mamba_3b": "8d48909f749a7c9a", "mamba_7b": "92492c691991f71f",
    "tiny_attn": "3afb22039f047274", "tiny_gated_delta": "cda8cf05e901773f",
    "tiny_gla": "4925528af30dd356", "tiny_hybrid": "7c43d94e3507e738",
    "tiny_linear": "467c71c773274306", "tiny_mamba": "caad8a65f2af8b1f",
}


def _with_position(name: str, position: str | None):
    data = load_recipe(name).model_dump(mode="json", exclude_none=True)
    data["attention"].pop("position")
    if position is not None:
        data["attention"]["position"] = position
    return parse_recipe(data)


def test_shipped_recipes_keep_their_hashes():
    got = {name: load_recipe(path).recipe_hash for name, path in shipped_recipes().items()
           if name in SHIPPED_HASHES}
    assert got == SHIPPED_HASHES


def test_rope_by_default_and_in_the_hash_only_when_changed():
    default, rope, nope = (_with_position("tiny_hybrid", p) for p in (None, "rope", "none"))
    assert default.attention.position == "rope"
    assert default.recipe_hash == rope.recipe_hash == SHIPPED_HASHES["tiny_hybrid"]
    assert nope.recipe_hash != rope.recipe_hash
    assert nope.position_encoding == "none (NoPE)"
    assert rope.position_encoding == "RoPE, theta 10000"
    assert load_recipe("tiny_mamba").position_encoding is None


def test_nope_changes_no_seeded_weight():
    rope = build_model(_with_position("tiny_hybrid", "rope"), seed=7).state_dict()
    nope = build_model(_with_position("tiny_hybrid", "none"), seed=7).state_dict()
    assert rope.keys() == nope.keys()
    assert all(torch.equal(rope[k], nope[k]) for k in rope)


def test_nope_allows_an_odd_head_dim():
    base = {"name": "t", "d_model": 63, "n_layers": 1, "vocab_size": 300,
            "layers": {"default": "attention"}, "attention": {"n_heads": 9}}
    r = parse_recipe({**base, "attention": {"n_heads": 9, "position": "none"}})
    assert r.attention.position == "none"


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_hybrid"])
@pytest.mark.parametrize("G", [1, 4])
@torch.no_grad()
def test_nope_cached_equals_blockwise(name, G):
    m = mixing_model(_with_position(name, "none").model_copy(update={"block_size": G}))
    tokens, ref, cache, spans = blockwise(m, G, 280)
    for span in spans:
        blk = tokens[:, span]
        step = m(blk, cache)
        torch.testing.assert_close(step, ref[:, span], rtol=0, atol=1e-5)
        torch.testing.assert_close(m.fold(blk, cache), step, rtol=0, atol=1e-5)


@torch.no_grad()
def test_nope_attention_equals_a_peer_without_rotation():
    lengths = [4, 4, 3, 4]
    x = torch.randn(2, sum(lengths), 64, generator=torch.Generator().manual_seed(1))
    nope = mixing_model(_with_position("tiny_attn", "none")).layers[0].mixer
    rope = mixing_model(_with_position("tiny_attn", "rope")).layers[0].mixer
    peer = peer_attention(nope, x, lengths)
    torch.testing.assert_close(nope.forward_blockwise(x, lengths), peer, rtol=1e-5, atol=1e-5)
    cache, start = nope.empty_cache(2, sum(lengths), "cpu"), 0
    for g in lengths:
        torch.testing.assert_close(nope.fold(x[:, start : start + g], cache),
                                   peer[:, start : start + g], rtol=1e-5, atol=1e-5)
        start += g
    # the same weights with RoPE differ from the peer: the option reaches the computation
    assert (rope.forward_blockwise(x, lengths) - peer).abs().max() > 1e-2


def test_build_and_card_show_the_choice(cli, tmp_path):
    p = tmp_path / "nope.yaml"
    p.write_text(_with_position("tiny_hybrid", "none").to_yaml())
    res = cli("build", p, "--json")
    assert res.code == 0 and json.loads(res.out)["position_encoding"] == "none (NoPE)"
    res = cli("build", p)
    assert "attention position encoding  none (NoPE)" in res.out
    facts = {"kv_bytes_per_token": 1, "state_bytes_per_sequence": 1, "params_by_kind": {},
             "n_params": 1, "weight_bytes": 4, "weight_files": ["model.safetensors"], "seed": 0}
    card = model_card(_with_position("tiny_hybrid", "none"), facts)
    assert "| attention position encoding | none (NoPE) |" in card
    assert "| attention position encoding | RoPE, theta 10000 |" in model_card(
        load_recipe("tiny_attn"), facts)


def test_verify_is_exact_for_nope(cli, tmp_path):
    p = tmp_path / "nope.yaml"
    p.write_text(_with_position("tiny_hybrid", "none").to_yaml())
    res = cli("verify", p, "--json")
    assert res.code == 0, res.err
    assert json.loads(res.out)["exact"] is True


def test_build_says_how_rope_is_scaled_and_how_much_of_a_head_it_turns(cli):
    r = cli("build", "published/Llama-3.1-8B")
    assert r.code == 0 and ("RoPE, theta 500000, llama3 scaling ×8 (original context 8,192)"
                            in " ".join(r.out.split())), r.out  # whatever the terminal's width
    r = cli("build", "published/Bamba-9B")
    assert r.code == 0 and ("RoPE, theta 10000, on 64 of each head's 128 dims"
                            in " ".join(r.out.split())), r.out


def test_a_linear_rope_scaling_holds_no_llama3_bands():
    """linear scaling divides every frequency: llama3's bands are not in use, so neither in
    the recipe's YAML nor in its hash; given, they are refused (they were ignored)."""
    from fsc.errors import RecipeError
    from fsc.recipe import load_recipe, parse_recipe

    data = load_recipe("tiny_attn").hashed_fields()
    data["attention"]["rope_scaling"] = {"kind": "linear", "factor": 2.0}
    plain = parse_recipe(data, "a")
    assert "low_freq_factor" not in plain.to_yaml() and "original_context" not in plain.to_yaml()
    data["attention"]["rope_scaling"] |= {"low_freq_factor": 2.0, "original_context": 64}
    with pytest.raises(RecipeError, match="low_freq_factor: is llama3's"):
        parse_recipe(data, "a")
