"""`fsc eval`: needle retrieval by length × depth, mqar by pairs × length, held-out loss."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from fsc.blocks import MAX_G, block_setting
from fsc.cli.bounds import MAX_B, MAX_S
from fsc.cli.common import (
    Choice,
    JsonOpt,
    Mode,
    StoreOpt,
    err,
    out,
    print_json,
    printable,
    store_dir,
    torch_threads,
)
from fsc.cli.profile import (
    AddressOpt,
    Executor,
    ExecutorOpt,
    GpusPerNodeOpt,
    PartitionOpt,
    RetriesOpt,
    SlurmTimeOpt,
    WorkersOpt,
    executor_settings,
    parse_sizes,
    run_device,
    slurm_folder,
)
from fsc.errors import UsageError
from fsc.train.tasks import MAX_KEY_DIGITS

MAX_SAMPLES = 100_000


class Task(Choice):
    niah = "niah"
    mqar = "mqar"
    loss = "loss"


def _depths(text: str) -> list[float]:
    values = []
    for part in text.split(","):
        try:
            v = float(part)
        except ValueError:
            raise UsageError(f"--depths: {part.strip()[:40]!r} is not a number in [0, 1]") from None
        if not 0 <= v <= 1:
            raise UsageError(f"--depths: {v} is not in [0, 1] (0 = start, 1 = end)")
        values.append(v)
    return values


def evaluate(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(
        metavar="CKPT",
        help="Checkpoint dir or training dir (its latest step); a recipe evaluates seeded "
        "random weights.")],
    task: Annotated[Task, typer.Option("--task", help="niah, mqar or loss.")] = Task.niah,
    lengths: Annotated[str | None, typer.Option(
        "--lengths", help="Prompt lengths, e.g. 256,512,1k,2k,4k (default: 1, 2, 4, 8 and 16 "
        "times the training length; loss: the training length).", show_default=False)] = None,
    depths: Annotated[str, typer.Option(
        "--depths", help="niah: needle depths in [0, 1].")] = "0,0.25,0.5,0.75,1",
    pairs: Annotated[str, typer.Option("--pairs", help="mqar: numbers of pairs, e.g. 4,8,16.")] = "8",
    samples: Annotated[int, typer.Option("--samples", min=1, max=MAX_SAMPLES,
                                         help="Prompts per cell (loss: sequences).")] = 20,
    steps: Annotated[int | None, typer.Option(
        "--steps", min=1, max=MAX_G, help="Denoising steps K per block (default: G).",
        show_default=False)] = None,
    mode: Annotated[Mode | None, typer.Option(
        "--mode", help="diffusion or ar (default: how the checkpoint was trained; ar when G is 1).",
        show_default=False)] = None,
    batch: Annotated[int, typer.Option("--batch", min=1, max=MAX_B,
                                       help="Prompts decoded together.")] = 20,
    data: Annotated[str | None, typer.Option(
        "--data", help="loss: a .txt/.jsonl/.parquet file or a task (passkey, mqar, copy).",
        show_default=False)] = None,
    needle_digits: Annotated[int | None, typer.Option(
        "--needle-digits", min=1, max=MAX_KEY_DIGITS, help="niah: digits of the key (default: as trained, or the "
        "smallest multiple of G that is at least 4).",
        show_default=False)] = None,
    text_field: Annotated[str, typer.Option("--text-field", help="loss: the text field.")] = "text",
    tokenizer: Annotated[Path | None, typer.Option(
        "--tokenizer", help="Local Hugging Face tokenizer directory (default: as trained).",
        show_default=False)] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**62, help="Seed of the prompts.")] = 0,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda, cuda:N or auto.")] = "cpu",
    executor: ExecutorOpt = Executor.local,
    workers: WorkersOpt = 1,
    address: AddressOpt = "auto",
    retries: RetriesOpt = 1,
    slurm_partition: PartitionOpt = None,
    slurm_gpus_per_node: GpusPerNodeOpt = 1,
    slurm_time: SlurmTimeOpt = 60,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Score a checkpoint: the answers are decoded by the cached decoder; a row per cell in the
    store (view `evaluation`), printed as a heatmap table."""
    scale = executor_settings(ctx)
    from fsc.source import checkpoint_config, load_source_recipe
    from fsc.tokenizer import load_tokenizer
    from fsc.train.data import DataOptions, open_data
    from fsc.train.loop import resolve_checkpoint

    source = str(resolve_checkpoint(source))
    recipe = load_source_recipe(source)
    trained = checkpoint_config(source).get("training")  # what `fsc train` recorded
    trained = trained if isinstance(trained, dict) else {}
    train_len = trained.get("seq_len")
    objective = trained.get("objective")
    if mode is None and objective is not None:
        mode = Mode.ar if objective == "ar" else Mode.diffusion
    mode_, G, K = block_setting(mode and str(mode), None, steps, recipe.block_size)
    tok_spec = tokenizer if tokenizer is not None else trained.get("tokenizer")
    tok = load_tokenizer(tok_spec)
    if tok.vocab_size > recipe.vocab_size:
        raise UsageError(f"the tokenizer has {tok.vocab_size} tokens but {recipe.name}'s "
                         f"vocab_size is {recipe.vocab_size}")
    digits = needle_digits or trained.get("needle_digits")  # None: the default for G
    base = train_len or 256
    if lengths is None:
        sizes = [base] if task == Task.loss else [base * m for m in (1, 2, 4, 8, 16)]
    else:
        sizes = parse_sizes(lengths, "--lengths", 1, MAX_S)
    for n in sizes:
        if n % G:
            raise UsageError(f"--lengths: {n} is not a multiple of the block size G = {G}")
    depth_list = _depths(depths)
    pair_list = parse_sizes(pairs, "--pairs", 1, 676)
    options = DataOptions(digits, pair_list[0], text_field)
    if task == Task.loss:
        if data is None:
            raise UsageError("--task loss needs --data (a text file or a task)")
        for n in sizes:
            open_data(data, tok, n, G, seed, options, option="--lengths")  # a bad file, up front
    elif data is not None:
        raise UsageError(f"--data is for --task loss; --task {task} makes its own prompts")
    from fsc.train.tasks import MQAR, Passkey

    for n in sizes:  # a length too short for the prompt: one line, before any work
        if task == Task.niah:
            Passkey(tok, n, G, digits, option="--lengths")
        elif task == Task.mqar:
            for p in pair_list:
                MQAR(tok, n, G, p, option="--lengths")


    from fsc.loading import check_fits
    from fsc.train.evaluate import EvalSettings, model_to_score

    torch_threads()
    remote = scale["remote"]
    device = run_device(device, scale["executor"], remote)
    if scale["executor"] == "local":
        for n in sizes:
            check_fits(recipe, device, S=n, B=min(batch, samples), G=G)
    settings = EvalSettings(mode_, K or 1, samples, batch, seed, train_len)
    model = engine = None
    if remote:
        from fsc.scale.work import EvalJob

        job = EvalJob(source, str(task), tuple(depth_list), tuple(pair_list), settings, digits,
                      device, str(tok_spec) if tok_spec is not None else None, data, options,
                      mode_ == "ar")
        per_length = {"niah": len(depth_list), "mqar": len(pair_list), "loss": 1}[str(task)]
        engine = _engine(device, scale, per_length)
    else:
        model = model_to_score(source, device, seed, mode_ == "ar")

    from fsc.interrupts import StopSignals, exit_code, signal_name, signum_of
    from fsc.provenance import environment
    from fsc.store import Store

    st = Store(store_dir(store))
    st.register_recipe(recipe.name, recipe.recipe_hash, recipe.to_yaml(), recipe.layer_plan)
    env_id = st.register_environment(environment(device))
    config = {"checkpoint": source, "task": str(task), "lengths": sizes, "depths": depth_list,
              "pairs": pair_list, "samples": samples, "mode": mode_, "G": G, "K": K,
              "seed": seed, "data": data, "train_length": train_len,
              "recipe": recipe.name, "recipe_hash": recipe.recipe_hash}
    run_id = st.start_run("eval", " ".join(["fsc", *sys.argv[1:]]), env_id, config)
    facts = {"checkpoint": source, "recipe": recipe.name, "recipe_hash": recipe.recipe_hash,
             "mode": mode_, "G": G, "K": K, "train_length": train_len}
    rows: list[dict] = []

    stops = StopSignals()

    def record(row: dict) -> None:
        row = {**facts, **row}
        with stops.held():  # a stop signal waits for the write: a cell is stored whole
            st.add_rows("eval_cells", run_id, [row])
            rows.append(row)
        err.print(f"  {row['task']} length {row['length']}"
                  + (f" depth {row['depth']:g}" if row["depth"] is not None else "")
                  + (f" pairs {row['pairs']}" if row["pairs"] is not None else "")
                  + (f": {row['accuracy']:.2f}" if row["accuracy"] is not None else ""),
                  markup=False, highlight=False)

    if engine is not None and hasattr(engine, "folder"):
        engine.folder = slurm_folder(st, run_id)
    try:
        with stops:
            if engine is not None:
                _on_engine(engine, job, sizes, record)
                rows.sort(key=lambda r: (r["length"], r["depth"] or 0, r["pairs"] or 0))
            else:
                _here(model, tok, task, sizes, depth_list, pair_list, settings, digits, device,
                      data, options, record)
    except KeyboardInterrupt as e:
        signum = signum_of(e)
        st.finish_run(run_id, "interrupted", f"interrupted ({signal_name(signum)}) after "
                      f"{len(rows)} cells")
        print(f"interrupted: {len(rows)} cells of run {run_id} are stored", file=sys.stderr)
        raise typer.Exit(exit_code(signum)) from None
    except BaseException as e:
        st.finish_run(run_id, "failed", f"{type(e).__name__}: {e}")
        raise
    st.finish_run(run_id, "finished")
    if as_json:
        print_json({"run_id": run_id, "store": str(st.file), "checkpoint": source,
                    "task": str(task), "rows": rows})
        return
    _render(rows, str(task), recipe.name, run_id)


