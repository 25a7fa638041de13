"""`fsc report`: the results of some runs as one page: the page's model (`Report`, its
`Section`s, `Figure`s and `Table`s) and its composition from the store (`pick`, `compose`,
`build`). `fsc.results.report_render` writes it as HTML or Markdown.

Sections follow the runs' kinds: a profile run gives the latency, memory, throughput and
roofline figures, its points and each recipe against the baseline at each S; training runs their
loss curves and a summary; evaluation runs the needle heatmaps, retrieval against length and
their cells. Every run's provenance closes the page: command, status, environment, git commit,
kernel settings.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fsc import noise
from fsc.errors import UsageError
from fsc.eval.columns import CUTS, cut_words
from fsc.results import eval_figures, figures, loss_bound, plots, quality, select
from fsc.results.compare import unfinished
from fsc.store import Store
from fsc.sweep_results import VERSUS_KEY, PointResult, baseline_notes
from fsc.sweep_results import compare as against_baseline
from fsc.text import counted, human_bytes, utc_text

PROFILE_FIGURES = ("latency", "memory", "throughput", "roofline")
EVAL_FIGURES = ("niah", "retrieval", "ruler", "quality")
EVAL_IF_ANY = ("ruler", "quality")  # drawn only when the runs hold their rows


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    details: list[tuple[str, str]] = field(default_factory=list)  # (name, long text), folded


@dataclass
class Figure:
    kind: str
    caption: str
    svg: str = ""
    png: bytes = b""
    missing: str = ""  # why it could not be drawn


@dataclass
class Section:
    title: str
    text: str = ""
    figures: list[Figure] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


@dataclass
class Report:
    title: str
    generated: str
    run_ids: list[str]
    sections: list[Section]
    note: str = ""  # how the runs were picked


# ---- what goes in --------------------------------------------------------------------------

CAPTIONS = {
    "latency": "Median step time against context length; bars p10–p90, dashed the cost-model "
               "floor where the device is known, × a point that did not fit.",
    "memory": "Peak memory against context length; dotted the device's memory, dashed the "
              "run's --memory-budget where it had one, × a point's predicted need that did "
              "not fit.",
    "throughput": "Tokens per second against batch, one panel per context length.",
    "roofline": "Achieved compute and bandwidth of each step against its arithmetic intensity.",
    "loss": "Training loss per optimizer step (and the in-loop eval, when logged).",
    "niah": "Needle retrieval, exact match, by prompt length and depth.",
    "retrieval": "Retrieval (and copying) against prompt length ÷ training length, mean over "
                 "depths.",
    "ruler": "RULER-style score (the fraction of expected strings found) against prompt "
             "length ÷ training length: a panel per task and variant, and their average.",
    "quality": "Generative perplexity under the scorer against decoding speed, a panel per "
               "scorer, data, length and prompt length (Gen-PPL is comparable within one "
               "only), each point a K (bars: 95 % bootstrap interval over samples; dashed: the "
               "reference text, the data's own continuations of the prompts), and the samples' "
               "unigram entropy below.",
}


# the profile figures draw ok points: the latest run that has some (an oom run after it would
# leave every figure "not drawn" and hide it), as `fsc plot` picks
DEFAULT_SOURCES = (select.PROFILE_OK, select.TRAINING, select.EVALUATION)


def _or_none(st: Store, source, asked: list[str]) -> list[str]:
    try:
        return select.pick_runs(st, source, asked)
    except UsageError:
        return []


def pick(st: Store, asked: list[str]) -> list[str]:
    """The runs a report shows: those asked (`all`: every run with results), or by default
    the latest profile run with ok points (else the latest profile run), the latest training
    run of each recipe and the latest evaluation
    run of each recipe and task, each harness task apart (so each figure and table finds the
    newest rows it draws)."""
    if asked and asked != [select.ALL]:
        return select.named_runs(st, asked, option="RUN")  # `latest`: of any kind
    chosen: list[str] = []
    for source in DEFAULT_SOURCES:
        try:
            chosen += select.pick_runs(st, source, asked)
        except UsageError:  # (a store whose profile runs are all oom: the latest of them)
            if source is select.PROFILE_OK:
                chosen += _or_none(st, select.PROFILE, asked)
    if not chosen:
        raise UsageError("the store has no run with results to report; run `fsc profile`, "
                         "`fsc train` or `fsc eval` first")
    return chosen


def compose(st: Store, asked: list[str], baseline: str | None = None,
            want_png: bool = False) -> Report:
    """The page of the runs `asked` (see `pick`), saying how they were picked."""
    run_ids = pick(st, asked)
    page = build(st, run_ids, baseline, want_png)
    page.note = _selection_note(st, run_ids, asked)
    return page


def _selection_note(st: Store, run_ids: list[str], asked: list[str]) -> str:
    """How the page's runs were picked, in words, and how to show others."""
    others = len(select.runs_table(st)) - len(run_ids)
    how = ("the runs named" if asked and asked != [select.ALL] else "every run with results"
           if asked else "by default " + "; ".join(s.describe() for s in DEFAULT_SOURCES))
    rest = (f" The store holds {others} other run{'s' if others != 1 else ''}: name them "
            "(fsc report RUN…) or show all (fsc report all)." if others > 0 else "")
    return f"Runs: {how}.{rest}"


