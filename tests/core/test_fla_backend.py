"""The fla training backend (fsc/model/fla_scan.py) equals the torch chunked forms: outputs and
gradients of every recurrent mixer's forward_blockwise and forward_two_stream, fp32, run through
fla's own Triton kernels under the CPU interpreter; a recurrence defined outside fla_scan runs
through its layouts; and the backend is chosen, or refused, as documented.

fla's kernels need two things the interpreter lacks (both patched for these tests only):
- they autotune over several configs, which benchmarks on an active driver: the first config
  that fla's own pruning keeps is taken instead;
- they call `.to(tl.int64)` on the index of a `for i in range(...)` loop, which the interpreter
  leaves a Python int: such an index is made a Triton scalar first thing in the loop body, as
  the GPU compiler has it.
"""

import ast
import importlib.util

import pytest
import torch
from model_checks import mixing_model
from triton.runtime import interpreter
from triton.runtime.autotuner import Autotuner

from fsc.errors import UsageError
from fsc.model import fla_scan
from fsc.model.layers import block_ids
from fsc.model.lm import build_model
from fsc.recipe import parse_recipe
from fsc.tokenizer import ByteTokenizer
from fsc.train.loop import TrainConfig, Trainer

# importing fla on a machine without a GPU warns that Triton falls back to the CPU, and
# torch.jit warns of fla's script methods
pytestmark = [pytest.mark.filterwarnings("ignore:Triton is not supported on current platform"),
              pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated")]
HAS_FLA = importlib.util.find_spec("fla") is not None
needs_fla = pytest.mark.skipif(not HAS_FLA, reason="fla-core is not installed (pip install 'fsc[fla]')")
RECURRENT = {"mamba": "tiny_mamba", "linear": "tiny_linear", "gla": "tiny_gla",
             "gated_delta": "tiny_gated_delta"}
REL = 1e-4
# every kind: attention stays on torch, the recurrent ones run on fla
EVERY_KIND = {"name": "every_kind", "d_model": 32, "n_layers": 5, "vocab_size": 288,
              "block_size": 4, "dtype": "fp32", "layers": {"pattern": "AMLGD"},
              "attention": {"n_heads": 2}, "mamba": {"head_dim": 32}, "linear": {"n_heads": 2},
              "gla": {"n_heads": 2}, "gated_delta": {"n_heads": 2}}


class _LoopIndexAsScalar(ast.NodeTransformer):
    """Rewrites `for i in range(...): body` to `for i in range(...): i = <Triton scalar i>; body`."""

    def __init__(self, base):
        self.base = base

    def visit(self, node):
        node = self.base.visit(node)
        for loop in ast.walk(node):
            if (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
                    and isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Name)
                    and loop.iter.func.id == "range"):
                name = loop.target.id
                scalar = ast.parse(f"{name} = interpreter_semantic.to_tensor({name}, False)").body[0]
                loop.body.insert(0, ast.copy_location(scalar, loop))
        return node


@pytest.fixture(scope="module")
def interpreted_fla():
    prune = Autotuner.prune_configs
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Autotuner, "prune_configs", lambda self, kwargs: prune(self, kwargs)[:1])
        mp.setattr(interpreter.FunctionRewriter, "ast_transformer",
                   _LoopIndexAsScalar(interpreter.FunctionRewriter.ast_transformer))
        yield


def _mixer(kind, scale=3.0):
    """Layer 0's mixer of the kind's tiny recipe, its matrices × scale (sharper gates and
    decays, larger states)."""
    return mixing_model(RECURRENT[kind], scale).layers[0].mixer


def _run(mixer, backend, form, inputs):
    """Outputs and the gradients of a fixed random projection of them, w.r.t. the inputs and
    the mixer's parameters, on `backend`."""
    mixer.backend = backend
    inputs = [t.detach().requires_grad_() if isinstance(t, torch.Tensor) and t.is_floating_point()
              else t for t in inputs]
    ys = form(*inputs)
    ys = ys if isinstance(ys, tuple) else (ys,)
    gen = torch.Generator().manual_seed(1)
    loss = sum((y * torch.randn(y.shape, generator=gen)).sum() for y in ys)
    leaves = [t for t in inputs if getattr(t, "requires_grad", False)] + list(mixer.parameters())
    return ys, torch.autograd.grad(loss, leaves)


