"""`fsc decode`'s checks of its options taken together, before any weight is loaded: an option
that would change nothing where it is given is refused in one line (or, where the decode is
still what was asked, noted on stderr), never silently ignored; and the ids of --prompt-ids.
Pure Python (no torch)."""

from __future__ import annotations

from pathlib import Path

from fsc.blocks import check_temperature, parse_ids
from fsc.cli.common import say
from fsc.errors import UsageError


def _listed(names: list[str]) -> str:
    return " and ".join(names)


def check_ar(mode: str | None, G: int | None, steps: int | None, threshold: float | None,
             policy: str | None) -> None:
    """With --mode ar given: UsageError naming each option of denoising given with it (--G
    other than 1, --steps, --threshold, --policy), and only those."""
    if mode != "ar":
        return
    block = [o for o, v in (("--G", None if G == 1 else G), ("--steps", steps)) if v is not None]
    reveal = [o for o, v in (("--threshold", threshold), ("--policy", policy)) if v is not None]
    if block:
        raise UsageError("--mode ar decodes with G 1 and no denoising steps, one token a pass, "
                         f"in order; drop {_listed(block + reveal)}")
    if reveal:
        raise UsageError(f"--mode ar reveals one token a pass, in order; drop {_listed(reveal)}")


UNCUT = {"--top-k": 0, "--top-p": 1.0, "--min-p": 0.0}  # the value of each cut that cuts nothing


def check_setting(mode: str | None, mode_: str, K: int, threshold: float | None,
                  policy: str | None, temperature: float, cuts: dict[str, float],
                  no_cache: bool, prefill_chunk: int | None) -> None:
    """The resolved (mode_, K) against the options given: UsageError for --threshold or
    --policy on a model that decodes autoregressively by default (block size 1), for a sampling
    cut given (`cuts`: --top-k, --top-p, --min-p by option, each at the value that cuts nothing
    where not given) at temperature 0 (greedy takes the most likely id: they cut nothing), for a
    temperature between 0 and fsc.blocks.MIN_TEMPERATURE (the scaled logits overflow to NaN) and for
    --prefill-chunk with --no-cache (no prompt is folded); a note where K is 1 (one step
    reveals the whole block: no order, no threshold to apply)."""
    reveal = [f"{o} {v}" for o, v in (("--threshold", threshold), ("--policy", policy))
              if v is not None]
    if mode_ == "ar" and mode is None and reveal:
        raise UsageError(f"{reveal[0]}: a model of block size 1 decodes autoregressively "
                         "unless told otherwise, one token a pass, in order; drop "
                         f"{_listed([r.split()[0] for r in reveal])}, or give --G N (or --mode "
                         "diffusion) to decode in blocks")
    check_temperature(temperature)
    cuts = [f"{o} {v:g}" for o, v in cuts.items() if v != UNCUT[o]]
    if temperature == 0 and cuts:
        raise UsageError(f"{_listed(cuts)} at --temperature 0 change{'s' * (len(cuts) == 1)} "
                         "nothing: greedy decoding "
                         "takes the most likely token; give --temperature T (e.g. 0.8) to "
                         f"sample, or drop {_listed([c.split()[0] for c in cuts])}")
    if no_cache and prefill_chunk is not None:
        raise UsageError(f"--prefill-chunk {prefill_chunk} sets how the prompt is folded into "
                         "the cache; --no-cache folds none (every step recomputes the prompt): "
                         "drop one")
    if mode_ == "diffusion" and K == 1 and reveal:
        say(f"note: at K 1 one step reveals the whole block: {_listed(reveal)} "
            f"change{'s' * (len(reveal) == 1)} nothing")