def _figure(kind: str, rows: list[dict], colour: dict[str, str], want_png: bool,
            n: int = 0) -> Figure:
    """Figure `kind` of `rows`; the n-th of its page (its SVG's element ids are prefixed by it,
    so that figures inlined in one page never share an id)."""
    drawn = sorted({r["run_id"] for r in plots.drawn_rows(kind, rows)})
    shown = Figure(kind, CAPTIONS[kind] + (f" Run{'s' if len(drawn) > 1 else ''}: "
                                           f"{', '.join(drawn)}." if drawn else ""))
    try:
        fig = plots.figure(kind, rows, colour)
    except UsageError as e:
        shown.missing = str(e)
        return shown
    if want_png:
        shown.png = figures.render(fig, "png")
    else:
        shown.svg = _svg(figures.render(fig, "svg", salt=f"fsc-{kind}").decode(), f"f{n}-")
    return shown


_SVG_ID = re.compile(r'(\bid="|url\(#|href="#)([^")]+)')


def _svg(text: str, prefix: str = "") -> str:
    """An SVG file's text as an element to inline: from <svg to the end (no XML prolog), each
    element id and every reference to one prefixed with `prefix`."""
    text = text[text.index("<svg"):]
    return _SVG_ID.sub(lambda m: m.group(1) + prefix + m.group(2), text) if prefix else text


def _fixed(v: float | None, places: int = 4) -> str:
    """A loss as `fsc eval` prints it (3.1950, not 3.2: three figures hide what a run
    against a run differs by)."""
    return "–" if v is None else f"{v:.{places}f}"


def _bits(cell: dict) -> str:
    """Bits per byte, a bound where the loss is (≤)."""
    bits = cell.get("bits_per_byte")
    return "–" if bits is None else loss_bound.prefix(cell) + _fixed(bits)  # as fsc eval prints it