def _here(model, tok, task, sizes, depth_list, pair_list, settings, digits, device, data,
          options, record) -> None:
    """The grid in this process, cell by cell."""
    import torch

    from fsc.train.evaluate import heldout_loss, mqar, niah

    with torch.no_grad():
        if task == Task.niah:
            niah(model, tok, sizes, depth_list, settings, digits, device, on_cell=record)
        elif task == Task.mqar:
            mqar(model, tok, sizes, pair_list, settings, device, on_cell=record)
        else:
            for n in sizes:
                for row in heldout_loss(model, tok, data, n, settings, options, device):
                    record(row)


def _engine(device: str, scale: dict, per_length: int):
    """Local workers, a Ray cluster (joined now) or Slurm arrays, for an eval grid."""
    from fsc.scale import executors, work

    return executors.engine_for(scale, device.startswith("cuda"), work.evaluate,
                                work.evaluate_to_file,
                                lambda text: err.print(text, markup=False, highlight=False),
                                per_length)


def _on_engine(engine, job, sizes: list[int], record) -> None:
    """One group per length, scored where the engine runs it; rows stored as they arrive. A
    length given up after its retries fails the run (the cells that came are kept)."""
    from fsc.scale.executors import ExecutorError
    from fsc.scale.work import Group

    failed = []
    for arrival in engine.arrivals(job, [Group(i, (n,)) for i, n in enumerate(sizes)]):
        for row in arrival.rows:
            record(row)
        if arrival.failure is not None:
            failed.append(f"length {arrival.group.points[0]}: {arrival.failure}")
    if failed:
        raise ExecutorError(f"{len(failed)} of {len(sizes)} lengths failed ({failed[0]})")


