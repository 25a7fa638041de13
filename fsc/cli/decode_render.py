"""How `fsc decode` shows a decode: the text, then the generation apart from the prompt's fold
(its tokens, time, rate and passes, and whether it stopped at EOS), how it sampled, the
prompt's own line, the weights; and for --prompts one summary line for the file."""

from __future__ import annotations

from fsc.cli.bars import terminal_bar
from fsc.cli.common import out, printable
from fsc.text import counted


def fold_bar():
    """The prompt's fold as a bar on a terminal's stderr, shown once it takes more than one
    pass (a long prompt folds for minutes on a CPU: the prefill reports only then), gone when
    it ends; what the prefill calls after each pass (fsc.decode.folding)."""
    return terminal_bar("folding the prompt, tokens")


def show_result(prompt: str, text: str, s: dict) -> None:
    """The prompt and the generated `text` (control characters, ANSI escapes among them, shown
    escaped: generated text may hold any byte), then the lines of its stats `s`."""
    out.print(printable(prompt, None, keep="\n\t"), end="", markup=False, highlight=False,
              soft_wrap=True)  # the text as it is: never broken at the console's width
    out.print(printable(text, None, keep="\n\t"), style="bold", markup=False, highlight=False,
              soft_wrap=True)
    said = sampling(s, f"seed {s['seed']}")
    for line in (generation_line(s), f"sampling: {said}", prompt_line(s),
                 f"weights: {printable(s['weights'])}"):
        out.print(line, style="dim", markup=False, highlight=False, soft_wrap=True)


def setting(s: dict, steps_per_block: float) -> str:
    """How a decode ran, from its stats `s`: mode, G and K, the reveal (diffusion: the policy,
    the threshold, `steps_per_block`), the cache and the device."""
    said = f"{s['mode']}, G {s['G']}" + (f", K {s['K']}" if s["K"] else "")
    if s["mode"] == "diffusion":
        said += f", {s['policy']}" + (f", τ {s['threshold']:g}" if s["threshold"] else "")
        said += f", {steps_per_block:.2f} steps a block"
    return f"{said}, {'cached' if s['cached'] else 'no cache'}, {s['device']}"


def sampling(s: dict, seed: str) -> str:
    """How a decode drew its tokens, from its stats `s`: greedy, or the temperature and the
    cuts (top-k, top-p, min-p) that apply; the repetition penalty where there is one; and `seed`
    (e.g. "seed 3") where a draw reads it (sampling, or the random reveal order)."""
    said = "greedy"
    if s["temperature"] > 0:
        said = f"temperature {s['temperature']:g}"
        said += f", top-k {s['top_k']}" if s["top_k"] else ""
        said += f", top-p {s['top_p']:g}" if s["top_p"] < 1 else ""
        said += f", min-p {s['min_p']:g}" if s["min_p"] else ""
    if s["repetition_penalty"] != 1:
        said += f", repetition penalty {s['repetition_penalty']:g}"
    if s["temperature"] > 0 or (s["mode"] == "diffusion" and s["policy"] == "random"):
        said += f", {seed}"
    return said


def generation_line(s: dict) -> str:
    """The generation apart from the prompt: its tokens, time and rate, and its forward passes
    (the prompt's are on `prompt_line`); whether it stopped at its EOS, short of --length."""
    passes = s["forward_passes"] - s["prompt_passes"]
    return (f"{counted(s['tokens'], 'token')} generated in {s['generate_s']:.3g} s "
            f"({s['tokens_per_s']:.1f} tok/s): {counted(s['blocks'], 'block')}, "
            f"{counted(passes, 'forward pass', 'forward passes')} "
            f"({setting(s, s['steps_per_block'])})"
            + ("; stopped at EOS" if s["stopped"] == "eos" else ""))


def prompt_line(s: dict) -> str:
    """How long the prompt took apart from the generation, in how many forward passes, and
    the warm-up if one was made."""
    took = f"prompt: {counted(s['prompt_tokens'], 'token')}"
    if s["prompt_tokens_per_s"] is None:
        took += " (no cache: recomputed at every step)"
    else:
        took += (f" folded in {s['prefill_s']:.3g} s ({s['prompt_tokens_per_s']:.1f} tok/s), "
                 f"{counted(s['prompt_passes'], 'forward pass', 'forward passes')}")
    if s["warmup_s"] is not None:
        took += f"; warm-up {s['warmup_s']:.3g} s"
    return took


def summary(results, batch: int, seed: int) -> str:
    """One line for the whole file: its prompts and batches, the generation (every batch's
    tokens, seconds and tokens/s) apart from the prompts' fold, how they decoded and sampled
    (each row's seed derived from --seed `seed`), and how many stopped at their EOS."""
    firsts = list({r.stats["batch_index"]: r.stats for r in results}.values())  # a batch's
    made = sum(len(r.token_ids) for r in results)
    generate_s = sum(s["generate_s"] for s in firsts)
    rate = f"{made / generate_s:.1f} tok/s" if generate_s > 0 else "- tok/s"
    steps = sum(r.stats["steps_used"] for r in results) / sum(r.stats["blocks"] for r in results)
    ended = sum(r.stats["stopped"] == "eos" for r in results)
    return (f"{counted(len(results), 'prompt')} in {counted(len(firsts), 'batch', 'batches')} "
            f"(--batch {batch}), {counted(made, 'token')} generated in {generate_s:.3g} s, "
            f"{rate} ({setting(firsts[0], steps)}); prompts: "
            f"{counted(sum(r.stats['prompt_tokens'] for r in results), 'token')} folded in "
            f"{sum(s['prefill_s'] for s in firsts):.3g} s; sampling: "
            f"{sampling(firsts[0], f'seeds derived from --seed {seed}')}"
            + (f"; {ended} of {counted(len(results), 'prompt')} stopped at EOS" if ended else ""))