def _num(v: Any, digits: int = 3) -> str:
    """A number as a reader wants it: 1,069 and 12.3 and 0.0123 and 0.000000022 (a loss that
    reached 2.2e-08), never in scientific notation; an integer with its thousands apart."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v != v or abs(v) == float("inf"):
            return str(v)
        if abs(v) >= 10 ** (digits - 1):
            return f"{v:,.0f}"
        if abs(v) >= 1e-4 or v == 0:
            return f"{v:.{digits}g}"
        places = digits - 1 - math.floor(math.log10(abs(v)))  # `digits` significant figures
        return f"{v:.{places}f}".rstrip("0")
    return str(v)


def _bytes(n: Any) -> str:
    return "–" if n is None else human_bytes(n)


def _points_table(points: list[dict]) -> Table:
    cols = ["recipe", "S", "B", "G", "K", "dtype", "status", "step ms", "p10–p90", "fold ms",
            "tok/s", "peak", "GB/s", "floor ms"]
    rows = []
    for p in points:
        ok = p["status"] == "ok"
        rows.append([p["recipe"], str(p["S"]), str(p["B"]), str(p["G"]), str(p["K"]), p["dtype"],
                     p["status"], _num(p["step_ms"]) + (f" {noise.MARK}" if noise.noisy(p) else "")
                     if ok else "–",
                     f"{_num(p['step_ms_p10'])}–{_num(p['step_ms_p90'])}" if ok else "–",
                     _num(p["fold_ms"]) if ok else "–",
                     _num(p["tokens_per_s"]) if ok else "–", _bytes(p["peak_bytes"]),
                     _num(p["achieved_gbps"]), _num(p["floor_ms"])])
    noisy = any(p["status"] == "ok" and noise.noisy(p) for p in points)
    return Table("Points", cols, rows, note=noise.LEGEND if noisy else "")


def _baseline_table(points: list[dict], baseline: str | None,
                    config: dict | None = None) -> Table | None:
    """Each recipe against the baseline at each point (its largest batch that fits where it
    is out of memory at B; the budget: the run's --memory-budget, else the device's memory),
    and the command that measures that batch as the run did (its `config`: the -r each recipe
    was given, --dtype, --memory-budget)."""
    config = config or {}
    memory_budget = config.get("memory_budget")
    hashes = config.get("recipe_hashes") or {}  # -r as given -> content hash
    refs = {p["recipe"]: ref for ref, h in hashes.items() for p in points
            if p["recipe_hash"] == h}
    results = [PointResult.from_columns(p) for p in points]
    names = {r.recipe for r in results}
    if len(names) < 2:
        return None
    if baseline is not None and baseline not in names:
        return Table(f"Against {baseline}", [], [],
                     note=f"{baseline} has no point in this run; nothing to compare with")
    device_memory = max((p.get("device_memory_bytes") or 0 for p in points), default=0)
    comp = against_baseline(results, baseline, memory_budget, device_memory or None, refs,
                            config.get("dtype"))
    if not comp:
        return None
    smaller = any(x["baseline_B"] not in (None, x["B"]) for x in comp)
    rows = [[str(x["S"]), str(x["B"]), str(x["G"]), str(x["K"]), x["recipe"]]
            + ([_num(x["baseline_B"])] if smaller else [])
            + [noise.versus(x, k) for k in ("latency_x", "memory_x", "throughput_x")] for x in comp]
    base = comp[0]["baseline"]
    title = f"Against {base} at each S" + (
        f" (where {base} is out of memory at B, against its largest batch that fits)"
        if smaller else "")
    columns = ["S", "B", "G", "K", "recipe", *(["baseline B"] if smaller else []), "latency ×",
               "memory ×", "throughput ×"]
    note = ("× above 1: better than the baseline (faster, smaller, more tokens/s); noise: the "
            "p10–p90 intervals overlap, so no ratio is claimed. " + VERSUS_KEY + ".")
    return Table(title, columns, rows, note=" ".join([note] + [f"{n}." for n in
                                                               baseline_notes(comp)]))



def _training_table(steps: list[dict]) -> Table:
    """A row per training run; a resumed run's row covers the runs it continues too (their
    rows carry `part_of_run`): its first loss is theirs, and its seconds are the sum of each
    part's (a row's elapsed_s counts from the start of its own invocation)."""
    rows = []
    for (run_id, recipe), line in figures.grouped(steps, ("run_id", "recipe")).items():
        last = line[-1]
        tps = [r["tokens_per_s"] for r in line if r["tokens_per_s"]]
        parts: dict[str, float] = {}
        for r in line:
            part = r.get("part_of_run") or run_id
            parts[part] = max(parts.get(part, 0.0), r["elapsed_s"] or 0.0)
        rows.append([run_id, recipe, line[0]["objective"], line[0]["data"], _num(last["step"]),
                     _num(line[0]["loss"]), _num(last["loss"]),
                     _num(statistics.median(tps)) if tps else "–",
                     _num(sum(parts.values()))])
    return Table("Runs", ["run", "recipe", "objective", "data", "steps", "first loss",
                              "last loss", "tok/s (median)", "seconds"], rows)


def _decoding(cell: dict) -> str:
    """A genppl cell's mode, and the cuts and the penalty it drew with where they apply
    ('diffusion top-k 20 top-p 0.9'), as `fsc eval`'s table names them."""
    return " ".join([cell["mode"], *cut_words(cell)])


