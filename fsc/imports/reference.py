"""An imported model against transformers on the same weights: fsc's cached decode at G = 1
(one fold per token, fp32) gives the reference's logits (relative error at most `LOGIT_TOL`)
and the same greedy tokens.

transformers is an optional extra (`pip install 'fsc[hf]'`); without it a one-line UsageError.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

try:  # an optional extra: only this check needs it
    import transformers
except ImportError:
    transformers = None

from fsc.checkpoint.io import load_checkpoint
from fsc.errors import UsageError
from fsc.imports import import_config, local_dir
from fsc.imports.convert import load_published

LOGIT_TOL = 1e-4  # max |fsc - reference| / max |reference|, fp32
NEW_TOKENS = 32
PROMPT_TOKENS = 8
# Packages whose kernels transformers binds into a model's code when that code is first
# imported, whatever the device (Qwen3-Next's Gated DeltaNet calls flash-linear-attention's
# once it imports); the reference runs on the CPU, where they cannot run.
GPU_KERNEL_PACKAGES = ("fla", "causal_conv1d", "mamba_ssm")


@dataclass
class ReferenceReport:
    source: str
    architecture: str
    recipe: str
    transformers_version: str
    prompt_ids: list[int]
    fsc_tokens: list[int]
    reference_tokens: list[int]
    max_rel_err: float
    tol: float = LOGIT_TOL

    @property
    def exact(self) -> bool:
        return self.max_rel_err <= self.tol and self.fsc_tokens == self.reference_tokens

    def to_dict(self) -> dict:
        return {**asdict(self), "exact": self.exact}


def _require_transformers() -> None:
    if transformers is None:
        raise UsageError("--against transformers needs the transformers package: "
                         "pip install 'fsc[hf]'")
    transformers.logging.set_verbosity_error()  # its notes and progress bars: not ours to show
    transformers.logging.disable_progress_bar()
    return transformers


@contextmanager
def torch_paths():
    """transformers' model code imported inside takes its own torch paths: the packages of
    GPU_KERNEL_PACKAGES cannot be imported meanwhile (a None in sys.modules)."""
    saved = {name: sys.modules.get(name) for name in GPU_KERNEL_PACKAGES}
    sys.modules.update(dict.fromkeys(GPU_KERNEL_PACKAGES))
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                del sys.modules[name]
            else:
                sys.modules[name] = module


def default_prompt(vocab_size: int, seed: int = 0) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (PROMPT_TOKENS,), generator=gen).tolist()


@torch.no_grad()
def fsc_greedy(model, prompt: list[int], new_tokens: int) -> tuple[list[int], torch.Tensor]:
    """(greedy tokens, logits [T, V] of every position): fsc's cached path at G = 1, each token
    folded into the cache as it is read or chosen."""
    cache = model.empty_cache(1, len(prompt) + new_tokens, block_size=1)
    ids, rows = list(prompt), []
    for i in range(len(prompt) + new_tokens - 1):
        rows.append(model.fold(torch.tensor([[ids[i]]]), cache)[0, -1])
        if i + 1 >= len(prompt):
            ids.append(int(rows[-1].argmax()))
    return ids[len(prompt):], torch.stack(rows)


@torch.no_grad()
def reference_greedy(ref, prompt: list[int], new_tokens: int) -> list[int]:
    """Greedy tokens of the transformers model (its own generate and cache), exactly
    `new_tokens` of them: no stop at EOS, as fsc's side has none either."""
    ref.generation_config.eos_token_id = None
    out = ref.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt),
                       dtype=torch.long), max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                       do_sample=False, pad_token_id=0)
    return out[0, len(prompt):].tolist()


def check(source: str, prompt: list[int] | None = None, new_tokens: int = NEW_TOKENS,
          seed: int = 0, checkpoint: str | None = None) -> ReferenceReport:
    """Compare fsc's cached decode of `source` (a published folder or hf:) with transformers on
    it; with `checkpoint` (an `fsc import` of `source`), that checkpoint's weights decoded."""
    _require_transformers()
    if checkpoint is None:
        imported, model = load_published(source)
    else:
        imported, (_, model) = import_config(source), load_checkpoint(Path(checkpoint))
    model = model.float()
    prompt = prompt or default_prompt(imported.recipe.vocab_size, seed)
    with torch_paths():
        ref = transformers.AutoModelForCausalLM.from_pretrained(
            str(local_dir(source, files="all")), dtype=torch.float32).eval()
    tokens, logits = fsc_greedy(model, prompt, new_tokens)
    with torch.no_grad():
        want = ref(torch.tensor([prompt + tokens[:-1]]), use_cache=False).logits[0].float()
    err = float((logits - want).abs().max() / want.abs().max())
    shown = source if checkpoint is None else f"{checkpoint} (imported from {source})"
    return ReferenceReport(shown, imported.architecture, imported.recipe.name,
                           transformers.__version__, prompt, tokens,
                           reference_greedy(ref, prompt, new_tokens), err)
