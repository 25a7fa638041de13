"""`fsc decode`: block-diffusion or autoregressive generation from a recipe or checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fsc.blocks import POLICIES
from fsc.cli.bounds import MAX_B, MAX_S, size
from fsc.cli.common import (
    MAX_SEED,
    Backend,
    BackendOpt,
    Mode,
    choices,
    finite,
    given_options,
    print_json,
    say,
    torch_device,
    torch_threads,
)
from fsc.cli.decode_render import fold_bar, show_result
from fsc.prompt import BATCH

Policy = choices("Policy", *POLICIES)
MAX_LENGTH = 2**20  # tokens generated in one call; the memory check bounds it further


def decode(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="SOURCE", help="Recipe file, shipped recipe name, checkpoint "
                                          "dir or training dir (its newest step).")],
    prompt: Annotated[list[str] | None, typer.Option(
        "--prompt", metavar="TEXT", help="Prompt text (one).", show_default=False)] = None,
    prompt_ids: Annotated[list[str] | None, typer.Option(
        "--prompt-ids", metavar="IDS", show_default=False, help="Prompt as comma-separated "
        "token ids (e.g. 1,2,3), instead of --prompt; no BOS is added.")] = None,
    prompt_file: Annotated[list[Path] | None, typer.Option(
        "--prompt-file", metavar="FILE", help="One long prompt: the whole of a UTF-8 text "
        "file (-: standard input) but for its final line end, instead of --prompt.", show_default=False)] = None,
    prompts: Annotated[list[Path] | None, typer.Option(
        "--prompts", metavar="FILE", help="Many prompts, one a line (blank lines skipped), "
        "a .jsonl (or .ndjson) file of objects with a string 'prompt' (other fields kept), or "
        "a .json array of strings or such objects (-: standard input, JSON where it begins "
        "with { or [); decoded in batches, one JSON line a result "
        "on stdout in the file's order, each batch's as it ends. Row i (from 0) draws from "
        "the seed fsc.seeds.derive(--seed, i); its stats give row, line and seed (a recipe's "
        "random weights stay --seed's: fsc build --save them to decode a row alone).",
        show_default=False)] = None,
    batch: Annotated[int | None, typer.Option(
        "--batch", min=1, max=MAX_B, help=f"With --prompts: rows decoded together (default "
        f"{BATCH}), in the file's order, of any lengths (with a sliding window: prompts of one "
        "length).", show_default=False)] = None,
    length: Annotated[
        str, typer.Option("--length", callback=size(1, MAX_LENGTH, "--length"),
                          help="Tokens to generate (at most), e.g. 64 or 1k.")
    ] = "64",
    G: Annotated[int | None, typer.Option("--G", help="Block size G (default: the recipe's).")] = None,
    steps: Annotated[
        int | None, typer.Option("--steps", help="Denoising steps K per block, 1..G (default: G).")
    ] = None,
    mode: Annotated[
        Mode | None,
        typer.Option("--mode", help="diffusion or ar (default: ar when the recipe's G is 1 "
                     "and no --G is given)."),
    ] = None,
    temperature: Annotated[
        float, typer.Option("--temperature", callback=finite(0),
                            help="0 is greedy; else at least 1e-5.")
    ] = 0.0,
    top_p: Annotated[
        float, typer.Option("--top-p", callback=finite(0, 1, low_open=True),
                            help="Nucleus sampling mass, in (0, 1].")
    ] = 1.0,
    top_k: Annotated[int, typer.Option(
        "--top-k", min=0, max=2**31 - 1, help="Sample from the k most likely tokens only (0: all); "
        "then --top-p.")] = 0,
    min_p: Annotated[float, typer.Option(
        "--min-p", callback=finite(0, 1), help="Then sample only from tokens at least this "
        "fraction of the most likely one's probability, in [0, 1] (0: all).")] = 0.0,
    repetition_penalty: Annotated[float, typer.Option(
        "--repetition-penalty", callback=finite(0, low_open=True), help="Make ids already in "
        "the prompt or generated (earlier blocks) less likely, as transformers does: 1 is none, "
        "1.1 a common choice; greedy decoding too.")] = 1.0,
    threshold: Annotated[
        float | None,
        typer.Option("--threshold", callback=finite(0, 1, low_open=True),
                     help="Adaptive parallel decoding: each step reveals every masked position "
                     "whose token the model gives at least this probability, in (0, 1] (at "
                     "temperature 1, before top-k, top-p and min-p), and at least one, or "
                     "more where the even schedule's later steps would not finish the block."),
    ] = None,
    policy: Annotated[
        Policy | None, typer.Option("--policy", help="Which masked positions a step reveals "
                                    "first: confidence (the default: the probability of "
                                    "the token drawn), margin (top-1 minus top-2), entropy "
                                    "(lowest first), each of the model's own distribution (at "
                                    "temperature 1, before the cuts), or random (a seeded order).",
                                    show_default=False)
    ] = None,
    seed: Annotated[int, typer.Option(
        "--seed", min=0, max=MAX_SEED, help="Seed of the sampling, and of a recipe's random "
        "weights.")] = 0,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Recompute the whole prefix at every step.")
    ] = False,
    no_graphs: Annotated[
        bool, typer.Option("--no-graphs", help="On CUDA, issue every step's kernels from Python "
                           "rather than replay a block's steps from one captured CUDA graph.")
    ] = False,
    tokenizer: Annotated[
        Path | None, typer.Option("--tokenizer", help="Local Hugging Face tokenizer directory "
                                  "(default: a checkpoint's own tokenizer.json, else bytes).")
    ] = None,
    prefill_chunk: Annotated[str | None, typer.Option(
        "--prefill-chunk", callback=size(0, MAX_S, "--prefill-chunk"), show_default=False,
        help="Prompt tokens folded in one pass (default 4k), rounded down to whole blocks, at "
        "least one (0: the whole prompt): a long prompt's memory is one chunk's against the "
        "prefix.")
    ] = None,
    backend: BackendOpt = Backend.auto,
    device: Annotated[str, typer.Option(
        "--device", help="auto (CUDA when present), cpu, cuda or cuda:N.")] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout "
                                          "(--prompts prints JSON lines in any case).")] = False,
) -> None:
    """Generate text; prints it with the generation's tokens, seconds, tokens/s, blocks and
    forward passes, the sampling, and the prompt's fold apart (its time and passes).

    Weights are a checkpoint's, or a recipe's seeded random (untrained) ones.
    """
    from fsc.blocks import block_setting
    from fsc.cli.decode_checks import (
        check_ar,
        check_graphs,
        check_seed,
        check_setting,
        given_ids,
        off_block,
    )
    from fsc.cli.decode_prompts import longest_named, prompt_rows
    from fsc.errors import UsageError
    from fsc.prompt import given_prompt, given_prompts, once
    from fsc.source import Source
    from fsc.tokenizer import ByteTokenizer, IdTokenizer, check_vocab

    prompt, prompt_ids, prompt_file, prompts = (once(o, v) for o, v in (
        ("--prompt", prompt), ("--prompt-ids", prompt_ids), ("--prompt-file", prompt_file),
        ("--prompts", prompts)))
    records = given_prompts(prompts, batch, no_cache, prompt, prompt_file, prompt_ids)
    option = ("--prompt" if prompt is not None else "--prompt-file" if prompt_file is not None
              else None)
    prompt = given_prompt(prompt, prompt_file, prompt_ids)
    src = Source.read(source)  # a training directory (or its `latest`): its newest step
    source, source_recipe = src.ref, src.recipe

    # Everything a user can get wrong is checked before torch is imported.
    policy = policy and str(policy)
    check_ar(mode and str(mode), G, steps, threshold, policy)
    mode_, g, k = block_setting(mode and str(mode), G, steps, source_recipe.block_size)
    check_setting(mode and str(mode), mode_, k, threshold, policy, temperature,
                  {"--top-k": top_k, "--top-p": top_p, "--min-p": min_p}, no_cache, prefill_chunk)
    check_seed(seed if given_options(ctx, ("seed",)) else None, src, mode_, temperature, policy)
    if mode_ == "diffusion" and (g != source_recipe.block_size or g == 1):
        off_block(src, g, tokenizer)
    if (mode_ == "ar" and source_recipe.block_size > 1 and src.learned
            and src.training.get("objective") != "ar"):
        say(f"note: {source} was trained by block diffusion at G {source_recipe.block_size}; "
            "decoding it autoregressively (G 1) is outside what it learned")
    # the model's own tokenizer (fsc.source: one rule for every command), with --prompt-ids too:
    # its specials are never generated, and its EOS ends the decode (ids alone, IdTokenizer,
    # for a published model that has none)
    tok = src.tokenizer(tokenizer, need_mask=mode_ != "ar")
    if (prompt_ids is not None and mode_ == "ar" and isinstance(tok, ByteTokenizer)
            and tok.vocab_size > source_recipe.vocab_size):  # too few ids for bytes: ids alone
        tok = IdTokenizer(source_recipe.vocab_size)
    check_vocab(tok, source_recipe)
    if prompt_ids is not None:
        ids = given_ids(prompt_ids, source_recipe.vocab_size, tok)
        prompt, rows = tok.decode(ids), [ids]
    else:  # as the checkpoint was trained
        rows = prompt_rows(tok, src.starts_with_bos(None if tokenizer else tok), prompt,
                           records, prompts, option)
        ids = max(rows, key=len)  # with --prompts: the longest, checked at B rows
    B = min(batch or BATCH, len(records)) if records else 1

    from fsc import ops
    from fsc.decode import PREFILL_CHUNK, DecodeConfig, folding, generate
    from fsc.loading import check_prompt_fits, load_model

    ops.use_backend(str(backend))
    torch_threads()
    device = torch_device(device)
    check_graphs(no_graphs, device, no_cache)
    if backend == Backend.triton and not device.startswith("cuda") and not ops.interpreting():
        raise UsageError(f"--backend triton needs a CUDA device, not {device} (give --device "
                         "cuda, or --backend torch or auto)")
    if prefill_chunk is None:
        prefill_chunk = PREFILL_CHUNK
    with longest_named(records, rows, prompts):
        check_prompt_fits(source_recipe, device, [len(r) for r in rows] if records else len(ids),
                          length, g, cached=not no_cache, B=B, chunk=prefill_chunk)
    # Memory for the whole decode: the cache holds prompt + generated tokens (+ one block).
    recipe, model = load_model(src, device=device, seed=seed, S=len(ids) + length, B=B, G=g,
                               one_token_steps=mode_ == "ar")
    cfg = DecodeConfig(length=length, G=g, steps=k or 1, mode=mode_, temperature=temperature,
                       top_p=top_p, top_k=top_k, min_p=min_p, threshold=threshold, seed=seed,
                       repetition_penalty=repetition_penalty,
                       use_cache=not no_cache,
                       policy=policy or "confidence", graphs=not no_graphs,
                       prefill_chunk=prefill_chunk)
    if records:
        from fsc.cli.decode_prompts import decode_prompts

        return decode_prompts(model, tok, recipe.name, records, rows, cfg, device,
                              batch or BATCH, src.weights(seed))
    with ops.trace() as ran, fold_bar() as report, folding(report):
        res = generate(model, tok, ids, cfg, device=device)
    res.stats["backends"] = ran.backends
    res.stats["weights"] = src.weights(seed)
    res.stats["seed"] = seed  # as a row of --prompts gives its own
    text = tok.decode(res.token_ids)
    if as_json:
        print_json({"recipe": recipe.name, "prompt": prompt, "prompt_ids": ids, "text": text,
                    "token_ids": res.token_ids, "stats": res.stats})
        return
    show_result(prompt, text, res.stats)


def register(app: typer.Typer) -> None:
    app.command("decode")(decode)
