"""What a decode is asked for (`DecodeConfig`, checked before any weight is read) and what it
gives back (`DecodeResult`: the tokens and the stats), and the checks of a model, tokenizer and
prompt every decode makes first."""

from __future__ import annotations

from dataclasses import dataclass, field

from fsc.blocks import MODES, POLICIES, check_block, check_temperature
from fsc.errors import UsageError
from fsc.tokenizer import check_vocab

SAMPLERS = ("auto", "host", "device")  # where the pick runs (`picker`)
PREFILL_CHUNK = 4096  # prompt tokens folded in one pass (`prefill`; 0: the whole prompt)


@dataclass
class DecodeConfig:
    length: int
    G: int
    steps: int
    mode: str = "diffusion"  # "diffusion" | "ar"
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # sample from the k most likely ids only (0: all)
    min_p: float = 0.0  # ... and those at least min_p times the most likely's probability (0: all)
    repetition_penalty: float = 1.0  # ids already seen made less likely (1: none; sampler.penalize)
    threshold: float | None = None
    seed: int = 0
    use_cache: bool = True
    policy: str = "confidence"
    graphs: bool = True  # on CUDA, steps and folds replay captured graphs (fsc.decode.denoise, fsc.graphs)
    sampler: str = "auto"  # the pick: on the logits' device (CUDA) or the host (`picker`)
    prefill_chunk: int = PREFILL_CHUNK  # prompt tokens folded in one pass (0: all)

    def check(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.length < 1:
            raise UsageError(f"length {self.length} must be at least 1")
        if self.mode == "diffusion":
            check_block(self.G, self.steps)
        if self.temperature < 0:
            raise UsageError(f"temperature {self.temperature} must be >= 0")
        check_temperature(self.temperature, "temperature")
        if not 0 < self.top_p <= 1:
            raise UsageError(f"top_p {self.top_p} must be in (0, 1]")
        if not self.repetition_penalty > 0:
            raise UsageError(f"repetition penalty {self.repetition_penalty} must be > 0 "
                             "(1: none)")
        if not 0 <= self.min_p <= 1:
            raise UsageError(f"min_p {self.min_p} must be in [0, 1] (0: every id)")
        if self.top_k < 0:
            raise UsageError(f"top_k {self.top_k} must be >= 0 (0: every id)")
        if self.threshold is not None and not 0 < self.threshold <= 1:
            raise UsageError(f"threshold {self.threshold} must be in (0, 1]")
        if self.sampler not in SAMPLERS:
            raise UsageError(f"sampler {self.sampler!r} is not one of {', '.join(SAMPLERS)}")
        if self.policy not in POLICIES:
            raise UsageError(f"policy {self.policy!r} is not one of {', '.join(POLICIES)}")
        if self.prefill_chunk < 0:
            raise UsageError(f"--prefill-chunk {self.prefill_chunk} must be >= 0")


def sampling(cfg: DecodeConfig) -> dict:
    """How a decode drew its tokens, for its stats: the temperature (0: greedy), top-k, top-p,
    min-p and repetition penalty it was given."""
    return {"temperature": cfg.temperature, "top_k": cfg.top_k, "top_p": cfg.top_p,
            "min_p": cfg.min_p,
            "repetition_penalty": cfg.repetition_penalty}


def setting(cfg: DecodeConfig, G: int) -> dict:
    """How a decode ran at block size G, for its stats: the mode, G, the denoising steps K
    (ar: 0, one fold a token), the reveal order (ar: None, there is none to choose), the
    threshold, and how it drew its tokens (`sampling`)."""
    ar = cfg.mode == "ar"
    return {"mode": cfg.mode, "G": G, "K": 0 if ar else cfg.steps,
            "policy": None if ar else cfg.policy, "threshold": cfg.threshold, **sampling(cfg)}


@dataclass
class DecodeResult:
    token_ids: list[int]
    stats: dict = field(default_factory=dict)


def check_inputs(model, tokenizer, prompt_ids: list[int], cfg: DecodeConfig) -> None:
    """Refuse a tokenizer larger than the model's vocabulary, an empty prompt, and diffusion
    decoding with a tokenizer that has no mask token."""
    check_vocab(tokenizer, model.recipe)
    if not prompt_ids:
        raise UsageError("the prompt is empty after tokenisation")
    if cfg.mode == "diffusion" and getattr(tokenizer, "mask_id", None) is None:
        raise UsageError(f"diffusion decoding needs a mask token, which the tokenizer "
                         f"({tokenizer.name}) lacks; decode with --mode ar")
