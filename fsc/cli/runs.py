"""`fsc runs`: list recent runs; `fsc runs rm` and `fsc runs close` act on one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from fsc.cli.common import (
    Choice,
    JsonOpt,
    StoreOpt,
    err,
    given_options,
    out,
    print_json,
    printable,
    store_dir,
)
from fsc.cli.confirm import confirm
from fsc.cli.tables import WideOpt, fitted, show
from fsc.errors import UsageError
from fsc.jsonsafe import stored
from fsc.text import counted, utc_text

app = typer.Typer(
    name="runs", help="Recent runs; one whole, with why it failed (show); remove one (rm) or "
    "close a dead one (close).",
    add_completion=False, rich_markup_mode=None,
)

RunIdArg = Annotated[str, typer.Argument(metavar="RUN_ID", help="Run id as `fsc runs` lists it, the first "
                                               "characters of the id or of its tail, or latest.")]
ForceOpt = Annotated[bool, typer.Option(
    "--force", help="Go on for a run marked running on another host (fsc cannot tell there "
                    "whether it is alive).")]


class RunKind(Choice):
    """What started a run (Store.start_run's `kind`)."""

    profile = "profile"
    bench = "bench"
    train = "train"
    eval = "eval"


MAX_LIMIT = 10**6


class RunStatus(Choice):
    running = "running"
    dead = "dead"
    finished = "finished"
    failed = "failed"
    interrupted = "interrupted"


LIST_OPTIONS = ("limit", "kind", "status", "recipe", "as_json", "wide")


def _list_options_alone(ctx: typer.Context) -> None:
    """The list's own options given before a subcommand (`fsc runs --kind train rm latest`)
    would be ignored by it: refused, so that no option narrows a removal only in appearance."""
    given = given_options(ctx, LIST_OPTIONS)
    if not given:
        return
    sub = ctx.invoked_subcommand
    takes = {o for p in ctx.command.get_command(ctx, sub).params for o in p.opts}
    where = (f"give it after the subcommand: fsc runs {sub} ... {given[0]}"
             if given[0] in takes else f"`fsc runs {sub} --help` lists what {sub} takes")
    raise UsageError(f"{given[0]} is an option of the list (fsc runs), not of `fsc runs {sub}`; "
                     + where)


def _store(store: Path | None, ctx: typer.Context):
    """The Store of --store given to the subcommand, or to `fsc runs` before it (both only
    when they name the same directory)."""
    from fsc.store import Store

    if store is not None and ctx.obj is not None and store.resolve() != ctx.obj.resolve():
        raise UsageError(f"--store given twice, {ctx.obj} before {ctx.info_name} and {store} "
                         "after it; give one")
    return Store(store_dir(store or ctx.obj))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, s = divmod(round(seconds), 60)
    h, m = divmod(minutes, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{seconds:.1f}s"


def _status(run: dict) -> Text:
    if run["process"] == "dead":
        return Text("dead", "red")
    if run["process"] == "unknown":
        return Text(f"running on {printable(run['host'], 40)}")
    return Text(run["status"])


@app.callback(invoke_without_command=True)
def runs(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1, max=MAX_LIMIT,
                                       help="How many recent runs.")] = 20,
    kind: Annotated[RunKind | None, typer.Option("--kind", help="Only runs of this kind.")] = None,
    status: Annotated[RunStatus | None, typer.Option(
        "--status", help="Only runs in this status; dead: marked running, process gone.")] = None,
    recipe: Annotated[str | None, typer.Option(
        "--recipe", help="Only runs that measured (or were asked to measure) this recipe, or it "
        "changed by --set.")] = None,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    wide: WideOpt = False,
) -> None:
    """Recent runs, newest first: status, point counts, duration.

    A run whose process was killed (SIGKILL, power loss) stays marked running in the store;
    it is listed as dead (its pid is gone on this host) until `fsc runs close RUN_ID` marks
    it interrupted. In --json such a run has status running and process dead. `fsc runs show
    RUN_ID` shows one run whole, with the error of a failed one.
    """
    ctx.obj = store
    if ctx.invoked_subcommand is not None:
        _list_options_alone(ctx)
        return
    st = _store(store, ctx)
    st.check()
    found = st.runs(limit, kind=kind and kind.value, status=status and status.value,
                    recipe=recipe)
    if as_json:  # times as `fsc query --json` writes them
        print_json(stored(found))
        return
    if not found:
        out.print("no runs" + (" match" if kind or status or recipe else ""))
        return
    # what each run stored: points ok/oom/error (profile), logged steps (train), cells (eval);
    # the run id holds the start time, so `started` is the first to go on a narrow terminal,
    # and the id, which a user copies, stays whole when all but the status have gone
    records = [{
        "run_id": Text(printable(r["run_id"])), "kind": Text(printable(r["kind"])),
        "status": _status(r), "started": r["started_at"].isoformat(sep=" ", timespec="seconds"),
        "duration": _duration(r["duration_s"]),
        "stored": _stored(r),
        "command": Text(printable(r["command"] or "", 1000))} for r in found]
    show(out, fitted("runs (newest first; times UTC)", ("run_id", "kind", "status", "started",
                     "duration", "stored", "command"), records, out,
                     ("started", "duration", "command", "stored", "kind"), text=("command",),
                     width=None if wide else -1,
                     left=("run_id", "kind", "status", "started", "duration")), wide)
    if any(r["status"] == "failed" for r in found):
        err.print("why a run failed: fsc runs show RUN_ID", style="dim")


