"""`fsc eval`: niah by length × depth, mqar by pairs × length, copy by length, the RULER-style
suite (niah's variants, vt, cwe, fwe), held-out loss, genppl. The work is fsc.scale.evaluation."""

from __future__ import annotations

from typing import Annotated

import typer

from fsc.blocks import MAX_G
from fsc.cli.bounds import MAX_B, MAX_S, joined, listed, parse_depths, parse_floats, parse_sizes
from fsc.cli.common import (
    DeviceOpt,
    JsonOpt,
    Mode,
    StoreOpt,
    check_store,
    command_line,
    err,
    finite,
    given_options,
    print_json,
    say,
    stopped_run,
    store_option,
    torch_threads,
)
from fsc.cli.eval_answers import json_row
from fsc.cli.eval_harness import HARNESS_OPTIONS, evaluate_harness
from fsc.cli.eval_options import (
    EXPORT_UNREAD,
    GRID_OPTIONS,
    MAX_PAIRS,
    MAX_SAMPLES,
    BaselineOpt,
    DataOpt,
    IncludePathOpt,
    OutputPathOpt,
    ResumeOpt,
    ScorerOpt,
    Task,
    TokenizerOpt,
    documents,
    export_prompts,
    with_task_options,
)
from fsc.cli.eval_render import SampleBar, render, show_cell
from fsc.cli.executors import with_executor_options
from fsc.data.tasks import MAX_KEY_DIGITS
from fsc.recipe_fields import WEIGHT_FREE
from fsc.scale import ExecutorSettings
from fsc.text import counted


