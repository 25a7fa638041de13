"""fsc.graphs: when a step is captured anew and when it is replayed. A CUDA graph needs a GPU
(tests/gpu checks the real one); here a stand-in 'graph' recomputes the captured function into
the same output tensor on each replay, as a real replay overwrites its output, and refuses a
read of a tensor on the host while it captures."""

import pytest
import torch
from model_checks import decode_tiny as _gen

from fsc import graphs
from fsc.decode import DecodeConfig, engine
from fsc.errors import UsageError
from fsc.graphs import GraphedStep
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


class _Replay:
    def __init__(self, fn, out):
        self.fn, self.out = fn, out

    def replay(self):
        out = self.fn()
        if self.out is not None:
            self.out.copy_(out)


def fake_capture(fn, warm=True):
    """The stand-in capture: `fn` run once (as a capture's warm-up runs it), refusing what a
    CUDA graph cannot hold: a read of a tensor on the host while it runs (a sync the GPU would
    wait on, or a capture error)."""
    def refuse(*a, **k):
        raise AssertionError("a captured step read a tensor on the host")

    with pytest.MonkeyPatch.context() as mp:
        for name in ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__",
                     "__index__"):
            mp.setattr(torch.Tensor, name, refuse)
        out = fn()
    out = None if out is None else out.clone()
    return _Replay(fn, out), out


@torch.no_grad()
def test_a_step_is_captured_once_per_cache_length_and_replayed_exactly(monkeypatch):
    monkeypatch.setattr(graphs, "capture", fake_capture)
    model = build_model(load_recipe("tiny_hybrid"), seed=1).eval()
    cache = model.synthetic_cache(1, 20, seed=2, capacity=40, block_size=4)
    step = GraphedStep(model)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):  # K steps of one block: new tokens, one capture
        tokens = torch.randint(0, 256, (1, 4), generator=gen)
        got = step(tokens, cache).clone()
        assert torch.equal(got, model(tokens, cache))
    assert (step.captures, step.replays) == (1, 3)
    model.fold(tokens, cache)  # the cache's length changes: captured again
    tokens = torch.randint(0, 256, (1, 4), generator=gen)
    assert torch.equal(step(tokens, cache), model(tokens, cache))
    assert step.captures == 2
    other = model.synthetic_cache(1, cache.length, seed=3, capacity=40, block_size=4)
    assert torch.equal(step(tokens, other), model(tokens, other))  # same length, another cache
    assert step.captures == 3
    assert torch.equal(step(tokens[:, :3], other), model(tokens[:, :3], other))  # a short block
    assert step.captures == 4


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_gla", "tiny_mamba"])
def test_decoding_through_graphs_gives_the_same_tokens(name, monkeypatch):
    eager = _gen(name, temperature=0.0, length=13, G=4, steps=3)
    monkeypatch.setattr(engine, "graphs_usable", lambda device: True)
    monkeypatch.setattr(graphs, "capture", fake_capture)
    graphed = _gen(name, temperature=0.0, length=13, G=4, steps=3)
    assert graphed.token_ids == eager.token_ids
    assert graphed.stats["graphs"] and not eager.stats["graphs"]
    assert graphed.stats["forward_passes"] == eager.stats["forward_passes"]


@pytest.mark.parametrize("name, captures", [
    # fixed states, and attention made static: one step capture, one for the short last
    # block, one of the fold
    ("tiny_mamba", 3), ("tiny_gla", 3), ("tiny_attn", 3), ("tiny_hybrid", 3),
    ("passkey_hybrid_swa", 4)])  # a window's ring: a step capture a block, eager folds
