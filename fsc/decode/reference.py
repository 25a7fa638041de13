"""The uncached reference decoder: one sequence, every step recomputing the whole prefix with
the block-causal forward pass (`generate(..., use_cache=False)`, `fsc decode --no-cache`). It is
the cached decoder's exactness oracle, as a kernel's `_ref` twin is the kernel's: greedy
decoding gives the cached decoder's tokens (tests/core/test_decode_batch.py, every mixer), and
its speed is the baseline the cache is measured against."""

from __future__ import annotations

import time

import torch

from fsc.decode.config import DecodeConfig, DecodeResult, setting
from fsc.decode.denoise import Steps
from fsc.decode.sampler import ar_picker, banned_ids, picker
from fsc.model.lm import read_as
from fsc.tokenizer import first_stop, stop_ids


class Reference:
    """The forward passes of the uncached reference decode: every step recomputes the whole
    prefix with the block-causal forward (no cache; `generate(..., use_cache=False)`)."""

    def __init__(self, model, ids: list[int], G: int, device):
        self.model, self.device = model, device
        self.ids: list[int] = []
        self.blocks: list[int] = []
        self.passes = 0
        for start in range(0, len(ids), G):
            self.commit(ids[start : start + G])

    def _t(self, ids):
        return torch.tensor([ids], dtype=torch.long, device=self.device)

    def step(self, block):
        """Logits [1, g, V] of the frontier block [1, g] after the prefix."""
        self.passes += 1
        x = torch.cat([self._t(self.ids), block], dim=1) if self.ids else block
        return self.model.forward_blockwise(x, self.blocks + [block.shape[1]])[:, -block.shape[1] :]

    def commit(self, block: list[int]) -> None:
        """The finished block joins the prefix (recomputed at the next step)."""
        self.ids += block
        self.blocks.append(len(block))

    def ar_logits(self):
        """Logits [V] predicting the next token after everything committed."""
        self.passes += 1
        return self.model.forward_blockwise(self._t(self.ids), self.blocks)[0, -1]


@torch.inference_mode()
def generate_ref(model, tokenizer, prompt_ids: list[int], cfg: DecodeConfig,
                 device=None) -> DecodeResult:
    """`generate` without the cache (its inputs already checked): up to `cfg.length` tokens
    after `prompt_ids`, every step recomputing the prefix (`Reference`); stops early at EOS."""
    if cfg.mode == "ar" and model.recipe.logit_shift:  # its position i predicts token i + 1
        return generate_ref(read_as(model, 1, False), tokenizer, prompt_ids, cfg, device)
    device = device or model.embed.weight.device
    vocab = model.recipe.vocab_size
    G = 1 if cfg.mode == "ar" else cfg.G
    banned = banned_ids(tokenizer, vocab)
    t0 = time.perf_counter()
    run = Reference(model, prompt_ids, G, device)
    out: list[int] = []
    n_blocks = 0
    stopped = "length"  # or "eos": why it ended
    stops = stop_ids(tokenizer)
    pick = picker(banned, vocab, cfg, device, prompts=[prompt_ids])
    next_token = ar_picker(pick, cfg.temperature)
    steps = Steps(run.step, pick, cfg.steps, cfg.threshold)  # (and the steps each block took)

    while True:
        if cfg.mode == "ar":
            block = [next_token(run.ar_logits())]
        else:  # one block of g masked positions filled in at most K steps
            g = min(G, cfg.length - len(out))
            block = steps.run(torch.full((1, g), tokenizer.mask_id, dtype=torch.long,
                                         device=device),
                              torch.ones(1, g, dtype=torch.bool, device=device), g)[0].tolist()
        n_blocks += 1
        out += block
        pick.saw(torch.tensor([block], device=device))
        end = first_stop(out, stops)
        if end is not None:  # it ends at its EOS, kept
            out, stopped = out[: end + 1], "eos"
            break
        if len(out) >= cfg.length:
            break
        run.commit(block)
    t2 = time.perf_counter()
    prefill_s, generate_s = 0.0, t2 - t0  # nothing is folded ahead: all of it is generation
    stats = {
        **setting(cfg, G),
        "steps_used": sum(steps.used),
        "steps_per_block": sum(steps.used) / len(steps.used) if steps.used else 0.0,
        "cached": False,
        "graphs": False,
        "prompt_tokens": len(prompt_ids),
        "tokens": len(out),
        "blocks": n_blocks,
        "stopped": stopped,
        "forward_passes": run.passes,
        "prompt_passes": 0,  # every step recomputes the prompt instead
        "batch": 1,  # the cached decoder's batch fields, for one sequence alone
        "batch_index": 0,
        "batch_forward_passes": run.passes,
        "batch_prompt_passes": 0,
        "device": str(device),
        "warmup_s": None,
        "prefill_s": prefill_s,
        "generate_s": generate_s,
        "seconds": prefill_s + generate_s,
        "prompt_tokens_per_s": None,  # the prompt is not folded ahead
        "tokens_per_s": len(out) / generate_s if generate_s > 0 else float("inf"),
    }
    return DecodeResult(out, stats)


