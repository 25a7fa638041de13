"""How `fsc eval` shows its cells: a line on stderr per cell as it is stored, then a loss
table, an accuracy heatmap (niah, mqar) or a genppl table."""

from __future__ import annotations

from fsc.cli.common import err, out, printable
from fsc.cli.eval_answers import label, show_wrong
from fsc.cli.eval_tables import show_genppl, show_heatmap, show_loss
from fsc.results import loss_bound
from fsc.text import counted


class SampleBar:
    """A run's samples as a progress bar on stderr, from the moment the run is recorded
    (`start`) to the end of the block; each cell's line (`show_cell`) prints above it."""

    def __init__(self) -> None:
        self.bar = None

    def __enter__(self) -> SampleBar:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

    def start(self, run_id: str, total: int, done: int, rough_s: float | None) -> None:
        from fsc.cli import progress

        self.bar = progress.bar(err, transient=False)
        self.bar.start()
        self.bar.add_task(f"eval {run_id}: samples", total=total, completed=done)

    def advance(self, n: int) -> None:
        self.bar.advance(self.bar.task_ids[0], n)


def show_cell(c) -> None:
    """A cell's line on stderr as it is stored (a suite cell's score: the expected strings
    found)."""
    variant = c.get("variant")
    scored = c.get("score") is not None and (c.task != "niah" or variant != "single")
    err.print(f"  {label(c)}"
              + (f" {_setting(c)}" if c.task == "genppl" else "")
              + (f": score {c.get('score'):.2f}" if scored else "")
              + (f": {c.accuracy:.2f}" if c.accuracy is not None and not scored else "")
              + (f": Gen-PPL {c.get('gen_ppl'):.2f}" if c.get("gen_ppl") is not None else ""),
              markup=False, highlight=False)


def _shade(acc: float) -> str:
    """A heatmap cell style: red at 0 through yellow to green at 1."""
    r = int(255 * min(1.0, 2 * (1 - acc)))
    g = int(255 * min(1.0, 2 * acc))
    return f"black on rgb({r},{g},60)"


LOSS_BOUND = loss_bound.LEGEND  # under a loss table with a bound's numbers (marked ≤)