def test_a_length_free_model_captures_once_for_every_block(name, captures, monkeypatch):
    made = []

    def counting(fn, warm=True):
        made.append(fn)
        return fake_capture(fn, warm)

    eager = _gen(name, temperature=0.0, length=14, G=4, steps=3)  # blocks of 4, 4, 4 and 2
    monkeypatch.setattr(engine, "graphs_usable", lambda device: True)
    monkeypatch.setattr(graphs, "capture", counting)
    graphed = _gen(name, temperature=0.0, length=14, G=4, steps=3)
    assert graphed.token_ids == eager.token_ids and len(made) == captures
    model = build_model(load_recipe(name), seed=1).eval()
    cache = model.synthetic_cache(1, 8, seed=2, capacity=40, block_size=4)
    assert graphs.length_free(model, cache) == (name in ("tiny_mamba", "tiny_gla"))
    graphs.make_static(model, cache)  # attention reads its length on the device
    assert graphs.length_free(model, cache) == (name != "passkey_hybrid_swa")
    monkeypatch.setattr(graphs, "STATIC_MAX", 39)  # a cache longer than that stays as it is
    cache = model.synthetic_cache(1, 8, seed=2, capacity=40, block_size=4)
    graphs.make_static(model, cache)
    assert graphs.length_free(model, cache) == (name in ("tiny_mamba", "tiny_gla"))


def test_a_fixed_state_step_is_captured_once_across_folds(monkeypatch):
    """One capture across folds. (The stand-in recomputes the step at each replay, so the
    values here cannot tell a stale graph from a live one: that the replay reads the state the
    folds wrote in place is tests/gpu's check, on a real graph.)"""
    monkeypatch.setattr(graphs, "capture", fake_capture)
    model = build_model(load_recipe("tiny_mamba"), seed=1).eval()
    cache = model.synthetic_cache(1, 8, seed=2, capacity=40, block_size=4)
    step, gen = GraphedStep(model), torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _ in range(3):
            tokens = torch.randint(0, 256, (1, 4), generator=gen)
            assert torch.equal(step(tokens, cache).clone(), model(tokens, cache))
            model.fold(tokens, cache)
    assert step.captures == 1 and step.replays == 3


@pytest.mark.parametrize("mode", ["diffusion", "ar"])
def test_a_fixed_state_models_folds_replay_one_capture(mode, monkeypatch):
    """The fold of a length-free model is captured once (per block shape) and replayed: the
    same tokens as eager, the cache's lengths advanced by each replay, and the cache as the
    eager folds leave it (the capture's own warm-up fold undone)."""
    made = []

    def counting(fn, warm=True):
        made.append(fn)
        return fake_capture(fn, warm)

    eager = _gen("tiny_mamba", temperature=0.0, length=10, G=4, steps=2, mode=mode)
    monkeypatch.setattr(engine, "graphs_usable", lambda device: True)
    monkeypatch.setattr(graphs, "capture", counting)
    graphed = _gen("tiny_mamba", temperature=0.0, length=10, G=4, steps=2, mode=mode)
    assert graphed.token_ids == eager.token_ids and graphed.stats["graphs"]
    # diffusion: blocks 4, 4, 2, two folds of 4 (one capture) and two step shapes; AR: nine
    # folds of one token, one capture
    assert len(made) == (3 if mode == "diffusion" else 1)
    model = build_model(load_recipe("tiny_mamba"), seed=1).eval()
    ref = model.synthetic_cache(1, 8, seed=2, capacity=40, block_size=4)
    cache = model.synthetic_cache(1, 8, seed=2, capacity=40, block_size=4)
    fold, gen = graphs.GraphedFold(model), torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _ in range(3):
            tokens = torch.randint(0, 256, (1, 4), generator=gen)
            assert torch.equal(fold(tokens, cache).clone(), model.fold(tokens, ref))
            assert cache.length == ref.length and [c.length for c in cache.layers] == [
                c.length for c in ref.layers]
            for c, r in zip(cache.layers, ref.layers):
                assert all(torch.equal(c.tensors[k], r.tensors[k]) for k in r.tensors)
    assert (fold.captures, fold.replays) == (1, 3)


