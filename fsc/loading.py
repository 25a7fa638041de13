"""Models from what a command was pointed at, checked against the memory they will need
before anything is allocated."""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from pathlib import Path

import torch

from fsc.blocks import MAX_S
from fsc.checkpoint.io import load_checkpoint
from fsc.costmodel import cache_bytes, memory, prompt_memory
from fsc.costmodel.devices import host_free_bytes
from fsc.decode.engine import batches, ragged_ok
from fsc.errors import UsageError, WeightsDoNotFit
from fsc.imports.convert import load_published
from fsc.model.cpu_layout import by_columns
from fsc.model.layers import DTYPE_NAMES
from fsc.model.lm import build_model
from fsc.recipe import Recipe
from fsc.source import Source, has_published_weights
from fsc.text import human_bytes


def set_threads() -> int:
    """Set torch's CPU threads from $FSC_THREADS (default 1) and return the number; the CLI and
    every worker process call it.

    Tiny CPU models gain nothing from more threads, and on a busy 2-core machine OpenMP
    spin-waits made a 2-thread forward pass up to 30× slower than a 1-thread one.
    """
    raw = os.environ.get("FSC_THREADS", "1")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(f"FSC_THREADS={raw!r} must be a positive integer")
    torch.set_num_threads(n)
    return n


def torch_device(text: str) -> str:
    """A --device value checked and resolved: 'auto' (CUDA when present), 'cpu', 'cuda',
    'cuda:N'. UsageError for anything else, or for CUDA that is not there."""
    if text == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(text)
    except RuntimeError:
        raise UsageError(f"--device {text!r} is not a device (auto, cpu, cuda or cuda:N)") from None
    if dev.type not in ("cpu", "cuda"):
        raise UsageError(f"--device {text!r}: fsc runs on cpu or cuda")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(f"--device {text}: no CUDA device is available")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise UsageError(f"--device {text}: only {torch.cuda.device_count()} CUDA device(s)")
        return str(dev)
    if dev.index not in (None, 0):
        raise UsageError(f"--device {text}: the CPU is one device, cpu (or cpu:0)")
    return "cpu"  # cpu:0 is the CPU (safetensors and the store know it as cpu)


