"""Picking tokens from logits: the sample at each position (banned ids never drawn, the
repetition penalty, temperature, top-k, top-p, min-p), its confidence, and the reveal policy's
priority of each position (both read from the model's own distribution: `judged`).

Two twins with one meaning. `pick_ref` (`HostPicker`, a batch's rows) is the reference: on
the host, float64, drawing with `torch.multinomial` from CPU generators. `Picker` runs where
the logits are (the GPU, or the CPU), float64 there, so nothing of size [G, V] leaves the
device: each row of a batch draws its uniforms from a generator of its own on that device
(seeded per row, so a row's samples never depend on its batch-mates), and a sample is the
inverse of the CDF at the uniform. Greedy picks are the same tokens in both; sampled picks
follow the same distribution (the draws differ: another generator; tests/core/test_sampler.py
compares their frequencies).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from fsc.seeds import derive

if TYPE_CHECKING:
    from fsc.decode.config import DecodeConfig

ORDER_STREAM = 1  # derive(seed, ORDER_STREAM): a row's random order, apart from its samples


def distribution(logits, temperature: float, top_p: float, top_k: int = 0, min_p: float = 0.0):
    """What each row of `logits` [n, V] samples from, in float64: softmax at `temperature`
    (greedy, 0: at 1, uncut), cut to its `top_k` most likely ids (0: all; ties with the k-th
    kept), then to the smallest top-`top_p` set (the id that reaches `top_p` kept; of ids
    tied at that edge, the lower ids first, on every device), then to the ids at least
    `min_p` times as likely as the most likely (0: all), renormalised after each cut:
    transformers' warpers, in its order, with its rule at each edge."""
    logits = logits.double()
    probs = torch.softmax(logits / temperature if temperature > 0 else logits, dim=-1)
    if temperature > 0 and 0 < top_k < probs.shape[-1]:
        probs = probs * (probs >= probs.topk(top_k, dim=-1).values[..., -1:])
        probs = probs / probs.sum(-1, keepdim=True)
    if temperature > 0 and top_p < 1:  # (stable: of ids tied at the edge the lower kept)
        sorted_p, order = probs.sort(dim=-1, descending=True, stable=True)
        keep = sorted_p.cumsum(-1) - sorted_p < top_p  # smallest prefix reaching top_p
        sorted_p = sorted_p * keep
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        probs = probs / probs.sum(-1, keepdim=True)
    if temperature > 0 and min_p > 0:
        probs = probs * (probs >= min_p * probs.amax(-1, keepdim=True))
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def penalize(logits, seen, penalty: float):
    """`logits` [..., V] with every id `seen` (bool, broadcast against them) made less likely by
    `penalty`, in float32, as transformers' RepetitionPenaltyLogitsProcessor does: a positive
    logit divided by it, a negative one multiplied (CTRL, Keskar et al. 2019); unchanged where
    `seen` is None (no penalty)."""
    if seen is None:
        return logits
    x = logits.float()
    return torch.where(seen, torch.where(x < 0, x * penalty, x / penalty), x)


class History:
    """The ids each row of a batch has seen (its prompt, then what it generated), as a [B, V]
    bool on `device`, for the repetition penalty: `seen` is None at penalty 1 (nothing
    applied, nothing kept). `saw` marks a block's ids in place (a captured pick reads the same
    memory at every replay)."""

    def __init__(self, penalty: float, prompts: list[list[int]] | None, vocab: int, device):
        self.penalty, self.seen = penalty, None
        if penalty != 1.0:
            self.seen = torch.zeros(len(prompts or [[]]), vocab, dtype=torch.bool, device=device)
            for row, ids in zip(self.seen, prompts or [[]], strict=True):
                row[[i for i in ids if 0 <= i < vocab]] = True

    def saw(self, tokens) -> None:
        """Mark the ids of `tokens` [B, n] seen by their rows."""
        if self.seen is not None:
            self.seen.scatter_(1, tokens.to(self.seen.device).clamp(0, self.seen.shape[1] - 1),
                               True)

    def against(self, logits):
        """`seen` shaped to broadcast against `logits` [B, ..., V] (or [V]: one row), or None."""
        if self.seen is None:
            return None
        if logits.dim() == 1:
            return self.seen[0]
        return self.seen.view(self.seen.shape[0], *[1] * (logits.dim() - 2), -1)

    def penalize(self, logits):
        """`logits` [B, ..., V] (or [V]) with each row's seen ids penalized (`penalize`)."""
        return penalize(logits, self.against(logits), self.penalty)


def judged(logits, temperature: float, top_p: float, top_k: int = 0, min_p: float = 0.0):
    """(the model's own distribution of each row of `logits` [n, V]: softmax at temperature 1,
    uncut; what it samples from, `distribution`), both float64 [n, V]. A position's confidence,
    margin and entropy read the first (as LLaDA's and Fast-dLLM's low-confidence remasking
    reads softmax(logits)), so the reveal order and a threshold mean the same at every
    temperature, top-k, top-p and min-p, and a sample that can only be the most likely token
    (top-k 1) reveals as greedy decoding does."""
    own = distribution(logits, 0.0, 1.0)
    if temperature == 0 or (temperature == 1 and top_p >= 1 and not top_k and not min_p):
        return own, own  # nothing tempers or cuts it: one softmax, not two
    return own, distribution(logits, temperature, top_p, top_k, min_p)


