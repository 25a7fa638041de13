"""The mixer registry's contract, walked for every kind: the spec (fsc/mixers/<kind>.py), the
torch module (fsc/model/<kind>.py), its ops and the cost model agree. A new kind gets all of
these checks by being registered."""

import pytest
import torch
from fsc.kernels import op_folders

from fsc import ops
from fsc.costmodel import cache_bytes, param_counts
from fsc.mixers import KINDS, MIXERS
from fsc.model import MIXER_REGISTRY
from fsc.model.lm import build_model, count_params
from fsc.recipe import parse_recipe
from fsc.verify import verify


def _section(kind: str) -> dict:
    """The smallest section of `kind`: its required fields (all head counts) set to 2."""
    fields = MIXERS[kind].section.model_fields
    required = [name for name, f in fields.items() if f.is_required()]
    assert all("heads" in name for name in required), (
        f"{kind}: give the test a value for its required fields {required}")
    return {name: 2 for name in required}


def _recipe(kind: str, pattern: str | None = None, **extra):
    layers = {"pattern": pattern} if pattern else {"default": kind}
    kinds = {MIXERS[c].kind for c in pattern} if pattern else {kind}
    return parse_recipe({"name": f"contract_{kind}", "d_model": 32, "n_layers": 4,
                         "vocab_size": 64, "block_size": 4, "dtype": "fp32", "layers": layers,
                         **{k: _section(k) for k in kinds}, **extra})


@pytest.mark.parametrize("kind", KINDS)
def test_spec_and_module_agree(kind):
    spec = MIXERS[kind]
    assert MIXER_REGISTRY[kind].kind == kind and spec.kind == kind
    recipe = _recipe(kind)
    assert recipe.layer_plan == [kind] * 4 and recipe.layer_map == spec.letter * 4
    model = build_model(recipe, seed=1)
    mixer = model.layers[0].mixer
    # the model is made on the meta device and moved with `to_empty`; only parameters are then
    # drawn (`init_parameter`), so a buffer would hold whatever memory it was given
    assert not list(mixer.buffers()), (
        f"{kind}: buffers {[n for n, _ in mixer.named_buffers()]} are never initialised (the "
        "model is built on the meta device, then `to_empty`); make constants in the forward "
        "pass, or make them parameters drawn in `init_parameter`")
    # projections: the spec's (in, out) pairs are the module's nn.Linear shapes
    linears = sorted((m.in_features, m.out_features) for m in mixer.modules()
                     if isinstance(m, torch.nn.Linear))
    shape = recipe.mixer_shape(kind)
    assert linears == sorted(shape.linears), (
        f"{kind}: the spec's MixerShape.linears (fsc/mixers/{kind}.py) must list the (in, out) "
        f"of every nn.Linear of the module (fsc/model/{kind}.py)")
    assert param_counts(recipe) == count_params(model), (
        f"{kind}: the cost model's parameters differ from the module's: MixerShape.extra_params "
        "counts every parameter outside the nn.Linear weights (biases, conv, A_log, ...)")
    # cache: analytic bytes = allocated bytes = the cost model's, growing or fixed as declared
    for S in (0, 5, 17):
        cache = model.empty_cache(3, S)
        allocated = sum(t.numel() * t.element_size() for lc in cache.layers
                        for t in lc.tensors.values())
        assert model.cache_bytes(3, S) == cache_bytes(recipe, 3, S), (
            f"{kind}: MixerShape.cache (elements per sequence, (per_token, fixed)) and "
            f"cache_dtype must give the bytes of the module's cache_shapes, at S = {S}")
        assert allocated == cache_bytes(recipe, 3, S).total_bytes
    assert mixer.growing == shape.growing, (
        f"{kind}: the module's `growing` must be true exactly when a MixerShape.cache entry has "
        "a per_token count")
    assert set(shape.cache) == set(mixer.cache_shapes(1, 1)), (
        f"{kind}: MixerShape.cache must name the module's cache_shapes tensors")


@pytest.mark.parametrize("kind", KINDS)
def test_cached_equals_uncached(kind):
    rep = verify(_recipe(kind), G=4, B=2, n_blocks=3, seed=2)
    assert rep.exact and {c.kind for c in rep.checks} == {"model", kind}, (
        f"{kind}: the cached step and fold differ from forward_blockwise (the block-causal "
        f"uncached forward); `fsc verify` shows the same table: {rep.checks}")