def render(cells: list, task: str, recipe: str, run_id: str, warnings=()) -> None:
    """The cells (fsc.train.grid.EvalCell) as a loss table (not called held-out where the
    run's `warnings` say it read the text trained on), or as an accuracy heatmap by depth (or
    pairs) × length, each laid out at the terminal's width (fsc.cli.eval_tables)."""
    from rich.text import Text

    from fsc.eval.columns import plain_passkey  # (it reads the store's schema: duckdb)
    if task == "genppl":
        _render_genppl(cells, recipe, run_id)
        return
    if task == "ruler":
        _render_suite(cells, recipe, run_id)
        show_wrong(sorted(cells, key=lambda c: (_in_suite(_part(c)), c.length,
                                                c.depth or 0)))  # in the table's order
        return
    if task == "loss":
        what = ("loss on text it was trained on" if any(w.endswith("loss is not held out")
                for w in warnings) else "held-out loss")  # (the warning: fsc.eval.request)
        what += f" on {printable(cells[0].get('data'), 200)}" if cells and cells[0].get("data") else ""
        out.print(f"{printable(recipe, 60)}: {what} (run {run_id})", markup=False, highlight=False, soft_wrap=True)
        show_loss([{"length": str(c.length), "sequences": str(c.n),
                    "loss (nats/token)": _fmt(c.loss, ".4f", loss_bound.prefix(c)),
                    "± s.e.": _fmt(c.get("loss_se"), ".4f"),
                    "bits/byte": _fmt(c.get("bits_per_byte"), ".4f", loss_bound.prefix(c))}
                   for c in cells], out)
        if any(loss_bound.is_bound(c) for c in cells):
            out.print(LOSS_BOUND, markup=False, highlight=False)
        for c in cells:
            if (c.get("distinct_sequences") or c.n) < c.n:
                d = c.get("distinct_sequences")
                err.print(f"length {c.length}: the data holds {counted(d, 'distinct sequence')};"
                          f" the {c.n} scored reuse {'it' if d == 1 else 'them'}, so the spread "
                          "is understated (give --samples at most that, or more text)",
                          soft_wrap=True)
        return
    # a task without a table of its own: its score (else accuracy) by length
    key = {"niah": "depth", "mqar": "pairs", "vt": "hops", "cwe": "words", "fwe": "words"}.get(task)
    suite = task in ("vt", "cwe", "fwe") or (task == "niah" and not all(
        plain_passkey(c) for c in cells)) or (
        key is None and any(c.get("score") is not None for c in cells))
    what = "score (the expected strings found)" if suite else "accuracy"
    if task == "niah" and suite:
        what = f"{cells[0].get('variant')} {what}" if cells else what
    lengths = sorted({c.length for c in cells})
    by = f"by {key} × length" if key else "by length"
    out.print(f"{printable(recipe, 60)}: {printable(task, 40)} {what} {by} (run {run_id})",
              markup=False, highlight=False)
    rows = []
    for k in sorted({c.get(key) for c in cells} if key else {None}):
        row = {c.length: c.get("score") if suite else c.accuracy for c in cells
               if key is None or c.get(key) == k}
        rows.append((printable(task, 40) if k is None else f"{k:g}",
                     [Text(f" {row[n]:.2f} ", style=_shade(row[n])) if row.get(n) is not None
                      else "-" for n in lengths]))
    show_heatmap(key or "", _heads(cells, lengths), rows, out)
    show_wrong(cells)


def _heads(cells: list, lengths: list[int]) -> list[str]:
    """A heatmap's column headers: each length and its ratio to the training length,
    '1024 (8×)'."""
    ratios = [next(c.length_ratio for c in cells if c.length == n) for n in lengths]
    return [f"{n}" + (f" ({r:.3g}×)" if r else "") for n, r in zip(lengths, ratios, strict=True)]


SUITE_ORDER = ("niah single", "niah multikey", "niah multivalue", "niah multiquery", "vt", "cwe",
               "fwe")  # --task ruler's rows, in the order it scores its parts


def _part(c) -> str:
    """The suite's row a cell is in: 'niah multikey', 'vt'."""
    return f"niah {c.get('variant')}" if c.task == "niah" else c.task


def _in_suite(name: str) -> tuple:
    """Where a row of the suite's table goes: in SUITE_ORDER, then any other by name."""
    return (SUITE_ORDER.index(name) if name in SUITE_ORDER else len(SUITE_ORDER), name)


def _render_suite(cells: list, recipe: str, run_id: str) -> None:
    """--task ruler: a row per task (niah per variant, its depths averaged), a column per
    length, RULER's score in each, and their average."""
    from rich.text import Text

    lengths = sorted({c.length for c in cells})
    rows: dict[str, dict[int, list[float]]] = {}
    for c in cells:
        rows.setdefault(_part(c), {}).setdefault(c.length, []).append(c.get("score"))
    ordered = sorted(rows, key=_in_suite)
    means = {name: {n: sum(v) / len(v) for n, v in rows[name].items()} for name in ordered}
    means["average"] = {n: sum(m[n] for m in means.values() if n in m)
                        / sum(n in m for m in means.values()) for n in lengths}
    out.print(f"{printable(recipe, 60)}: RULER-style score by task × length (run {run_id})",
              markup=False, highlight=False)
    show_heatmap("task", _heads(cells, lengths),
                 [(name, [Text(f" {by[n]:.2f} ", style=_shade(by[n])) if n in by else "-"
                          for n in lengths]) for name, by in means.items()], out, left=True)