def free_bytes(device) -> int:
    """Memory new tensors may take: free device memory, or MemAvailable on the CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    return host_free_bytes()


def check_fits(recipe: Recipe, device, S: int = 0, B: int = 1, G: int = 1,
               budget: int | None = None, asked: bool = False,
               extra: dict[str, int] | None = None) -> None:
    """WeightsDoNotFit, before anything is allocated, when the cost model's weights + cache (room
    for S + G tokens at batch B) + activations of one pass, + the `extra` bytes a caller holds
    beside them (by what they are, e.g. {"attention mask": n}), exceed `budget` bytes (default:
    the device's free memory; `asked`: a budget the user gave, --memory-budget). The message
    says what is needed and what is available."""
    mem = memory(recipe, S, B, G)
    budget = free_bytes(device) if budget is None else budget
    extra = {k: v for k, v in (extra or {}).items() if v}
    need, weights = mem.total_bytes + sum(extra.values()), mem.weight_bytes
    if need <= budget:
        return
    have = (f"the memory budget is {human_bytes(budget)}" if asked
            else f"{device} has {human_bytes(budget)} free")
    if weights > budget:
        raise WeightsDoNotFit(f"{recipe.name}: its weights need {human_bytes(weights)} but "
                              f"{have}; try `fsc build` or `fsc estimate` instead")
    raise WeightsDoNotFit(
        f"{recipe.name}: needs {human_bytes(need)} at S {S}, B {B}, G {G} (weights "
        f"{human_bytes(weights)}, cache {human_bytes(mem.cache_capacity_bytes)}, activations "
        f"{human_bytes(mem.activation_bytes)}"
        + "".join(f", {what} {human_bytes(n)}" for what, n in extra.items()) + f") but {have}"
    )


def decode_bytes(recipe: Recipe, P: int, L: int, G: int, cached: bool = True,
                 B: int = 1, chunk: int = 0, mixed: bool = False) -> tuple[int, int]:
    """(bytes, of which weights) of decoding L tokens after a P-token prompt at block size G
    (1: autoregressive), B rows together, as fsc.decode.engine holds them: weights, the cache
    with room for P + L + G tokens of each row, and the larger of the prompt's prefill (in
    passes of `chunk` tokens; 0: one pass) and one step. With `cached` False there is no
    cache, and every step reads all P + L tokens in one pass. `mixed`: prompts of different
    lengths, at most P: a batch of them is folded together or each row alone, whichever its
    rows are (see `batch_bytes`), counted at P; the more of the two."""
    rows = [P] * B
    together = batch_bytes(recipe, rows, L, G, cached, chunk, alone=False)
    return max(together, batch_bytes(recipe, rows, L, G, cached, chunk, alone=True)) if (
        mixed and B > 1) else together


def batch_bytes(recipe: Recipe, lengths: Sequence[int], L: int, G: int, cached: bool = True,
                chunk: int = 0, alone: bool | None = None) -> tuple[int, int]:
    """(bytes, of which weights) of one batch of the decoder (fsc.decode.engine._rows): rows
    whose prompts are `lengths` tokens long, folded together when they are one length (a pass
    of every row; `alone` None), else each alone into a cache of its own length, one row a
    pass, all of those caches held beside the batch's once it is merged; see `decode_bytes`."""
    r = recipe.model_copy(update={"block_size": G}) if G > 1 else recipe.as_autoregressive()
    B, P = len(lengths), max(lengths)
    step = memory(r, P + L, B, G)
    cache = step.cache_capacity_bytes if cached else 0
    if not cached:
        return step.weight_bytes + max(prompt_memory(r, P + L, B, G).activation_bytes,
                                       step.activation_bytes), step.weight_bytes
    if not (len(set(lengths)) > 1 if alone is None else alone):
        prefill = prompt_memory(r, P, B, G, chunk).activation_bytes
        return step.weight_bytes + cache + max(prefill, step.activation_bytes), step.weight_bytes
    folded = sum(cache_bytes(r, 1, n).total_bytes for n in lengths)
    prefill = prompt_memory(r, P, 1, G, chunk).activation_bytes  # the longest row's passes
    return (step.weight_bytes + folded + max(prefill, cache + step.activation_bytes),
            step.weight_bytes)


def prompts_bytes(recipe: Recipe, lengths: Sequence[int], L: int, G: int, cached: bool = True,
                  B: int = 1, chunk: int = 0) -> tuple[int, int]:
    """(bytes, of which weights) of decoding prompts of these `lengths`, B a batch as
    fsc.decode.engine.batches forms them: the most any one batch holds (`batch_bytes`)."""
    rows = [range(n) for n in lengths]  # batches reads only each prompt's length
    return max(batch_bytes(recipe, [lengths[i] for i in batch], L, G, cached, chunk)
               for batch in batches(rows, B, ragged_ok(recipe)))