def _shade(acc: float) -> str:
    """A heatmap cell style: red at 0 through yellow to green at 1."""
    r = int(255 * min(1.0, 2 * (1 - acc)))
    g = int(255 * min(1.0, 2 * acc))
    return f"black on rgb({r},{g},60)"


def _render(rows: list[dict], task: str, recipe: str, run_id: str) -> None:
    from rich.table import Table
    from rich.text import Text

    if task == "loss":
        out.print(f"{printable(recipe, 60)}: held-out loss (run {run_id})", markup=False,
                  highlight=False)
        table = Table()
        for c in ("length", "sequences", "loss (nats/token)", "± s.e."):
            table.add_column(c, justify="right")
        for r in rows:
            table.add_row(str(r["length"]), str(r["n"]), f"{r['loss']:.4f}",
                          "–" if r.get("loss_se") is None else f"{r['loss_se']:.4f}")
        out.print(table)
        for r in rows:
            if (r.get("distinct_sequences") or r["n"]) < r["n"]:
                err.print(f"length {r['length']}: the data holds {r['distinct_sequences']} "
                          f"distinct sequences; the {r['n']} scored reuse them, so the spread "
                          "is understated (give --samples at most that, or more text)",
                          soft_wrap=True)
        return
    key = "depth" if task == "niah" else "pairs"
    cols = sorted({r["length"] for r in rows})
    out.print(f"{printable(recipe, 60)}: {task} accuracy by {key} × length (run {run_id})",
              markup=False, highlight=False)
    table = Table()
    table.add_column(key, justify="right")
    for n in cols:
        ratio = next(r["length_ratio"] for r in rows if r["length"] == n)
        table.add_column(f"{n}" + (f" ({ratio:g}×)" if ratio else ""), justify="right")
    for k in sorted({r[key] for r in rows}):
        cells = {r["length"]: r for r in rows if r[key] == k}
        table.add_row(f"{k:g}", *[
            Text(f" {cells[n]['accuracy']:.2f} ", style=_shade(cells[n]["accuracy"]))
            if n in cells else "-"
            for n in cols])
    out.print(table)


def register(app: typer.Typer) -> None:
    app.command("eval")(evaluate)