def _genppl_order(cell: dict) -> tuple:
    """Rows of a run by length and prompt length, the reference text first, then each
    decoding setting through its K."""
    def key(v: Any) -> tuple:
        return (v is None, v if isinstance(v, (int, float)) else 0, str(v))

    return (cell["run_id"], key(cell["length"]), key(cell.get("prompt_length")),
            cell["mode"] != "reference", cell["mode"],
            *(key(cell.get(k)) for k in ("G", "policy", "threshold", "temperature",
                                         *(k for k, _, _ in CUTS), "K")))


def _quality_table(cells: list[dict]) -> Table:
    """genppl cells: a row per decoding and length, after its prompt length, with the speed it
    costs at the batch it was decoded at (and the scorer and data, when the cells have
    several: Gen-PPL under one is not comparable with another's)."""
    shown = [k for k in ("scorer", "data") if len({c.get(k) for c in cells}) > 1]
    cols = ["run", "recipe", *shown, "length", "prompt length", "decoding", "G", "K", "policy",
            "τ", "T", "Gen-PPL", "95 % interval", "entropy", "repeats", "tok/s", "batch",
            "passes/token", "steps/block", "n"]
    rows = [[c["run_id"], c["recipe"], *(str(c.get(k) or "–") for k in shown), str(c["length"]),
             _num(c.get("prompt_length")), _decoding(c), _num(c["G"]), _num(c["K"]),
             c["policy"] or "–", _num(c["threshold"]), _num(c["temperature"]),
             _num(c["gen_ppl"]), "–" if c["gen_ppl_lo"] is None or c["gen_ppl_hi"] is None
             else f"{_num(c['gen_ppl_lo'])}–{_num(c['gen_ppl_hi'])}",
             _num(c["entropy"]), _num(c["repeat_ngram"]), _num(c["tokens_per_s"]),
             _num(quality.decoded_together(c) if c["tokens_per_s"] is not None else None),
             _num(c["passes_per_token"]), _num(c["steps_per_block"]), str(c["n"])]
            for c in sorted(cells, key=_genppl_order)]
    scorers = sorted({c["scorer"] for c in cells if c.get("scorer")})
    return Table("Generative perplexity", cols, rows,
                 note=f"Scored by {', '.join(scorers)}; the reference row is the data's own "
                      "continuations of the same prompts (--data), at each length. Compare "
                      "Gen-PPL within one scorer, data, length and prompt length only; tok/s "
                      "is that of the batch of samples decoded together.")


def _harness_table(cells: list[dict]) -> Table:
    """lm-evaluation-harness metrics: a row per task and metric."""
    cols = ["run", "recipe", "decoding", "task", "metric", "value", "± s.e.", "n", "shots",
            "bound"]
    rows = [[c["run_id"], c["recipe"], c["mode"], c["harness_task"], c["metric"],
             _num(c["value"], 4), _num(c["value_se"], 4), str(c["n"]), _num(c["num_fewshot"]),
             f"yes, {c['mc_samples']} draws/block" if c["bound"] else "no"] for c in cells]
    versions = sorted({c["harness_version"] for c in cells if c.get("harness_version")})
    return Table("Downstream tasks (lm-evaluation-harness)", cols, rows,
                 note=f"lm-evaluation-harness {', '.join(versions)}. A block-diffusion model's "
                      "likelihoods are bounds (Monte Carlo over masks): its log-likelihood "
                      "metrics are lower bounds, its perplexities upper bounds.")


def _task(cell: dict) -> str:
    """A cell's task as the table names it: niah's RULER-style variants apart from the plain
    passkey ('niah multikey', 'niah single, 2 distractors'), as `fsc eval` names them."""
    if cell["task"] != "niah" or eval_figures.passkey(cell):
        return cell["task"]
    extra = [f"{cell['distractors']} distractors" if cell.get("distractors") else "",
             f"{cell['haystack']} haystack" if cell.get("haystack") not in (None, "filler")
             else "", "RULER's wording" if cell.get("template") == "ruler" else ""]
    return ", ".join([eval_figures.ruler_part(cell), *filter(None, extra)])