def _rel(got, want) -> float:
    return float((got - want).detach().abs().max() / want.detach().abs().max())


def _assert_same(mixer, form_name, inputs):
    form = getattr(mixer, form_name)
    ys, grads = _run(mixer, "fla", form, inputs)
    ys_ref, grads_ref = _run(mixer, "torch", form, inputs)
    names = [n for n, _ in mixer.named_parameters()]
    for i, (y, y_ref) in enumerate(zip(ys, ys_ref, strict=True)):
        assert _rel(y, y_ref) <= REL, f"output {i}: {_rel(y, y_ref):.2e}"
    for i, (g, g_ref) in enumerate(zip(grads, grads_ref, strict=True)):
        what = names[i - (len(grads) - len(names))] if i >= len(grads) - len(names) else f"input {i}"
        assert _rel(g, g_ref) <= REL, f"gradient of {what}: {_rel(g, g_ref):.2e}"


@pytest.mark.slow
@needs_fla
@pytest.mark.parametrize("lengths", [[4] * 5, [4, 3, 4, 1, 4], [1] * 6], ids=["G4", "mixed", "G1"])
@pytest.mark.parametrize("kind", sorted(RECURRENT))
def test_fla_blockwise_equals_the_torch_form(kind, lengths, interpreted_fla):
    x = torch.randn(2, sum(lengths), 64, generator=torch.Generator().manual_seed(0))
    mixer = _mixer(kind)
    _assert_same(mixer, "forward_blockwise", [x, lengths])


@pytest.mark.slow
@needs_fla
@pytest.mark.parametrize("G", [4, 1])
@pytest.mark.parametrize("kind", sorted(RECURRENT))
def test_fla_two_stream_equals_the_torch_form(kind, G, interpreted_fla):
    """Scored blocks out of order, two at one block, and a padding block (0)."""
    nb = 5
    gen = torch.Generator().manual_seed(0)
    clean = torch.randn(2, nb * G, 64, generator=gen)
    blocks = torch.tensor([[3, 1, 3], [0, 4, 0]])
    noised = torch.randn(2, blocks.shape[1] * G, 64, generator=gen)
    _assert_same(_mixer(kind), "forward_two_stream", [clean, noised, blocks])