def _setting(c) -> str:
    """How a genppl cell decoded, in a few words: 'G 8 K 4 margin τ 0.9 T 1' (and the cuts and
    the penalty that apply: 'top-k 20 top-p 0.9 min-p 0.05 penalty 1.1')."""
    if c.mode == "reference":
        return "reference text"  # the data's own continuations of the prompts
    head = "ar" if c.mode == "ar" else f"G {c.G} K {c.K}"
    if c.get("policy") and c.get("policy") != "confidence":
        head += f" {c.get('policy')}"
    if c.get("threshold") is not None:
        head += f" τ {c.get('threshold'):g}"
    head += f" T {c.get('temperature'):g}" if c.get("temperature") is not None else ""
    from fsc.eval.columns import cut_words  # (its Column reads the store's schema: not at start-up)

    return " ".join([head, *cut_words(c)])


def _fmt(v, spec: str = ".2f", mark: str = "") -> str:
    return "–" if v is None else mark + format(v, spec)


def _interval(c) -> str:
    """'12.10–15.30', or – where there is none (a cell of one sample)."""
    lo, hi = c.get("gen_ppl_lo"), c.get("gen_ppl_hi")
    return "–" if lo is None or hi is None else f"{lo:.2f}–{hi:.2f}"


def _decoding(c, cells: list) -> str:
    """A genppl cell's decoding as its table row and MAUVE line name it: a baseline's says so
    (its recipe may be the checkpoint's)."""
    theirs = c.mode == "ar" and c.checkpoint != cells[0].checkpoint
    return _setting(c) + (f" (baseline {printable(c.recipe, 30)})" if theirs else "")


def _render_genppl(cells: list, recipe: str, run_id: str) -> None:
    """A row per decoding and length (Gen-PPL at one length is not comparable with another's;
    one length is said above the table, as are the samples and the run's prompt length):
    Gen-PPL with its interval, entropy, repeats, speed. On a narrow terminal the passes, steps
    and repeats columns go first (fsc.cli.eval_tables.GENPPL_DROP; --json has them)."""
    scorer = next((c.get("scorer") for c in cells if c.get("scorer")), "?")
    prompt = next((c.get("prompt_length") for c in cells if c.get("prompt_length") is not None),
                  None)
    after = ("" if prompt is None else ", from BOS" if prompt == 0
             else f", after {prompt}-token prompts")
    out.print(f"{printable(recipe, 60)}: generative perplexity under {printable(scorer, 60)}"
              f"{after} (run {run_id})", markup=False, highlight=False)
    records = [{"decoding": _decoding(c, cells),
                "length": str(c.length), "Gen-PPL": _fmt(c.get("gen_ppl")),
                "95 % interval": _interval(c),
                "entropy": _fmt(c.get("entropy"), ".3f"), "rep": _fmt(c.get("repeat_ngram"), ".3f"),
                "tok/s": _fmt(c.tokens_per_s, ".0f"), "passes/tok": _fmt(c.get("passes_per_token")),
                "steps/block": _fmt(c.get("steps_per_block")), "samples": str(c.n)} for c in cells]
    show_genppl(records, out)
    several = len({c.length for c in cells}) > 1
    early = sum(c.get("ended_early") or 0 for c in cells)
    if early:
        err.print(f"{counted(early, 'continuation')} (sampled or reference) ended at EOS "
                  "before the length asked; each is scored on what it holds", soft_wrap=True)
    if uncarried := sum(c.get("uncarried") or 0 for c in cells):
        err.print(f"{counted(uncarried, 'sample')} held text the scorer's tokenizer drops (a "
                  "character it lacks; `uncarried` in the store); each is scored on the rest",
                  soft_wrap=True)
    for c in (c for c in cells if c.get("mauve") is not None):
        out.print(f"MAUVE {_decoding(c, cells)}" + (f" length {c.length}" if several else "")
                  + f": {c.get('mauve'):.3f}", markup=False, highlight=False)