def priority(probs, conf, policy: str, uniforms=None):
    """Each row's priority [n] under `policy` (higher is revealed first), from the model's own
    distribution `probs` [n, V] (`judged`) and the sampled tokens' probabilities under it
    `conf`; `random` is `uniforms` [n] (a stream of its own, never the samples')."""
    if policy == "confidence":
        return conf
    if policy == "margin":
        top = probs.topk(2, dim=-1).values
        return top[:, 0] - top[:, 1]
    if policy == "entropy":
        return (probs * probs.clamp_min(1e-300).log()).sum(-1)  # -H: low entropy first
    return uniforms


def pick_ref(logits, banned: list[int], temperature: float, top_p: float, policy: str,
             generator, order, top_k: int = 0, seen=None, penalty: float = 1.0,
             min_p: float = 0.0):
    """(tokens, confidences, priorities) of each row of `logits` [n, V], on the host in float64:
    a draw from `generator` (greedy at temperature 0) with the `banned` ids never drawn and the
    ids `seen` ([V] bool, or None) penalized by `penalty`, its confidence and priority read
    from the model's own distribution (`judged`); the `random` policy's priorities drawn
    from `order`."""
    logits = penalize(logits.float().cpu(), None if seen is None else seen.cpu(), penalty).clone()
    logits[..., banned] = float("-inf")
    own, probs = judged(logits, temperature, top_p, top_k, min_p)
    if temperature == 0:
        conf, tok = own.max(dim=-1)
    else:
        tok = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        conf = own.gather(-1, tok[:, None]).squeeze(-1)
    uniforms = (torch.rand(probs.shape[0], generator=order, dtype=torch.float64)
                if policy == "random" else None)
    return tok, conf, priority(own, conf, policy, uniforms)


class Picker:
    """pick(logits [B, n, V]) -> (tokens, confidences, priorities), each [B, n], on the logits'
    device in float64; row b draws from its own generator (seeded `seeds[b]`) and, for the
    `random` policy, its own order stream. A pick is its draws (`draw`, eager) and the choice
    at them (`choose`, which a CUDA graph captures: fsc.decode.denoise)."""

    capturable = True

    def __init__(self, banned: list[int], vocab: int, temperature: float, top_p: float,
                 policy: str, seeds: list[int], device, top_k: int = 0,
                 history: History | None = None, min_p: float = 0.0):
        self.temperature, self.top_p, self.top_k, self.policy = temperature, top_p, top_k, policy
        self.min_p = min_p
        self.device = torch.device(device)
        self.ban = ban_mask(banned, vocab, self.device)
        self.history = history or History(1.0, None, vocab, self.device)
        self.gens = [torch.Generator(self.device).manual_seed(s) for s in seeds]
        self.orders = [torch.Generator(self.device).manual_seed(derive(s, ORDER_STREAM))
                       for s in seeds]

    def _uniforms(self, gens, n: int, live: list[bool]):
        return torch.stack([
            torch.rand(n, generator=g, device=self.device, dtype=torch.float64) if on
            else torch.zeros(n, device=self.device, dtype=torch.float64)
            for g, on in zip(gens, live, strict=True)])

    def draw(self, n: int, live: list[bool] | None = None):
        """The uniforms a pick of `n` positions a row reads: (the samples' [B, n], None at
        temperature 0; the `random` order's [B, n], None for another policy), drawn from the
        generators of each row `live` names (default: every row); a row not live draws
        nothing (zeros: its pick is not used)."""
        live = live or [True] * len(self.gens)
        return (self._uniforms(self.gens, n, live) if self.temperature > 0 else None,
                self._uniforms(self.orders, n, live) if self.policy == "random" else None)

    def choose(self, logits, samples, order):
        """The pick of `logits` [B, n, V] at the uniforms `draw` gave: no draw, no host sync
        (a CUDA graph captures it)."""
        B, n, V = logits.shape
        logits = self.history.penalize(logits)
        logits = logits.double().masked_fill(self.ban[:V], float("-inf"))
        own, probs = judged(logits.reshape(B * n, V), self.temperature, self.top_p, self.top_k,
                            self.min_p)
        if self.temperature == 0:
            conf, tok = own.max(dim=-1)
        else:  # the inverse of each row's CDF at a uniform: the first id whose CDF passes it
            cdf = probs.cumsum(-1)
            u = samples.reshape(B * n, 1) * cdf[:, -1:]
            tok = torch.searchsorted(cdf, u, right=True).clamp_max(V - 1)[:, 0]
            conf = own.gather(-1, tok[:, None]).squeeze(-1)
        uniforms = order.reshape(B * n) if self.policy == "random" else None
        rank = priority(own, conf, self.policy, uniforms)
        return tok.view(B, n), conf.view(B, n), rank.view(B, n)

    def __call__(self, logits):
        return self.choose(logits, *self.draw(logits.shape[1]))

    def greedy(self, logits):
        """The argmax of `logits` [B, V] (or [V], one row), banned ids aside and seen ids
        penalized: the token a pick at temperature 0 chooses, without its float64 softmax over
        the vocabulary (autoregressive decoding)."""
        logits = self.history.penalize(logits)
        return logits.masked_fill(self.ban[: logits.shape[-1]], float("-inf")).argmax(-1)

    def saw(self, tokens) -> None:
        """Mark the ids of a finished block `tokens` [B, n] seen (the repetition penalty)."""
        self.history.saw(tokens)