def test_a_hybrid_of_every_kind_is_exact():
    pattern = "".join(s.letter for s in MIXERS.values())
    recipe = parse_recipe({"name": "all", "d_model": 32, "n_layers": len(pattern),
                           "vocab_size": 64, "block_size": 3, "dtype": "fp32",
                           "layers": {"pattern": pattern},
                           **{k: _section(k) for k in KINDS}})
    rep = verify(recipe, B=2, n_blocks=3, seed=3)
    assert rep.exact and {c.kind for c in rep.checks} == {"model", *KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_ops_exist_with_reference_and_kernel(kind):
    for op in MIXERS[kind].ops:
        assert op in ops.REFERENCES and ops.triton_impl(op) is not None, (
            f"{kind}: its spec names op {op!r}, which needs a folder of kernels/ with OP = "
            f"{op!r}, reference.{op}_ref (imported into fsc.ops.REFERENCES, with a function "
            f"{op} there) and triton.{op}")


def test_every_op_folder_is_complete():
    import importlib

    for op, folder in op_folders().items():
        for part in ("reference", "triton"):
            importlib.import_module(f"fsc.kernels.{folder}.{part}")
        triton_mod = importlib.import_module(f"fsc.kernels.{folder}.triton")
        assert callable(getattr(triton_mod, op)) and triton_mod.TRIALS
        if op != "block_attention":
            assert callable(importlib.import_module(f"fsc.kernels.{folder}.inputs").inputs)


def test_omitted_section_only_where_the_spec_allows_it():
    from fsc.errors import RecipeError

    for kind, spec in MIXERS.items():
        data = {"name": "x", "d_model": 32, "n_layers": 2, "vocab_size": 64,
                "layers": {"default": kind}}
        if spec.section_optional:
            assert getattr(parse_recipe(data), kind) == spec.section()
        else:
            with pytest.raises(RecipeError, match=f"no {kind} section"):
                parse_recipe(data)


def test_letters_and_tags_are_distinct():
    assert len({s.letter for s in MIXERS.values()}) == len(MIXERS)
    assert len({s.tag for s in MIXERS.values()}) == len(MIXERS)


def test_a_kind_registered_later_keeps_every_recipes_hash():
    """Every kind's section was hashed as null where a recipe has none, so registering a mixer
    changed the hash of every recipe, by which the store keys every row. A kind after
    HASHED_KINDS is left out of the hash while absent, and counts where a recipe holds it."""
    from pydantic import create_model

    from fsc.recipe import HASHED_KINDS, MlpCfg, Recipe, kind_field, load_recipe

    assert set(HASHED_KINDS) <= set(KINDS)  # the kinds of the first hashes; a new one stays out
    later = create_model("Later", __base__=Recipe, later_kind=kind_field("later_kind", MlpCfg))
    for name in ("tiny_attn", "tiny_hybrid"):
        recipe = load_recipe(name)
        same = later.model_validate(recipe.model_dump())
        assert same.recipe_hash == recipe.recipe_hash
        held = later.model_validate({**recipe.model_dump(), "later_kind": {"kind": "gelu"}})
        assert held.recipe_hash != recipe.recipe_hash


def test_only_a_mixer_that_writes_an_fla_form_trains_on_fla():
    """A fixed-state kind added later, with no fla branch of its own, trains on torch under
    `--train-backend fla` (it was taken to run on fla, and its trace would have said so); the
    four shipped ones run on fla."""
    from fsc.model.gated_delta import GatedDelta
    from fsc.model.gla import GLA
    from fsc.model.linear import LinearAttention
    from fsc.model.mamba import Mamba
    from fsc.model.mixer import FixedState

    class Retention(FixedState):
        kind = "retention"

    assert Retention.backends == ("torch",)  # (it inherited fla from FixedState)
    assert all("fla" in m.backends for m in (GatedDelta, GLA, LinearAttention, Mamba))
    from fsc.recipe import load_recipe

    model = build_model(load_recipe("tiny_hybrid"), seed=0)
    model.set_train_backend("fla")
    assert {(layer.mixer.kind, layer.mixer.backend) for layer in model.layers} == {
        ("attention", "torch"), ("mamba", "fla")}