def check_graphs(no_graphs: bool, device: str, no_cache: bool) -> None:
    """A note where --no-graphs changes nothing: off CUDA (CUDA graphs are CUDA's) or with
    --no-cache (the uncached reference is never replayed)."""
    if no_graphs and (no_cache or not device.startswith("cuda")):
        why = "with --no-cache, which replays nothing" if no_cache else f"on {device}"
        say(f"note: --no-graphs changes nothing {why}: every step is issued from Python "
            "already (only CUDA replays captured graphs)")


def check_seed(seed: int | None, src, mode: str, temperature: float,
               policy: str | None) -> None:
    """A note where --seed `seed` (None: not given) changes nothing: weights read from files
    (not drawn from the seed), decoded greedily, and in diffusion mode revealed in an order
    that draws nothing (every policy but random)."""
    if seed is None or src.drawn or temperature > 0:
        return
    if mode == "diffusion" and policy == "random":
        return
    said = "--temperature T to sample" + (", or --policy random" if mode == "diffusion" else "")
    say(f"note: --seed {seed} changes nothing here: the weights are read from {src.ref}, and "
        f"greedy decoding draws nothing (give {said})")


def given_ids(text: str, model_vocab: int, tok) -> list[int]:
    """The ids of --prompt-ids (`parse_ids`), each an id of the model and of its tokenizer
    `tok` (an id past the tokenizer's vocabulary is no token: it reads as nothing, and decoding
    never generates one)."""
    if tok.vocab_size >= model_vocab:  # the model's range is the narrower
        ids = parse_ids(text, model_vocab, "--prompt-ids")
    else:
        ids = parse_ids(text, 2**63, "--prompt-ids")  # (the form alone: the ranges come below)
        bad = next((i for i in ids if i >= tok.vocab_size), None)
        if bad is not None:  # the tokenizer's range, narrower than the model's: said of any id
            raise UsageError(f"--prompt-ids: token id {bad} is outside the tokenizer's "
                             f"vocabulary 0..{tok.vocab_size - 1} ({tok.name}; the model's ids "
                             f"{tok.vocab_size}..{model_vocab - 1} are no tokens)")
    special_in_prompt(ids, tok)
    return ids


def special_in_prompt(ids: list[int], tok) -> None:
    """A note naming the special tokens among prompt ids (the mask, EOS, padding; BOS past the
    first position), each first place: the model reads them as given, where a user may expect
    a mask to be filled or an EOS to end the prompt."""
    names = {getattr(tok, f"{k}_id", None): k for k in ("pad", "mask", "eos", "bos")}
    names.pop(None, None)
    found: dict[int, int] = {}
    for at, i in enumerate(ids):
        if i in names and not (names[i] == "bos" and at == 0):
            found.setdefault(i, at)
    if found:
        said = ", ".join(f"{i} ({names[i].upper() if names[i] != 'pad' else 'padding'}) at "
                         f"position {at}" for i, at in found.items())
        say(f"note: --prompt-ids holds special tokens, read as given: {said}; decoding fills "
            "and stops only in the tokens it generates")


def off_block(src, G: int, tokenizer: Path | None) -> None:
    """Trained weights (`src`, a fsc.source.Source) decoded by block diffusion at a G they
    were not trained at (an autoregressive model at any G): a note on stderr, or UsageError for
    an autoregressive model whose tokenizer has no mask token."""
    source, trained_G = src.ref, src.recipe.block_size
    if not src.learned:
        return  # seeded weights (a recipe's, or a checkpoint of them) learned no G
    if trained_G > 1:
        say(f"note: {source} was trained at G {trained_G}; decoding at G {G} is outside what "
            "it learned")
        return
    adapt = (f"adapt it first (fsc train {source} --G {G if G > 1 else 'N'} --data TEXT ...) "
             "or decode with --mode ar")
    if src.tokenizer(tokenizer, need_mask=False).mask_id is None:
        raise UsageError(f"{source} is autoregressive (G 1) and its tokenizer has no mask token "
                         f"for block diffusion: {adapt}")
    say(f"note: {source} is autoregressive (G 1), never trained to denoise: {adapt}")