@with_executor_options
@with_task_options()
def evaluate(
    ctx: typer.Context,
    source: Annotated[str | None, typer.Argument(
        metavar="CKPT",
        help="Checkpoint dir or training dir (its latest step); a recipe evaluates seeded "
        "random weights.", show_default=False)] = None,
    task: Annotated[Task | None, typer.Option(
        "--task", help="niah, mqar, copy, vt, cwe, fwe, ruler (all of the suite), loss, "
        "genppl or harness (default: the task of the training data: passkey niah, mqar mqar, "
        "copy copy, text loss; genppl with --scorer; harness with --tasks; niah for a recipe).",
        show_default=False)] = None,
    lengths: listed(
        "--lengths", "Prompt lengths, e.g. 256,512,1k,2k,4k (default: 1, 2, 4, 8 and 16 "
        "times the training length, 256 untrained; loss: the training length; genppl: tokens "
        "per sample, 128).") = None,
    depths: listed(
        "--depths", "niah, ruler: needle depths, 0 to 1 (default 0,0.25,0.5,0.75,1).") = None,
    pairs: listed(
        "--pairs", "mqar, loss on mqar data: numbers of pairs, e.g. 4,8,16 (default: as "
        "trained, else 8).") = None,
    samples: Annotated[int, typer.Option("--samples", min=1, max=MAX_SAMPLES,
                                         help="Prompts per cell (loss: sequences).")] = 20,
    steps: listed(
        "--steps", "Denoising steps K per block (default: G; genppl: a list, default "
        "1, 2, 4 ... G; harness: generation's K).") = None,
    mode: Annotated[Mode | None, typer.Option(
        "--mode", help="diffusion or ar (default: how the checkpoint was trained; ar when G is 1).",
        show_default=False)] = None,
    batch: Annotated[int, typer.Option("--batch", min=1, max=MAX_B,
                                       help="Prompts decoded together (loss: sequences a "
                                       "pass; harness: requests a batch).")] = 20,
    data: DataOpt = None,
    needle_digits: Annotated[int | None, typer.Option(
        "--needle-digits", min=1, max=MAX_KEY_DIGITS, help="niah, ruler, loss on passkey "
        "data: digits of the key (default: as trained, or the smallest multiple of G that is "
        "at least 4).",
        show_default=False)] = None,
    text_field: Annotated[str | None, typer.Option(
        "--text-field", help="loss, genppl: the field of a .jsonl/.parquet file's rows (or "
        "an hf: dataset's) that holds the text (default: text, or the one trained on).",
        show_default=False)] = None,
    tokenizer: TokenizerOpt = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**62, help="Seed of the prompts "
                                      "(loss: sequences, and masks of the bound; genppl: and "
                                      "its draws; harness: the model's draws, and, given, "
                                      "the harness's four seeds, few-shot included, as "
                                      "lm_eval --seed sets them).")] = 0,
    scorer: ScorerOpt = None,
    G: listed(
        "--G", "genppl: block sizes decoded with, e.g. 4,8 (default: the recipe's).") = None,
    policy: listed(
        "--policy", "genppl: reveal policies, a list of confidence (the default), random, "
        "margin, entropy.") = None,
    threshold: listed(
        "--threshold", "genppl: thresholds τ in (0, 1] of adaptive parallel decoding, "
        "e.g. none,0.9 (default: none).") = None,
    temperature: listed(
        "--temperature", "genppl: sampling temperatures, e.g. 1,0.8 (0 is greedy; "
        "default 1).") = None,
    top_p: Annotated[float | None, typer.Option(
        "--top-p", callback=finite(0, 1, low_open=True),
        help="genppl: nucleus sampling mass, in (0, 1] (default 1).",
        show_default=False)] = None,
    prompt_length: Annotated[int | None, typer.Option(
        "--prompt-length", min=0, max=MAX_S, help="genppl: tokens of the --data text before "
        "each sample (0: from BOS; default 64).", show_default=False)] = None,
    baseline: BaselineOpt = None,
    ngram: Annotated[int | None, typer.Option(
        "--ngram", min=1, max=64, help="genppl: n of the repeated n-gram fraction (default 4).",
        show_default=False)] = None,
    mauve: Annotated[bool, typer.Option(
        "--mauve", help="genppl: MAUVE against the reference text too, the data's own continuations "
        "(fsc[quality]).")] = False,
    tasks: listed(
        "--tasks", "harness: lm-evaluation-harness tasks, e.g. arc_easy,piqa (fsc[harness]).") = None,
    include_path: IncludePathOpt = None,
    limit: Annotated[float | None, typer.Option(
        "--limit", callback=documents, help="harness: at most this many documents per task, "
        "or (below 1) this fraction of them, as lm_eval --limit.", show_default=False)] = None,
    num_fewshot: Annotated[int | None, typer.Option(
        "--num-fewshot", min=0, max=64, help="harness: few-shot examples per prompt (default: "
        "the task's).", show_default=False)] = None,
    max_length: Annotated[int | None, typer.Option(
        "--max-length", min=2, max=MAX_S, help="harness: the tokens a request is cut to (from "
        "the left), and the window a rolling text is read in (default: a published model's "
        "own, as the harness's hf model reads it; 2048 for fsc's).", show_default=False)] = None,
    mc_samples: Annotated[int, typer.Option(
        "--mc-samples", min=1, max=4096, help="harness, diffusion checkpoints: Monte Carlo "
        "draws per block of the likelihood bound.")] = 32,
    log_samples: Annotated[bool, typer.Option("--log-samples", help="harness: write each "
                                              "document's requests and answers too.")] = False,
    output_path: OutputPathOpt = None,
    changes: Annotated[list[str] | None, typer.Option(
        "--set", metavar="KEY=VALUE", help="Score the checkpoint with a recipe field that "
        f"changes no weight set otherwise (repeatable): {', '.join(WEIGHT_FREE)}, e.g. --set "
        "attention.logn=128; the rows name the recipe RECIPE+KEY=VALUE.",
        show_default=False)] = None,
    device: DeviceOpt = "auto",
    resume: ResumeOpt = None,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    *,
    scale: ExecutorSettings,
    suite: dict,
) -> None:
    """Score a checkpoint: retrieval (niah, mqar, copy) and the RULER-style suite (niah
    --variant, vt, cwe, fwe) decoded by the cached decoder, held-out loss (the bound over every
    block, or AR NLL), or generative perplexity (genppl: samples by K, G, policy and
    temperature, scored by a separate AR --scorer, beside the reference text: the data's own
    continuations). A row per cell in the store (view `evaluation`); --resume RUN_ID continues
    a run."""
    from fsc.errors import UsageError
    from fsc.eval.request import EvalRequest, precheck
    from fsc.interrupts import Stopped
    from fsc.scale import Watch

    lengths, depths, pairs, steps, G, policy, threshold, temperature, tasks = joined(
        lengths, depths, pairs, steps, G, policy, threshold, temperature, tasks)
    (data,), (tokenizer,), (scorer,), (baseline,), (include_path,), (output_path,), (resume,) = (
        data, tokenizer, scorer, baseline, include_path, output_path, resume)  # one each
    if (source is None) == (resume is None):
        raise UsageError("give a checkpoint (CKPT), or --resume RUN_ID to continue a run"
                         + (", not both (a resumed run scores its own checkpoint)"
                            if resume is not None else ""))
    if source is not None and source.startswith("hf:"):  # not seeded weights under its name
        from fsc.source import config_alone

        raise UsageError(f"fsc eval would score seeded random weights: {config_alone(source)}")
    if tasks is not None and task is None:
        task = Task.harness
    harness_given = given_options(ctx, HARNESS_OPTIONS)
    if task != Task.harness and harness_given:
        raise UsageError(f"{', '.join(harness_given)}: for --task harness only")
    if task == Task.harness:
        evaluate_harness(ctx, source, resume, GRID_OPTIONS, store, as_json, tasks=tasks,
                         include_path=include_path, limit=limit, num_fewshot=num_fewshot,
                         max_length=max_length, mc_samples=mc_samples, batch=batch, seed=seed,
                         device=device, steps=steps, log_samples=log_samples,
                         output_path=output_path)
        return
    if resume is not None:
        given = given_options(ctx, GRID_OPTIONS)
        if given:
            raise UsageError(f"--resume {resume} continues the run's own grid; drop "
                             f"{', '.join(given)}")
    asked = EvalRequest(
        source or "", str(task) if task is not None else None,
        lengths=tuple(parse_sizes(lengths, "--lengths", 1, MAX_S)) if lengths is not None else None,
        depths=tuple(parse_depths(depths)) if depths is not None else None,
        pairs=tuple(parse_sizes(pairs, "--pairs", 1, MAX_PAIRS)) if pairs is not None else None,
        samples=samples, mode=mode and str(mode), batch=batch, data=data,
        steps=tuple(parse_sizes(steps, "--steps", 1, MAX_G)) if steps is not None else None,
        needle_digits=needle_digits, text_field=text_field,
        tokenizer=str(tokenizer) if tokenizer is not None else None, seed=seed, device=device,
        scorer=scorer, G=tuple(parse_sizes(G, "--G", 1, MAX_G)) if G is not None else None,
        policies=tuple(p.strip() for p in policy.split(",")) if policy is not None else None,
        thresholds=tuple(parse_floats(threshold, "--threshold", 0, 1, low_open=True, none=True))
        if threshold is not None else None,
        temperatures=tuple(parse_floats(temperature, "--temperature", 0, 100))
        if temperature is not None else None, top_p=top_p,
        prompt_length=prompt_length, baseline=baseline, ngram=ngram, mauve=mauve,
        changes=tuple(changes or ()), resume=resume,
        **{k: v for k, v in suite.items() if k != "export"})
    if resume is None:  # the options it takes, before torch
        precheck(asked)
    if suite.get("export") is not None:  # the prompts written, not scored
        export_prompts(asked, suite["export"], as_json, given_options(ctx, EXPORT_UNREAD))
        return
    from fsc.scale.evaluation import evaluate

    torch_threads()
    st = check_store(store)
    try:
        with SampleBar() as bar:
            done = evaluate(asked, scale, st, command_line(),
                            Watch(say=say, started=bar.start, stored=show_cell,
                                  advanced=bar.advance))
    except Stopped as e:
        raise typer.Exit(stopped_run(e, f"{counted(e.kept, 'cell')} of run {e.run_id} stored",
                                     f"fsc eval --resume {e.run_id}{store_option(store)}",
                                     as_json)) from None
    if done.before:
        err.print(f"run {done.run_id} held {counted(done.before, 'cell')}; {len(done.cells)} "
                  "scored now", soft_wrap=True)
    if as_json:
        print_json({"run_id": done.run_id, "store": str(done.store), "before": done.before,
                    "checkpoint": done.grid.checkpoint, "task": done.grid.task, "warnings":
                    list(done.grid.warnings), "rows": [json_row(c) for c in done.cells]})
        return
    render(done.every_cell(), done.grid.task, done.grid.recipe, done.run_id, done.grid.warnings)


def register(app: typer.Typer) -> None:
    app.command("eval")(evaluate)