def _eval_table(cells: list[dict]) -> Table:
    """The other tasks' cells: a row each; a block-diffusion model's loss, a bound, marked as
    `fsc eval`'s loss table marks it (fsc.results.loss_bound); RULER's score where the cells
    hold a part of the suite other than the plain passkey."""
    suite = any(c.get("score") is not None and not eval_figures.passkey(c) for c in cells)
    data = any(c.get("data") for c in cells)  # loss: the text scored, and its measures
    losses = any(c.get("loss_se") is not None or c.get("bits_per_byte") is not None
                 for c in cells)
    # how a cell decoded, where it can differ: a loss read autoregressively is exact, one by
    # block diffusion a bound, so a denoiser's `--mode ar` loss would read as its bound's peer
    mode = len({c.get("mode") for c in cells}) > 1 or any(
        c.get("mode") == "ar" and c.get("loss") is not None for c in cells)
    cols = ["run", "recipe", "task", *(["mode"] if mode else []), *(["data"] if data else []),
            "length", "ratio", "depth", "pairs", "n", "accuracy", "token accuracy",
            *(["score"] if suite else []), "loss", *(["± s.e.", "bits/byte"] if losses else [])]
    rows = [[c["run_id"], c["recipe"], _task(c), *([c.get("mode") or "–"] if mode else []),
             *([c.get("data") or "–"] if data else []),
             str(c["length"]), _num(c["length_ratio"]), _num(c["depth"]), _num(c["pairs"]),
             str(c["n"]), _num(c["accuracy"]), _num(c["token_accuracy"]),
             *([_num(c.get("score"))] if suite else []), loss_bound.prefix(c) + _fixed(c["loss"]),
             *([_fixed(c.get("loss_se")), _bits(c)] if losses else [])]
            for c in cells]
    bounds = any(loss_bound.is_bound(c) for c in cells)
    return Table("Evaluation cells", cols, rows, note=loss_bound.LEGEND if bounds else "")


def _provenance_table(info: dict) -> Table:
    config = info["config"]
    backends = info.get("kernels_ran") or "–"
    rows = [
        ["run", info["run_id"]], ["kind", info["kind"]], ["status", info["status"]],
        ["command", info["command"] or "–"],
        ["started", utc_text(info["started_at"])],
        *([["resumed", utc_text(info["resumed_at"])]] if info.get("resumed_at") else []),
        ["ended", utc_text(info["ended_at"])],
        ["host", info["host"] or "–"],
        ["device", f"{info.get('device_name') or '–'} ({_bytes(info.get('device_memory_bytes'))})"],
        ["git commit", (info.get("git_commit") or "–")
         + (" (tracked files changed)" if info.get("git_dirty") else "")],
        ["versions", ", ".join(f"{k} {info.get(f'{k}_version')}"
                               for k in ("fsc", "python", "torch", "triton", "cuda", "driver")
                               if info.get(f"{k}_version"))],
        ["platform", info.get("platform") or "–"],
        ["kernel settings", config.get("kernel_tuning") or "defaults"
         if info["kind"] == "profile" else "–"],
        ["kernels ran", backends],
    ]
    details = []
    for key, value in sorted(config.items()):
        if key == "recipe_hashes" or value is None or value in ([], {}):  # nothing to say
            continue
        if isinstance(value, str) and "\n" in value:  # a recipe's YAML: folded below the table
            details.append((f"config: {key}", value))
        elif isinstance(value, (list, tuple)):
            rows.append([f"config: {key}", ", ".join(str(v) for v in value)])
        elif isinstance(value, dict):
            rows.append([f"config: {key}", json.dumps(value, sort_keys=True, default=str)])
        else:
            rows.append([f"config: {key}", str(value)])
    if info.get("error"):
        rows.append(["error", info["error"]])
    return Table(f"Run {info['run_id']}", ["", ""], rows, details=details)