def check_prompt_fits(recipe: Recipe, device, P: int | Sequence[int], L: int, G: int,
                      cached: bool = True, budget: int | None = None, B: int = 1,
                      chunk: int = 0, mixed: bool = False) -> None:
    """UsageError (WeightsDoNotFit for the memory), one line naming the prompt's length and the
    limit, when a P-token prompt and L generated tokens pass `MAX_S` tokens of context or need
    more than `budget` bytes (default: the device's free memory) with B such rows decoded
    together (`mixed`: of different lengths; see `decode_bytes`). P may be the lengths of the
    prompts of `fsc decode --prompts`, decoded B a batch: the batch that holds the most is
    checked (`prompts_bytes`), and the limit said is the length every prompt cut to it fits
    at. A recipe sets no maximum length of its own (RoPE or no position encoding, recurrent
    states): these are a prompt's limits."""
    lengths = [P] if isinstance(P, int) else list(P)
    P = max(lengths)
    if P + L > MAX_S:
        raise UsageError(f"the prompt's {P} tokens and --length {L} make {P + L} tokens of "
                         f"context, past fsc's limit of {MAX_S}; at most {MAX_S - L} prompt "
                         f"tokens fit with --length {L}")
    budget = free_bytes(device) if budget is None else budget

    def need(n: int) -> tuple[int, int]:  # every prompt cut to n tokens
        if len(lengths) == 1:
            return decode_bytes(recipe, min(n, P), L, G, cached, B, chunk, mixed)
        return prompts_bytes(recipe, [min(m, n) for m in lengths], L, G, cached, B, chunk)

    held, weights = need(P)
    if held <= budget:
        return
    if weights > budget:  # the weights alone: said as load_model says it
        check_fits(recipe, device, 0, 1, G, budget)
    # the longest prompt that fits: what is held grows with it
    fit = bisect.bisect_left(range(P), True, key=lambda n: need(n)[0] > budget) - 1
    B = min(B, len(lengths)) if len(lengths) > 1 else B
    rows = f" at --batch {B}" if B > 1 else ""
    limit = (f"at most {fit} prompt tokens fit with --length {L}{rows}" if fit > 0
             else f"not even a 1-token prompt fits with --length {L}{rows}")
    prompt = f"the longest prompt's {P} tokens{rows}" if B > 1 else f"the prompt's {P} tokens"
    raise WeightsDoNotFit(
        f"{prompt} and --length {L} need {human_bytes(held)} on {recipe.name} "
        f"({human_bytes(weights)} of weights) but {device} has {human_bytes(budget)} free; "
        f"{limit}")


def reread(model, recipe: Recipe):
    """`model`'s own weights (not copied) in a model built from `recipe`, a weight-free change
    of the model's (`Recipe.changed`: the same tensors, read another way), in eval mode."""
    if recipe == model.recipe:
        return model
    dtype = next(model.parameters()).dtype
    new = build_model(recipe, device="meta", dtype=dtype)
    new.load_state_dict(model.state_dict(), strict=True, assign=True)
    return new.eval()


def load_model(ref: str | Path | Source, device="cpu", seed: int = 0, dtype=None,
               budget: int | None = None, S: int = 0, B: int = 1, G: int = 1,
               one_token_steps: bool = False):
    """(recipe, model): a checkpoint's verified weights, a published folder's own weights (an
    import source with *.safetensors), or seeded initial weights of a recipe; `ref` names it,
    or is its `Source`, read already.

    Before anything is allocated, `check_fits` for a pass at (S, B, G) in `dtype` (default the
    recipe's) against `budget` bytes (the user's --memory-budget; default: the device's free
    memory). With
    `one_token_steps` (a caller that decodes one token a row a pass: AR, `fsc decode --mode
    ar`), the weights are stored by columns on a CPU (`fsc.model.cpu_layout`); at any batch,
    so that a row of `--prompts` reads the tensors it reads alone and rounds as it does (the
    layout costs a pass of 8 rows ~10%).
    """
    src = ref if isinstance(ref, Source) else Source.read(ref)
    recipe, ref = src.recipe, src.ref
    check_fits(recipe.with_dtype(DTYPE_NAMES[dtype]) if dtype else recipe, device, S, B, G, budget,
               asked=budget is not None)
    copy = False if one_token_steps else None  # by_columns copies out of the file's map itself
    if src.is_checkpoint:
        recipe, model = load_checkpoint(Path(ref), device=device, dtype=dtype, copy=copy)
    elif has_published_weights(ref):
        model = load_published(str(ref), device=device, copy=copy)[1]
        model = model if dtype is None else model.to(dtype)
    else:
        model = build_model(recipe, device=device, seed=seed, dtype=dtype).eval()
    return recipe, (by_columns(model) if one_token_steps else model)