def test_graphs_where_a_capture_is_replayed(monkeypatch):
    made = []

    def counting(fn, warm=True):
        made.append(fn)
        return fake_capture(fn, warm)

    monkeypatch.setattr(engine, "graphs_usable", lambda device: True)
    monkeypatch.setattr(graphs, "capture", counting)
    # K 1, attention made static: one capture of the step serves every block, and one of the
    # fold; AR: each token's fold
    assert _gen("tiny_attn", length=8, G=4, steps=1).stats["graphs"] and len(made) == 2
    assert _gen("tiny_attn", length=8, mode="ar").stats["graphs"] and len(made) == 3
    # K 1 where a step would be captured anew each block (a window's ring): it is not
    assert not _gen("passkey_hybrid_swa", length=8, G=4, steps=1).stats["graphs"]
    assert len(made) == 3
    # a sliding window's ring moves with the length: its folds stay eager, its steps a
    # capture a block
    assert not _gen("passkey_hybrid_swa", length=8, mode="ar").stats["graphs"]
    assert not _gen("tiny_attn", length=8, steps=2, graphs=False).stats["graphs"]
    assert not _gen("tiny_attn", length=8, steps=2, use_cache=False).stats["graphs"]
    assert not graphs.usable("cpu")
    # MoE layers too (a decode-sized pass off the CPU runs its experts densely: no host sync)
    assert _gen("tiny_hybrid", length=8, steps=2).stats["graphs"]


def test_a_capture_that_fails_is_one_clear_line(monkeypatch):
    class Refusing:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nmore")

        def __exit__(self, *a):
            return False

    monkeypatch.setattr(torch.cuda, "graph", Refusing)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: None)
    with pytest.raises(UsageError) as e:
        graphs.capture(lambda: None, warm=False)
    assert str(e.value) == ("this step cannot be replayed from a CUDA graph (CUDA error: operation "
                            "not permitted when stream is capturing); run with --no-graphs")


@pytest.mark.parametrize(("name", "asked", "captured"), [
    ("tiny_attn", True, 2), ("tiny_attn", False, 0), ("tiny_hybrid", True, 2)])
def test_profile_times_the_step_and_the_fold_replayed_where_it_can(name, asked, captured,
                                                                  monkeypatch):
    from fsc import profile
    from fsc.sweep import SweepConfig

    made = []

    def counting(fn, warm=True):
        graph, out = fake_capture(fn, warm)
        made.append(graph)
        return graph, out

    monkeypatch.setattr(graphs, "usable", lambda device: True)
    monkeypatch.setattr(graphs, "capture", counting)
    model = build_model(load_recipe(name), seed=0).eval()
    cfg = SweepConfig(recipes=[name], S=[32], B=[1], repeats=2, warmup=1, graphs=asked)
    row = profile.measure_point(model, model.recipe, 32, 1, 4, 4, cfg)
    assert len(made) == captured  # the step and the rewound fold
    assert row["step_ms"] > 0 and row["fold_ms"] > 0 and len(row["samples"]["step"]) == 2


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_hybrid", "passkey_attn_nope"])
@torch.no_grad()
def test_static_attention_is_the_attention_at_every_length(name):
    """Attention's static form (the whole cache, masked at a length held on the device) gives
    the step and the fold of the usual form, over folds of several blocks, and the same KV."""
    model = build_model(load_recipe(name), seed=1).eval()
    ref = model.synthetic_cache(2, 9, seed=2, capacity=40, block_size=4)
    cache = model.synthetic_cache(2, 9, seed=2, capacity=40, block_size=4)
    graphs.make_static(model, cache)
    gen = torch.Generator().manual_seed(0)
    for g in (4, 4, 3, 1):
        tokens = torch.randint(0, 256, (2, g), generator=gen)
        torch.testing.assert_close(model(tokens, cache), model(tokens, ref), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(model.fold(tokens, cache), model.fold(tokens, ref), atol=1e-5,
                                   rtol=1e-5)
    for c, r in zip(cache.layers, ref.layers):
        assert c.length == r.length == 9 + 12
        if c.kind == "attention":
            assert int(c.at) == c.length
            torch.testing.assert_close(c.tensors["k"][:, : c.length], r.tensors["k"][:, : r.length])


def test_a_ragged_batch_decodes_through_static_attention_as_alone(monkeypatch):
    from tests.core.test_decode_batch import TEXTS, _model

    m = _model("tiny_hybrid")
    prompts = [TOK.encode(t) for t in TEXTS]
    for mode in ("diffusion", "ar"):
        cfg = DecodeConfig(length=9, G=4, steps=2, mode=mode)
        eager = [engine.generate(m, TOK, p, cfg).token_ids for p in prompts]
        with monkeypatch.context() as mp:
            mp.setattr(engine, "graphs_usable", lambda device: True)
            mp.setattr(graphs, "capture", fake_capture)
            together = engine.generate_batch(m, TOK, prompts, cfg, batch=5)
        assert [r.token_ids for r in together] == eager and together[0].stats["graphs"]


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_mamba", "tiny_gla", "tiny_gated_delta",
                                  "passkey_hybrid_swa"])
