"""`fsc compare RUN_A RUN_B`: did B get faster or slower than A, point by point?"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from fsc.cli.common import JsonOpt, StoreOpt, finite, out, print_json, printable, say, store_dir
from fsc.cli.tables import SUMMARY, WideOpt, fitted, show
from fsc.errors import FscError, UsageError

VERDICT_STYLE = {"slower": "red", "faster": "green", "status": "red",
                 "noise": "dim"}


class Slower(FscError):
    """B is slower than A beyond --fail-above (exit 1, for CI gates)."""


def _x(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}×"


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"


def compare(
    run_a: Annotated[str, typer.Argument(metavar="RUN_A", help="The reference run: its id, "
                                         "the first characters of the id or of its tail "
                                         "(3f35e7), or latest.")],
    run_b: Annotated[str, typer.Argument(metavar="RUN_B", help="The run compared with it.")],
    fail_above: Annotated[float | None, typer.Option(
        "--fail-above", callback=finite(1e-3, 1e3), show_default=False,
        help="Exit 1 when B takes more than this times A's time per block (geometric mean, "
        "e.g. 1.05), or a point ok in A did not fit or failed in B.")] = None,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    wide: WideOpt = False,
) -> None:
    """Compare two profile runs point by point.

    Points are matched on recipe hash, S, B, G, K, dtype, backend and device. Ratios are B / A
    (time above 1: B is slower). The verdict follows the time per block (K steps and a fold):
    noise when A's and B's p10–p90 intervals of it overlap, else faster or slower. The last
    line is the geometric mean over the matched points. Runs timed differently (CUDA graphs
    or eager, or over different --repeats) or on different hardware get a note: line. Eval
    and train runs: fsc report.
    """
    from fsc.results import compare as comparing
    from fsc.results import select
    from fsc.store import Store

    st = Store(store_dir(store))
    st.check()
    given = (run_a, run_b)
    run_a, run_b = _profile_run(st, run_a, "RUN_A"), _profile_run(st, run_b, "RUN_B")
    points = {r: select.rows(st, select.PROFILE, [r]) for r in (run_a, run_b)}
    result = comparing.compare(run_a, points[run_a], run_b, points[run_b])
    if not result.pairs:
        why = comparing.apart(points[run_a], points[run_b])
        raise UsageError(f"runs {run_a} and {run_b} share no point (matched on "
                         f"{', '.join(comparing.KEY)}{'; ' + why if why else ''}): nothing "
                         "to compare")
    why = comparing.regressions(result, fail_above) if fail_above is not None else []
    info = {r["run_id"]: r for r in select.provenance(st, [run_a, run_b])}
    configs = {r: i["config"] for r, i in info.items()}
    status = {r: i["status"] for r, i in info.items()}
    timed = {r: comparing.timing(configs.get(r, {}), points[r]) for r in (run_a, run_b)}
    repeats = {r: comparing.repeats(configs.get(r, {})) for r in (run_a, run_b)}
    devices = {r: comparing.device_names(points[r]) for r in (run_a, run_b)}
    budgets = {r: comparing.budget(configs.get(r, {})) for r in (run_a, run_b)}
    same = (f"note: RUN_A ({printable(given[0], 40)}) and RUN_B ({printable(given[1], 40)}) are "
            f"both run {run_a}: it is compared with itself, every ratio 1"
            + (", and --fail-above passes whatever it measured" if fail_above is not None else "")
            # the same text, as asked: said where a gate passes on it (`latest latest` in CI)
            if run_a == run_b and (given[0] != given[1] or fail_above is not None) else "")
    notes = [n for n in (same,
                         comparing.timing_note(run_a, timed[run_a], run_b, timed[run_b]),
                         comparing.repeats_note(run_a, repeats[run_a], run_b, repeats[run_b]),
                         comparing.device_note(run_a, devices[run_a], run_b, devices[run_b]),
                         comparing.budget_note(run_a, budgets[run_a], run_b, budgets[run_b]),
                         comparing.unfinished_note("A", run_a, status.get(run_a)),
                         comparing.unfinished_note("B", run_b, status.get(run_b))
                         if run_b != run_a else None)
             if n]
    for note in notes:
        say(note)
    if as_json:
        print_json(result.to_dict() | {"fail_above": fail_above, "failed": why,
                                       "timing": {"a": timed[run_a], "b": timed[run_b]},
                                       "repeats": {"a": repeats[run_a], "b": repeats[run_b]},
                                       "devices": {"a": devices[run_a], "b": devices[run_b]},
                                       "memory_budget": {"a": budgets[run_a],
                                                         "b": budgets[run_b]},
                                       "status": {"a": status.get(run_a),
                                                  "b": status.get(run_b)},
                                       "notes": notes})
    else:
        _show(result, wide)
    if why:
        raise Slower("; ".join(why))


def _profile_run(st, text: str, which: str) -> str:
    """The profile run `text` names (an id, a prefix of it or of its tail, or `latest`);
    UsageError for none, or for a run of another kind, with how to compare such runs."""
    from fsc.results import select
    from fsc.store.run_ids import LATEST, resolve_run

    try:
        run_id = resolve_run(st, text, "profile", which)
    except UsageError:
        if text == LATEST:
            raise
        try:  # a run of another kind: say what it is and what compares it
            run_id = resolve_run(st, text)
        except UsageError:
            run_id = None
        if run_id is None:
            raise  # the first error: no profile run
    kind = {r["run_id"]: r["kind"] for r in select.runs_table(st)}.get(run_id)
    if kind is None:
        raise UsageError(f"{which}: no run {printable(run_id, 80)!r} in the store "
                         "(see `fsc runs --kind profile`)")
    if kind != "profile":
        view = {"eval": "evaluation", "train": "training"}.get(kind)
        rows = (f"; its rows: fsc query \"SELECT * FROM {view} WHERE run_id = '{run_id}'\""
                if view else "")
        raise UsageError(f"{which}: run {run_id} is {'an' if kind[0] in 'aeiou' else 'a'} "
                         f"{kind} run; fsc compare compares profile runs point by point (set "
                         f"{kind} runs side by side with fsc report RUN RUN ...{rows})")
    return run_id


COLUMNS = ("recipe", "S", "B", "G", "K", "dtype", "step A ms", "step B ms", "step ×", "fold ×",
           "time ×", "tok/s ×", "peak ×", "verdict")
RATIOS = {"step ×": "step", "fold ×": "fold", "time ×": "time", "tok/s ×": "tokens_per_s",
          "peak ×": "peak_bytes"}


def _show(c, wide: bool) -> None:
    records = []
    for p in c.pairs:
        verdict = (f"{p.status[0]} → {p.status[1]}" if p.verdict == "status" else p.verdict)
        records.append({"recipe": Text(printable(p.recipe)), "step A ms": _ms(p.step[0]),
                        "step B ms": _ms(p.step[1]), "verdict": Text(
                            verdict, VERDICT_STYLE.get(p.verdict, "dim")),
                        **{k: str(p.key[k]) for k in ("S", "B", "G", "K", "dtype")},
                        **{col: _x(p.ratios.get(k)) for col, k in RATIOS.items()}})
    records.append({SUMMARY: True, "recipe": Text("geometric mean", "bold"),
                    **{col: _x(c.geomean[k]) for col, k in RATIOS.items()}})
    show(out, fitted(f"{c.run_b} (B) against {c.run_a} (A): ratios B / A", COLUMNS, records,
                     out, ("fold ×", "peak ×", "step A ms", "step B ms", "tok/s ×", "step ×"),
                     hoist=("G", "K", "dtype"), left=("verdict",), width=None if wide else -1), wide)
    counts: dict[str, int] = {}
    for p in c.pairs:
        counts[p.verdict] = counts.get(p.verdict, 0) + 1
    line = ", ".join(f"{n} {'changed status' if v == 'status' else v}"
                     for v, n in sorted(counts.items()))
    out.print(f"{len(c.pairs)} point{'' if len(c.pairs) == 1 else 's'} matched ({line}); "
              f"{len(c.only_a)} only in A, "
              f"{len(c.only_b)} only in B. time × is the time per block, K steps and a fold.",
              markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)