def ban_mask(banned: list[int], vocab: int, device):
    """[vocab] bool on `device`: True at the ids never drawn."""
    ban = torch.zeros(vocab, dtype=torch.bool, device=device)
    ban[[i for i in banned if i < vocab]] = True
    return ban


class HostPicker:
    """`Picker`'s reference twin: each row picked by `pick_ref` on the host, drawing from its
    own CPU generators (seeded `seeds[b]`; the draws recorded before the device picker), the
    results back on `device`. It reads the logits on the host, so no graph captures it. Its
    draws are made by `choose`, for the rows the last `draw` named live (a row not live: no
    pick, its token 0 and its priority -inf, as it is not used)."""

    capturable = False

    def __init__(self, banned: list[int], vocab: int, temperature: float, top_p: float,
                 policy: str, seeds: list[int], device, top_k: int = 0,
                 history: History | None = None, min_p: float = 0.0):
        self.banned, self.temperature, self.top_p, self.policy = banned, temperature, top_p, policy
        self.top_k, self.min_p = top_k, min_p
        self.device = torch.device(device)
        self.ban = ban_mask(banned, vocab, self.device)
        self.history = history or History(1.0, None, vocab, self.device)
        self.gens = [torch.Generator().manual_seed(s) for s in seeds]
        self.orders = [torch.Generator().manual_seed(derive(s, ORDER_STREAM)) for s in seeds]
        self.live: list[bool] | None = None  # the rows the next `choose` picks (None: all)

    def draw(self, n: int, live: list[bool] | None = None):
        self.live = live
        return None, None  # drawn by `pick_ref` itself

    def choose(self, logits, samples=None, order=None):
        live = self.live or [True] * len(self.gens)
        self.live = None
        seen = self.history.seen
        rows = [pick_ref(row, self.banned, self.temperature, self.top_p, self.policy, gen, o,
                         self.top_k, None if seen is None else seen[b], self.history.penalty,
                         self.min_p)
                if on else self._nothing(row)
                for b, (row, gen, o, on) in enumerate(zip(logits, self.gens, self.orders, live,
                                                          strict=True))]
        return tuple(torch.stack(t).to(self.device) for t in zip(*rows))

    @staticmethod
    def _nothing(row):
        """A row not live: (tokens 0, confidences 0, priorities -inf) for its n positions."""
        n = row.shape[0]
        return (torch.zeros(n, dtype=torch.long), torch.zeros(n, dtype=torch.float64),
                torch.full((n,), float("-inf"), dtype=torch.float64))

    __call__ = choose
    greedy = Picker.greedy
    saw = Picker.saw


def banned_ids(tokenizer, vocab: int) -> list[int]:
    """Ids decoding never produces: the tokenizer's specials and ids past its vocabulary."""
    return ([i for i in tokenizer.special_ids if i is not None]
            + list(range(tokenizer.vocab_size, vocab)))


def picker(banned: list[int], vocab: int, cfg: DecodeConfig, device,
           seeds: list[int] | None = None, prompts: list[list[int]] | None = None):
    """pick(logits [B, n, V]) -> (tokens, confidences, priorities), each [B, n] on `device`,
    row b drawing from seed `seeds[b]` (default: cfg.seed, one row) and, under a repetition
    penalty, penalizing the ids of its prompt `prompts[b]` and of the blocks it was told it
    made (`saw`): the device picker
    (`Picker`: nothing of [n, V] leaves the device) where `cfg.sampler` asks for it
    (auto: on CUDA), else the host reference (`HostPicker`: `pick_ref` a row), which
    the CPU keeps (its draws are the ones recorded so far). Either also gives a pick's draws
    and its choice apart (`draw`, `choose`: fsc.decode.denoise captures the choice) and the greedy
    token alone (`greedy`: autoregressive decoding)."""
    device = torch.device(device)
    seeds = seeds or [cfg.seed]
    history = History(cfg.repetition_penalty, prompts or [[]] * len(seeds), vocab, device)
    on_device = cfg.sampler == "device" or (cfg.sampler == "auto" and device.type == "cuda")
    kind = Picker if on_device else HostPicker
    return kind(banned, vocab, cfg.temperature, cfg.top_p, cfg.policy, seeds, device,
                cfg.top_k, history, cfg.min_p)


def ar_picker(pick, temperature: float):
    """next(logits [V]) -> the next token of autoregressive decoding: greedy at temperature 0
    (`pick.greedy`), else `pick`'s sample."""
    if temperature > 0:
        return lambda logits: int(pick(logits[None, None])[0][0, 0])
    return lambda logits: int(pick.greedy(logits))
