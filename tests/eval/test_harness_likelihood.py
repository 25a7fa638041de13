"""The likelihoods the harness asks for, on fsc alone (no lm-eval needed): exact and batched at
G = 1, the diffusion bound read against the folded context equal to the bound recomputing it,
and exact where a block holds one continuation token."""

import pytest
import torch

from fsc.harness.likelihood import ar_batch, diffusion_loglikelihood, fold_prefix
from fsc.loading import load_model
from fsc.tokenizer import ByteTokenizer

MIXERS = ["tiny_attn", "tiny_mamba", "tiny_hybrid", "tiny_gla", "tiny_gated_delta", "tiny_linear"]
MASK = ByteTokenizer.mask_id


def _model(name: str, G: int | None = None):
    _, model = load_model(name, seed=3)
    if G is not None:
        model.recipe = model.recipe.model_copy(update={"block_size": G})
    return model.eval()


def _ids(n: int, seed: int) -> list[int]:
    return torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_mamba", "tiny_hybrid"])
def test_ar_batch_is_each_request_alone(name):
    """Right-padded batches give each request's log-probability of its continuation as one
    unpadded forward does, and greedy says whether every token is its position's argmax."""
    model = _model(name, G=1)
    requests = []
    for n, (c, k) in enumerate([(5, 3), (11, 1), (2, 6)]):
        ids = _ids(c + k, n)
        requests.append((ids[:-1], ids[c:]))
    got = ar_batch(model, requests, "cpu")
    for (inp, cont), (logp, greedy) in zip(requests, got):
        with torch.no_grad():
            logits = model.forward_blockwise(torch.tensor([inp]), [1] * len(inp))[0].double()
        lp = torch.log_softmax(logits[len(inp) - len(cont):], -1)
        want = float(lp.gather(-1, torch.tensor(cont)[:, None]).sum())
        assert logp == pytest.approx(want, rel=1e-6, abs=1e-6)
        assert greedy == bool((lp.argmax(-1) == torch.tensor(cont)).all())
    # a continuation of the argmax tokens is greedy
    inp = _ids(6, 9)
    with torch.no_grad():
        nxt = int(model.forward_blockwise(torch.tensor([inp]), [1] * 6)[0, -1].argmax())
    assert ar_batch(model, [(inp, [nxt])], "cpu")[0][1] is True


@pytest.mark.parametrize("name", MIXERS)
def test_the_cached_bound_is_the_recomputed_one(name):
    """The same draws read against the folded context and with the context recomputed each
    draw give the same bound, for a context ending inside a block and a continuation over
    three blocks; a prefix folded beforehand gives it too."""
    model = _model(name)
    G = model.recipe.block_size
    ids = _ids(3 * G + 2 + 2 * G + 1, 5)
    start = 3 * G + 2
    cached = diffusion_loglikelihood(model, MASK, ids, start, 6, "cpu", seed=1, cached=True)
    again = diffusion_loglikelihood(model, MASK, ids, start, 6, "cpu", seed=1, cached=False)
    assert cached[0] == pytest.approx(again[0], rel=1e-5)
    assert cached[1] == again[1]
    prefix = fold_prefix(model, ids[: 3 * G], len(ids) + G, "cpu")
    reused = diffusion_loglikelihood(model, MASK, ids, start, 6, "cpu", seed=1, prefix=prefix)
    assert reused[0] == pytest.approx(cached[0], rel=1e-6)
    assert prefix.length == 3 * G  # the shared prefix is copied, never folded into
    assert cached[0] < 0
    other = diffusion_loglikelihood(model, MASK, ids, start, 6, "cpu", seed=2)
    assert other[0] != cached[0]  # the draws are random: another seed, another estimate


def test_one_token_in_a_block_is_scored_exactly():
    """A block holding one continuation token after clean context tokens: every draw masks
    that token alone, so the bound is the exact −log p(token | the rest), whatever mc is."""
    model = _model("tiny_hybrid")
    G = model.recipe.block_size
    ids = _ids(2 * G, 4)
    start = 2 * G - 1
    logp, _ = diffusion_loglikelihood(model, MASK, ids, start, 3, "cpu")
    noisy = ids[:start] + [MASK]
    with torch.no_grad():
        logits = model.forward_blockwise(torch.tensor([noisy]), [G, G])[0, -1].double()
    assert logp == pytest.approx(float(torch.log_softmax(logits, -1)[ids[-1]]), rel=1e-6)


def test_the_bound_is_seeded_by_the_request_not_its_order():
    model = _model("tiny_attn")
    a, b = _ids(13, 1), _ids(9, 2)
    first = [diffusion_loglikelihood(model, MASK, x, 5, 4, "cpu") for x in (a, b)]
    second = [diffusion_loglikelihood(model, MASK, x, 5, 4, "cpu") for x in (b, a)][::-1]
    assert first == second