@pytest.mark.slow
@needs_fla
def test_a_training_step_on_fla_equals_one_on_torch(tmp_path, interpreted_fla):
    """One `blocks` step of a hybrid of every kind: the same loss and weights after it."""
    recipe = parse_recipe(EVERY_KIND)
    after = {}
    for backend in ("fla", "torch"):
        cfg = TrainConfig(source="every_kind", data="copy", seq_len=16, steps=2, batch=2,
                          out=str(tmp_path / backend), objective="blocks", train_backend=backend)
        model = build_model(recipe, seed=0)
        trainer = Trainer(cfg, recipe, model, ByteTokenizer())
        assert trainer.backend == backend
        loss, _, _ = trainer.train_step()
        after[backend] = (loss, torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert after["fla"][0] == pytest.approx(after["torch"][0], rel=REL)
    assert _rel(after["fla"][1], after["torch"][1]) <= REL


def _naive_blockwise(q, k, v, g, lengths, scale):
    """The block-bidirectional scalar-decay recurrence read off its definition, in fp64: t reads
    s ≤ t at decay e^{g_{s+1} + ⋯ + g_t} and s > t in its block at e^{g_t + ⋯ + g_{s-1}}."""
    q, k, v, g = (t.double() for t in (q, k, v, g))
    upto = g.cumsum(1).transpose(1, 2)  # (B, H, T): g_1 + ⋯ + g_t
    below = upto - g.transpose(1, 2)  # g_1 + ⋯ + g_{t-1}
    before = upto[..., :, None] - upto[..., None, :]  # (B, H, T, S): log decay t ← s, s ≤ t
    after = below[..., None, :] - below[..., :, None]  # and s > t
    ids = block_ids(lengths, "cpu")
    pos = torch.arange(len(ids))
    causal = pos[None, :] <= pos[:, None]
    later = (pos[None, :] > pos[:, None]) & (ids[None, :] == ids[:, None])
    logw = torch.where(causal, before, after).masked_fill(~(causal | later), float("-inf"))
    att = scale * torch.einsum("bthk,bshk->bhts", q, k) * logw.exp()
    return torch.einsum("bhts,bshv->bthv", att, v)


def _operands(gen, B, T, H=2, K=8, V=8):
    """q, k [B, T, H, K], v [B, T, H, V], a log decay g [B, T, H] (≤ 0), beta None."""
    q, k, v = (torch.randn(B, T, H, d, generator=gen) for d in (K, K, V))
    return q, k, v, -torch.nn.functional.softplus(torch.randn(B, T, H, generator=gen)), None


@pytest.mark.slow
@needs_fla
def test_a_recurrence_defined_outside_fla_scan_runs_through_it(interpreted_fla):
    """A fourth recurrence, on the scalar-decay kernel, counting its calls: blockwise and
    two_stream run it (one causal and one backward call each) and equal the recurrence's
    definition."""
    calls = []

    def counted(*args, **varlen):
        calls.append(bool(varlen))
        return fla_scan.SCALAR_DECAY.kernel(*args, **varlen)

    rec = fla_scan.Recurrence(counted)
    gen = torch.Generator().manual_seed(0)
    lengths = [4, 3, 4, 1, 4]
    q, k, v, g, _ = _operands(gen, 2, sum(lengths))
    o = fla_scan.blockwise(rec, q, k, v, g, lengths, 0.5)
    assert calls == [False, True]
    assert _rel(o, _naive_blockwise(q, k, v, g, lengths, 0.5)) <= REL

    G, nb = 4, 5
    blocks = torch.tensor([[3, 1, 3], [0, 4, 0]])
    clean, noised = _operands(gen, 2, nb * G), _operands(gen, 2, blocks.shape[1] * G)
    calls.clear()
    oc, on = fla_scan.two_stream(rec, clean, noised, blocks, 0.5)
    assert calls == [True, True]
    assert _rel(oc, _naive_blockwise(*clean[:4], [G] * nb, 0.5)) <= REL
    for b, row in enumerate(blocks.tolist()):
        for i, at in enumerate(row):  # noised block i: the clean blocks before `at`, then itself
            seq = [torch.cat([c[b:b + 1, :at * G], n[b:b + 1, i * G:(i + 1) * G]], 1)
                   for c, n in zip(clean[:4], noised[:4])]
            want = _naive_blockwise(*seq, [at * G] * (at > 0) + [G], 0.5)[:, -G:]
            assert _rel(on[b:b + 1, i * G:(i + 1) * G], want) <= REL, (b, i)


def test_auto_picks_fla_only_on_cuda_with_fla_installed(monkeypatch):
    assert fla_scan.train_backend("auto", "cpu") == "torch"
    assert fla_scan.train_backend("torch", "cuda") == "torch"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    assert fla_scan.train_backend("auto", "cuda") == "fla"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert fla_scan.train_backend("auto", "cuda") == "torch"


def test_fla_is_refused_without_the_package_or_off_cuda(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UsageError, match=r"needs flash-linear-attention: pip install 'fsc\[fla\]'"):
        fla_scan.train_backend("fla", "cuda")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    monkeypatch.delenv("TRITON_INTERPRET")
    with pytest.raises(UsageError, match="runs Triton kernels on CUDA; the device is cpu"):
        fla_scan.train_backend("fla", "cpu")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert fla_scan.train_backend("fla", "cpu") == "fla"


def test_the_model_keeps_attention_on_torch():
    model = build_model(parse_recipe(EVERY_KIND))
    model.set_train_backend("fla")
    assert {layer.mixer.kind: layer.mixer.backend for layer in model.layers} == {
        "attention": "torch", "mamba": "fla", "linear": "fla", "gla": "fla", "gated_delta": "fla"}


def test_fsc_train_refuses_fla_off_cuda_in_one_line(fsc_main, monkeypatch, tmp_path):
    monkeypatch.delenv("TRITON_INTERPRET")
    res = fsc_main("train", "tiny_gla", "--data", "copy", "--seq-len", "32", "--train-steps", "1",
                   "--out", tmp_path / "run", "--train-backend", "fla", "--store", tmp_path / "s")
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "--train-backend fla" in res.stderr
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())