def _stored(r: dict) -> str:
    """A run's rows, named by what they are (a bench run's: its figures)."""
    if r["kind"] == "train":  # a row a --log-every; where it ended, short of its steps
        short = (r.get("last_step") is not None and r.get("steps") is not None
                 and r["last_step"] < r["steps"])
        return counted(r["rows_logged"], "logged step") + (
            f", to step {r['last_step']:,} of {r['steps']:,}" if short else "")
    if r["kind"] == "eval":
        return counted(r["rows_logged"], "cell")
    if r["kind"] == "profile":
        return ", ".join([f"{r['points_ok']} ok"] + [f"{r[f'points_{s}']} {s}" for s in
                                                     ("oom", "error") if r[f"points_{s}"]])
    return counted(r["bench_figures"], "figure")


@app.command("show")
def show_run(
    ctx: typer.Context, run_id: RunIdArg, store: StoreOpt = None, as_json: JsonOpt = False,
) -> None:
    """One run whole: status, times, host, command, what it stored, the error that ended a
    failed run, and its config."""
    import json

    from fsc.store.run_ids import resolve_run

    st = _store(store, ctx)
    st.check()
    run = st.runs(1, run_id=resolve_run(st, run_id))[0]
    quoted = run["run_id"].replace("'", "''")
    _, rows = st.query(f"SELECT config FROM runs WHERE run_id = '{quoted}'")
    config = rows[0][0] if rows else None
    try:
        config = json.loads(config) if config else None
    except json.JSONDecodeError:  # text put there by `fsc query --write`: shown as it is
        pass
    if as_json:
        print_json(stored({**run, "config": config}))
        return
    resumed = ((("resumed", utc_text(run["resumed_at"], "-")),
                ("stopped", f"{_duration(run['stopped_s'])} between its sessions (not in its "
                 "duration)")) if run["resumed_at"] else ())
    for key, value in (
            ("run", f"{run['run_id']} ({run['kind']})"), ("status", _status(run).plain),
            ("started", utc_text(run["started_at"])), *resumed,
            ("ended", utc_text(run["ended_at"], "-")), ("duration", _duration(run["duration_s"])),
            ("host", f"{run['host']} (pid {run['pid']})"), ("command", run["command"] or ""),
            ("stored", _stored(run)),
            # a stop asked for (Ctrl-C, SIGTERM) is no error: said as what ended the run
            ("note" if run["status"] == "interrupted" else "error", run["error"] or "-"),
            ("config", "-" if config is None else config if isinstance(config, str)
             else json.dumps(config, sort_keys=True))):
        out.print(Text(f"{key:9}{printable(value, None)}"), soft_wrap=True)


@app.command("rm")
def rm(
    ctx: typer.Context,
    run_id: RunIdArg,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask.")] = False,
    force: ForceOpt = False,
    store: StoreOpt = None,
) -> None:
    """Remove a run with everything it stored (points and their samples, benchmark figures,
    training steps, eval cells), in one transaction. Asks first at a terminal; elsewhere needs
    --yes. A run whose process is alive is refused."""
    from fsc.store.run_ids import resolve_run

    st = _store(store, ctx)
    st.check(write=True)
    run_id = resolve_run(st, run_id)
    st.check_settled(run_id, force)  # before asking: a live run is refused, yes or no
    confirm(f"remove run {run_id} with everything it stored", yes)
    n = st.remove_run(run_id, force=force)
    what = (counted(n["points"], "point"), counted(n["samples"], "sample"),
            counted(n["bench_results"], "benchmark figure"),
            counted(n["train_steps"], "training step"), counted(n["eval_cells"], "eval cell"))
    err.print(Text(f"removed run {printable(run_id)}: {', '.join(what)}"), soft_wrap=True)


@app.command("close")
def close(
    ctx: typer.Context, run_id: RunIdArg, force: ForceOpt = False, store: StoreOpt = None,
) -> None:
    """Mark a run that is still 'running' but whose process is gone as 'interrupted' (it keeps
    every point). Refused while the process is alive."""
    from fsc.store.run_ids import resolve_run

    st = _store(store, ctx)
    st.check(write=True)
    run_id = resolve_run(st, run_id)
    st.close_run(run_id, force=force)
    err.print(Text(f"closed run {printable(run_id)}: interrupted"), soft_wrap=True)