@pytest.mark.parametrize("hot", [
    {"temperature": 0.0},
    {"temperature": 0.0, "policy": "margin", "threshold": 0.5},
    {"temperature": 1.0, "top_p": 0.9, "policy": "random"},
    {"temperature": 0.8, "policy": "entropy", "threshold": 0.3},
    {"temperature": 0.7, "repetition_penalty": 1.5}])  # the seen ids: marked outside, in place
def test_a_whole_step_replayed_decodes_the_eager_tokens(name, hot, monkeypatch):
    """With the pick on the device, a step's forward pass, pick and reveal are captured
    together (fsc.decode.denoise.Steps): the same tokens as eager, greedy or sampled (the draws made
    outside the capture, as the eager step makes them), with a threshold too; nothing in the
    captured step reads a tensor on the host; one capture of the step per block shape where
    the model is length-free (attention made static), one a block where it is not (a window)."""
    made = []

    def counting(fn, warm=True):
        made.append(fn)
        return fake_capture(fn, warm)

    # blocks 4, 4, 4, 2 (seed 2: no case draws EOS before its third block, which would leave
    # one block shape)
    kw = {"length": 14, "G": 4, "steps": 3, "sampler": "device", "seed": 2, **hot}
    eager = _gen(name, **kw)
    monkeypatch.setattr(engine, "graphs_usable", lambda device: True)
    monkeypatch.setattr(graphs, "capture", counting)
    graphed = _gen(name, **kw)
    assert graphed.token_ids == eager.token_ids and graphed.stats["graphs"]
    assert graphed.stats["steps_used"] == eager.stats["steps_used"]
    assert graphed.stats["forward_passes"] == eager.stats["forward_passes"]
    steps = [f for f in made if "Steps" in f.__qualname__]
    sizes = [min(4, 14 - start) for start in range(0, len(graphed.token_ids), 4)]
    assert len(steps) == (len(sizes) if name == "passkey_hybrid_swa" else len(set(sizes)))
    assert len(steps) >= 2


def test_the_stand_in_refuses_a_host_read():
    with pytest.raises(AssertionError, match="on the host"):
        fake_capture(lambda: torch.ones(2).sum() * int(torch.ones(()).sum()))


def _addresses(cache):
    """Where each of a cache's tensors lives: (layer, name) -> data_ptr, the length tensors too."""
    held = {(i, k): t.data_ptr() for i, c in enumerate(cache.layers) for k, t in c.tensors.items()}
    return held | {(i, "at"): c.at.data_ptr() for i, c in enumerate(cache.layers)
                   if c.at is not None}


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_mamba", "tiny_linear", "tiny_gla",
                                  "tiny_gated_delta", "tiny_hybrid"])
@pytest.mark.parametrize("G", [4, 1])
def test_a_fold_and_a_step_write_the_cache_where_it_is(name, G):
    """A CUDA graph replays its kernels on the addresses it captured: a fold (every block's,
    one capture) must write each layer's state and keys, and the device length, into the
    tensors the cache already holds, never into new ones (the stand-in replay above calls the
    function again, so it would not see a tensor replaced). A step writes no cache at all."""
    model = build_model(load_recipe(name), seed=1).eval()
    cache = model.empty_cache(2, 40, "cpu", block_size=G)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        model.fold_blocks(torch.randint(0, 256, (2, 2 * G), generator=gen), cache)
        assert graphs.make_static(model, cache) and graphs.length_free(model, cache)
        where = _addresses(cache)
        for _ in range(3):
            tokens = torch.randint(0, 256, (2, G), generator=gen)
            before = [{k: t.clone() for k, t in c.tensors.items()} for c in cache.layers]
            model(tokens, cache)
            assert all(torch.equal(t, was[k]) for c, was in zip(cache.layers, before)
                       for k, t in c.tensors.items())
            model.fold(tokens, cache)
            assert _addresses(cache) == where
    assert [int(c.at) for c in cache.layers if c.at is not None] == [
        c.length for c in cache.layers if c.at is not None] and cache.length == 5 * G