def build(st: Store, run_ids: list[str], baseline: str | None = None,
          want_png: bool = False) -> Report:
    """Everything the page shows, for `run_ids` (see `pick`); figures as SVG, or with
    `want_png` as PNG (for markdown)."""
    info = select.provenance(st, run_ids)
    kinds = {r["run_id"]: r["kind"] for r in info}
    by_kind = {k: [r for r in run_ids if kinds.get(r) == k] for k in ("profile", "train", "eval")}
    # each view read once: the figures and tables of a section share its rows
    points_of = {r: select.with_cost(st, select.rows(st, select.PROFILE, [r]))
                 for r in by_kind["profile"]}
    if baseline is not None and not any(p["recipe"] == baseline for points in points_of.values()
                                        for p in points):
        had = sorted({p["recipe"] for points in points_of.values() for p in points})
        raise UsageError(f"--baseline {baseline}: no profile run of the page holds it"
                         + (f" (its recipes: {', '.join(had)})" if had else ""))
    steps = select.rows(st, select.TRAINING, by_kind["train"]) if by_kind["train"] else []
    cells = select.rows(st, select.EVALUATION, by_kind["eval"]) if by_kind["eval"] else []
    colour = figures.colours(r["recipe"] for rows in (*points_of.values(), steps, cells)
                             for r in rows)
    sections = []
    numbers = itertools.count(1)
    for run_id, points in points_of.items():
        ran = sorted({f"{k}:{v}" for p in points
                      for k, v in json.loads(p["mixer_backends"] or "{}").items()})
        run = next(r for r in info if r["run_id"] == run_id)
        run["kernels_ran"] = ", ".join(ran)
        section = Section(f"Profile {run_id}", _summary(points) + _unfinished(run))
        section.figures = [_figure(k, points, colour, want_png, next(numbers))
                           for k in PROFILE_FIGURES]
        section.tables.append(_points_table(points))
        versus = _baseline_table(points, baseline, run["config"])
        if versus is not None:
            section.tables.append(versus)
        sections.append(section)
    if by_kind["train"]:
        section = Section("Training")
        section.figures = [_figure("loss", steps, colour, want_png, next(numbers))]
        section.tables = [_training_table(steps)]
        sections.append(section)
    if by_kind["eval"]:
        section = Section("Evaluation")
        harness = [c for c in cells if c["task"] == "harness"]
        drawn = [c for c in cells if c["task"] != "harness"]
        section.figures = [_figure(k, drawn, colour, want_png, next(numbers)) for k in EVAL_FIGURES
                           if drawn and (plots.DRAWS[k](drawn) or k not in EVAL_IF_ANY)]
        genppl = [c for c in drawn if c["task"] == "genppl"]
        others = [c for c in drawn if c["task"] != "genppl"]
        section.tables = ([_eval_table(others)] if others else []) + (
            [_quality_table(genppl)] if genppl else []) + (
            [_harness_table(harness)] if harness else [])
        sections.append(section)
    others = [r for r in run_ids if kinds.get(r) not in by_kind]
    if others:
        sections.append(Section("Other runs", f"{counted(len(others), 'run')} of other kinds "
                                              f"({', '.join(others)}): provenance only."))
    sections.append(Section("Provenance", tables=[_provenance_table(r) for r in info]))
    return Report(f"fsc report: {counted(len(run_ids), 'run')}",
                  datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), run_ids, sections)


def _unfinished(run: dict) -> str:
    """For a profile run that did not finish, a sentence saying its points are the ones
    measured so far, and how to measure the rest (fsc.results.compare.unfinished)."""
    said = unfinished(run["run_id"], run.get("status"), "these are")
    return "" if said is None else f" The run {said}."


def _summary(points: list[dict]) -> str:
    by_status: dict[str, int] = {}
    for p in points:
        by_status[p["status"]] = by_status.get(p["status"], 0) + 1
    recipes = sorted({p["recipe"] for p in points})
    devices = sorted({str(p.get("device_name") or p["device"]) for p in points})
    counts = ", ".join(f"{n} {s}" for s, n in sorted(by_status.items()))
    return (f"{counted(len(points), 'point')} ({counts}) of {', '.join(recipes)} on "
            f"{', '.join(devices)}; "
            f"S {', '.join(figures.tokens(s) for s in sorted({p['S'] for p in points}))}, "
            f"B {', '.join(str(b) for b in sorted({p['B'] for p in points}))}.")
