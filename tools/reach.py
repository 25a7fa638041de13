"""Long reach on the RULER-style suite (`make reach`, docs/benchmarks.md section 19): train the
passkey trio (attention, Mamba-2 and the MMMA hybrid, its attention NoPE with log-length
scaling and its Mamba-2 layers' memory bounded to a half-life of 8 tokens) on a mix of the
suite at one length, score each at 1, 2, 4, 8 and 16 times that length on every part of the
suite (niah single, multikey, multivalue, multiquery; vt; cwe; fwe), and print RULER-style
tables: task × length per backbone, and the average by backbone over seeds.

    python -m tools.reach [--recipes passkey_attn,...] [--seeds 0,1,2] [--train-steps N | R=N,...]
        [--lr X | R=X,...] [--data MIX] [--seq-len 128 | 128,256] [--samples 10] [--depths 0,0.5,1]
        [--jobs 2] [--out DIR] [--store DIR] [--figures DIR] [--skip-train] [--tables-only]
        [--set KEY=VALUE ...] [--start-from DIR] [--state-passing] [--freeze KIND]

Training runs as `fsc train RECIPE --data MIX --needles 2 --hops 2 --words 2
--supervise-needle` (the knobs that fit 128 tokens at G 4; every needle's repeat of its value
and every chain link's name supervised beside the answers), evaluation as `fsc eval CKPT
--task ruler` with the same knobs; both record their runs in --store, and the tables are read
back from it. niah multiquery is scored but not trained on: with its repeats, two needles do
not fit 128 tokens. With --figures, `fsc plot ruler` of the seed-0 runs is written there
(ruler.png). --set KEY=VALUE (with --skip-train: the checkpoints trained) scores them with a
weight-free recipe field changed (`fsc eval --set`, e.g. attention.logn=128), and the tables
then read those runs only. --start-from DIR trains on from the checkpoints an earlier run left
in DIR (post-training, e.g. 500 steps with --state-passing), into this run's --out and --store.
--freeze KIND trains with that kind's mixers kept as they start (fsc train --freeze: e.g. the
hybrid's attention layer trained first, its Mamba-2 layers as initialised).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tools import retrieval
from tools.fscjson import Reader, plot, run_json
from tools.options import boundary, ints, positive
from tools.retrieval import RATIOS, _latest_runs, parsed, tag, training_table

# the hybrid is the MMMA one with NoPE attention trained with log-length scaling and its Mamba-2
# layers' memory bounded (mamba.max_half_life 8), so that its attention layer is the one that
# retrieves: of the hybrids it reaches furthest over four seeds (docs/benchmarks.md section 19,
# the levers' table)
RECIPES = ["passkey_attn", "passkey_mamba", "passkey_hybrid_halflife8"]
# passkey twice as often as each other task: the reach targets are read on it
MIX = "passkey:2,niah_multikey,niah_multivalue,vt,cwe,fwe"
KNOBS = ["--needles", "2", "--hops", "2", "--words", "2"]
PARTS = ["niah single", "niah multikey", "niah multivalue", "niah multiquery", "vt", "cwe",
         "fwe"]


def train(job: tuple[str, int], a) -> None:
    recipe, seed = job
    t0 = time.perf_counter()
    source = str(a.start_from / tag(recipe, seed)) if a.start_from else recipe
    doc = run_json(["train", source, "--data", a.data, *KNOBS, "--supervise-needle",
                    "--seq-len", a.seq_len, "--train-steps", str(a.train_steps[recipe]),
                    "--batch", str(a.batch), "--lr", str(a.lr[recipe]), "--weighting", "masked",
                    "--objective", "blocks", "--seed", str(seed), "--eval-every",
                    str(a.eval_every), "--out", str(a.out / tag(recipe, seed)), "--store",
                    str(a.store), *(["--state-passing"] if a.state_passing else []),
                    *(["--freeze", a.freeze] if a.freeze else [])])
    print(f"trained {tag(recipe, seed)}: {doc['step']} steps, {time.perf_counter() - t0:.0f} s, "
          f"loss {doc['final_loss']:.4f}", flush=True)


def evaluate(job: tuple[str, int], a) -> None:
    t0 = time.perf_counter()
    lengths = ",".join(str(longest(a.seq_len) * r) for r in RATIOS)
    doc = run_json(["eval", str(a.out / tag(*job)), "--task", "ruler", *KNOBS, "--lengths",
                    lengths, "--depths", a.depths, "--samples", str(a.samples), "--batch",
                    str(a.samples), "--store", str(a.store),
                    *[x for change in a.set for x in ("--set", change)]])
    print(f"evaluated {tag(*job)}: run {doc['run_id']}, {time.perf_counter() - t0:.0f} s",
          flush=True)


def longest(seq_len: str) -> int:
    """The training length of fsc train's --seq-len (one length, or the longest of several)."""
    return max(int(part.partition(":")[0]) for part in seq_len.split(","))


def scores(st: Reader, run: str) -> dict[str, dict[float, float]]:
    """{part: {length ratio: RULER's score, the mean over the part's cells}} of an eval run."""
    _, rows = st.query(
        "select case when task = 'niah' then 'niah ' || coalesce(variant, 'single') else task"
        " end, length_ratio, sum(score * n) / sum(n) from evaluation where run_id = ? and"
        " score is not null group by all", [run])
    out: dict[str, dict[float, float]] = {}
    for part, ratio, score in rows:
        out.setdefault(part, {})[ratio] = score
    return out


def _average(parts: dict[str, dict[float, float]], ratio: float) -> float | None:
    got = [parts[p].get(float(ratio)) for p in PARTS]
    return None if None in got else sum(got) / len(got)


def _cell(values: list[float]) -> str:
    if not values:
        return "–"
    mean = sum(values) / len(values)
    return f"{mean:.2f}" if len(values) == 1 else (
        f"{mean:.2f} [{min(values):.2f}, {max(values):.2f}]")


def tables(a) -> str:
    """The tables of docs/benchmarks.md section 19 from the newest train and eval runs of each
    (recipe, seed) in the store."""
    st = Reader(a.store)
    tags = [tag(r, s) for r in a.recipes for s in a.seeds]
    lines = training_table(st, tags)
    got = {t: scores(st, run) for t, run in _latest_runs(st, "eval", tags, tuple(a.set)).items()}
    head = " | ".join(f"{x}×" for x in RATIOS)
    said = "+" + ",".join(a.set) if a.set else ""  # the recipe as scored (fsc eval --set)
    spread = " (mean [lowest, highest] over seeds)" if len(a.seeds) > 1 else ""
    lines += ["", f"RULER's score (the fraction of the expected strings found), the average of "
              f"the {len(PARTS)} parts, by length ÷ training length ({longest(a.seq_len)}){spread}:", "",
              f"| recipe | seeds | {head} |", "| --- | ---: |" + " ---: |" * len(RATIOS)]
    for r in a.recipes:
        runs = [got[tag(r, s)] for s in a.seeds if tag(r, s) in got]
        if runs:
            row = [_cell([v for p in runs if (v := _average(p, x)) is not None])
                   for x in RATIOS]
            lines.append(f"| {r}{said} | {len(runs)} | " + " | ".join(row) + " |")
    for r in a.recipes:
        runs = [got[tag(r, s)] for s in a.seeds if tag(r, s) in got]
        if not runs:
            continue
        lines += ["", f"{r}{said}: score by task and length{spread}:", "", f"| task | {head} |",
                  "| --- |" + " ---: |" * len(RATIOS)]
        for part in PARTS:
            row = [_cell([p[part][float(x)] for p in runs if float(x) in p.get(part, {})])
                   for x in RATIOS]
            lines.append(f"| {part} | " + " | ".join(row) + " |")
        row = [_cell([v for p in runs if (v := _average(p, x)) is not None]) for x in RATIOS]
        lines.append("| **average** | " + " | ".join(row) + " |")
    if len(a.seeds) == 1:
        lines += side_by_side(got, [tag(r, a.seeds[0]) for r in a.recipes], a.seeds[0], said)
    return "\n".join(lines)


def side_by_side(got: dict, tags: list[str], seed: int, said: str) -> list[str]:
    """One seed's parts × lengths of every recipe in one table (docs/benchmarks.md section 19)."""
    tags = [t for t in tags if t in got]
    if len(tags) < 2:
        return []
    later = [f"{x}×" for x in RATIOS[1:]]
    head = [f"seed {seed}: task"] + [h for t in tags for h in (f"{t}{said} 1×", *later)]
    lines = ["", f"Seed {seed}, side by side:", "", "| " + " | ".join(head) + " |",
             "| --- |" + " ---: |" * (len(head) - 1)]
    for part in PARTS:
        row = [f"{got[t][part][float(x)]:.2f}" if float(x) in got[t].get(part, {}) else "–"
               for t in tags for x in RATIOS]
        lines.append(f"| {part} | " + " | ".join(row) + " |")
    row = [f"{v:.2f}" if (v := _average(got[t], x)) is not None else "–"
           for t in tags for x in RATIOS]
    return lines + ["| **average** | " + " | ".join(row) + " |"]


def _seeds(recipe: str, n: int = 3, first: int = 0) -> tuple[str, ...]:
    """The tags of seeds first to first + n - 1 of `recipe` (`tag`)."""
    return tuple(tag(recipe, s) for s in range(first, first + n))


def _by_position(label: str, recipe: str, powers: tuple[str, ...]) -> list[tuple]:
    """LEVERS rows of `recipe`'s three seeds scored with the decay by position from 128 at each
    power (`mamba.decay_from`, `mamba.decay_power`; 1 the default)."""
    return [(f"{label}, decay by position from 128, power {k} at evaluation", _seeds(recipe),
             ("mamba.decay_from=128",) + (() if k == "1" else (f"mamba.decay_power={k}",)),
             "reach") for k in powers]


LOGN = "hybrid, NoPE, trained with logn 16"  # the logn hybrid, as the rows name it
WINDOW = "attention limited to its last 32 tokens at evaluation"


def _and_window(label: str, stem: str, tags: tuple[str, ...], where: str) -> list[tuple]:
    """The LEVERS row of `tags`, and the same scored with attention limited to its last 32
    tokens (labelled `stem`, then the window): whether attention reads the needle."""
    return [(label, tags, (), where),
            (f"{stem}, {WINDOW}", tags, ("attention.window=32",), where)]


# The levers of docs/benchmarks.md section 19, a row each: (what changed, the trainings' tags
# (folders under the store's run directory), the `fsc eval --set` changes scored with, the
# store, relative to --out's parent). Each is made by a command of that section.
LEVERS = [
    ("attention, 2,000 steps (the default)", ("passkey_attn",), (), "reach"),
    ("attention, 6,000 steps (seed 0: 2,000 then 4,000 more)",
     ("passkey_attn-more", "passkey_attn-s1", "passkey_attn-s2"), (), "reach"),
    ("Mamba-2 (the default)", _seeds("passkey_mamba"), (), "reach"),
    ("Mamba-2, decay scaled 0.5 at evaluation", _seeds("passkey_mamba"),
     ("mamba.decay_scale=0.5",), "reach"),
    ("Mamba-2, decay scaled 0.25 at evaluation", _seeds("passkey_mamba"),
     ("mamba.decay_scale=0.25",), "reach"),
    *_by_position("Mamba-2", "passkey_mamba", ("1", "0.75", "0.5", "0.25")),
    ("Mamba-2, decay by position (power 0.5) and scaled 0.5 at evaluation",
     _seeds("passkey_mamba"),
     ("mamba.decay_from=128", "mamba.decay_power=0.5", "mamba.decay_scale=0.5"), "reach"),
    ("Mamba-2, its state in bf16 at evaluation", _seeds("passkey_mamba"), ("state_dtype=bf16",),
     "reach"),
    ("Mamba-2, then 1,000 steps at 256 (× 256)", _seeds("passkey_mamba", 2), (), "reach-curr"),
    ("Mamba-2, then 1,000 steps at 256, then 1,000 at 512 (× 512)", _seeds("passkey_mamba", 2),
     (), "reach-curr512"),
    ("Mamba-2, then 256, then 512 (× 512), decay 0.5 at evaluation", _seeds("passkey_mamba", 2),
     ("mamba.decay_scale=0.5",), "reach-curr512"),
    ("Mamba-2, 500 more steps", _seeds("passkey_mamba"), (), "reach-more"),
    ("Mamba-2, 500 more steps with state passing", _seeds("passkey_mamba"), (), "reach-sp"),
    ("hybrid, RoPE (passkey_hybrid)", _seeds("passkey_hybrid"), (), "reach"),
    ("hybrid, RoPE, decay 0.5 at evaluation", _seeds("passkey_hybrid"),
     ("mamba.decay_scale=0.5",), "reach"),
    ("hybrid, RoPE, logn 128 at evaluation", _seeds("passkey_hybrid"), ("attention.logn=128",),
     "reach"),
    *_by_position("hybrid, RoPE", "passkey_hybrid", ("1", "0.5")),
    ("hybrid, RoPE, attention limited to its last 32 tokens at evaluation", _seeds("passkey_hybrid"),
     ("attention.window=32",), "reach"),
    ("hybrid, a 32-token window", _seeds("passkey_hybrid_swa", 2), (), "reach"),
    ("hybrid, NoPE", _seeds("passkey_hybrid_nope"), (), "reach"),
    ("hybrid, NoPE, logn 128 at evaluation", _seeds("passkey_hybrid_nope"),
     ("attention.logn=128",), "reach"),
    ("hybrid, NoPE, decay 0.5 at evaluation", _seeds("passkey_hybrid_nope"),
     ("mamba.decay_scale=0.5",), "reach"),
    ("hybrid, NoPE, logn 128 and decay 0.5 at evaluation", _seeds("passkey_hybrid_nope"),
     ("mamba.decay_scale=0.5", "attention.logn=128"), "reach"),
    *_by_position("hybrid, NoPE", "passkey_hybrid_nope", ("1", "0.5")),
    ("hybrid, NoPE, attention limited to its last 32 tokens at evaluation",
     _seeds("passkey_hybrid_nope"), ("attention.window=32",), "reach"),
    ("hybrid, NoPE, trained with logn 16 (make reach's hybrid before the bound)",
     _seeds("passkey_hybrid_nope_logn"), (), "reach"),
    ("hybrid, NoPE, trained with logn 16, 4,000 steps", _seeds("passkey_hybrid_nope_logn", 2),
     (), "reach-4k"),
    ("hybrid, NoPE, trained with logn 16, 4,000 steps, decay 0.5 at evaluation",
     _seeds("passkey_hybrid_nope_logn", 2), ("mamba.decay_scale=0.5",), "reach-4k"),
    ("hybrid, NoPE, trained with logn 16, attention limited to its last 32 tokens at evaluation",
     _seeds("passkey_hybrid_nope_logn"), ("attention.window=32",), "reach"),
    ("hybrid, NoPE, trained with logn 16, seeds 3 to 5", _seeds("passkey_hybrid_nope_logn", first=3),
     (), "reach-seeds"),
    ("hybrid, NoPE, trained with logn 16, seeds 3 to 5, attention limited to its last 32 tokens "
     "at evaluation", _seeds("passkey_hybrid_nope_logn", first=3), ("attention.window=32",),
     "reach-seeds"),
    ("hybrid, NoPE, trained with logn 16, seeds 3 to 5, then 1,000 steps at 256 (× 256)",
     _seeds("passkey_hybrid_nope_logn", first=3), (), "reach-seeds-curr"),
    ("hybrid, NoPE, trained with logn 16, seeds 3 to 5, then 256, then 512 (× 512)",
     _seeds("passkey_hybrid_nope_logn", first=3), (), "reach-seeds-curr512"),
    ("hybrid, NoPE, trained with logn 16, seeds 3 to 5, then 256, then 512 (× 512), decay 0.5 "
     "at evaluation", _seeds("passkey_hybrid_nope_logn", first=3), ("mamba.decay_scale=0.5",),
     "reach-seeds-curr512"),
    ("hybrid, NoPE, trained with logn 16, seeds 3 to 5, then 256, then 512 (× 512), attention "
     "limited to its last 32 tokens at evaluation", _seeds("passkey_hybrid_nope_logn", first=3),
     ("attention.window=32",), "reach-seeds-curr512"),
    ("hybrid, NoPE, trained with logn 16, its Mamba-2 mixers frozen as initialised",
     _seeds("passkey_hybrid_nope_logn"), (), "reach-frz"),
    *_and_window(f"{LOGN}, Mamba-2 frozen, then 2,000 steps of all",
                 f"{LOGN}, Mamba-2 frozen, then 2,000 steps of all",
                 _seeds("passkey_hybrid_nope_logn"), "reach-frz-then"),
    *_and_window(f"{LOGN}, then 2,000 steps more at lr 1e-2 (two schedules)",
                 f"{LOGN}, then 2,000 steps more at lr 1e-2", _seeds("passkey_hybrid_nope_logn"),
                 "reach-again"),
    *_and_window(f"{LOGN}, Mamba-2's memory bounded: half-life 8 tokens (make reach's hybrid)",
                 f"{LOGN}, Mamba-2's half-life 8", _seeds("passkey_hybrid_halflife8"), "reach-hl"),
    ("hybrid, NoPE, trained with logn 16, Mamba-2's half-life 8, scored without the bound",
     _seeds("passkey_hybrid_halflife8"), ("mamba.max_half_life=none",), "reach-hl"),
    *_and_window(f"{LOGN}, Mamba-2's half-life 8, a fourth seed (3)",
                 f"{LOGN}, Mamba-2's half-life 8, a fourth seed (3)",
                 _seeds("passkey_hybrid_halflife8", 1, first=3), "reach-hl"),
    *_and_window(f"{LOGN}, Mamba-2's memory bounded: half-life 16 tokens",
                 f"{LOGN}, Mamba-2's half-life 16", _seeds("experiments/passkey_hybrid_halflife16"),
                 "reach-hl"),
    *_and_window(f"{LOGN}, Mamba-2's half-life 16, 4,000 steps (seed 0)",
                 f"{LOGN}, Mamba-2's half-life 16, 4,000 steps (seed 0)",
                 _seeds("experiments/passkey_hybrid_halflife16", 1), "reach-hl16-4k"),
    *_and_window(f"{LOGN}, Mamba-2's memory bounded: half-life 4 tokens",
                 f"{LOGN}, Mamba-2's half-life 4",
                 _seeds("experiments/passkey_hybrid_halflife4", 3), "reach-hl4"),
    *_and_window(f"{LOGN}, Mamba-2's memory bounded: half-life 32 tokens",
                 f"{LOGN}, Mamba-2's half-life 32",
                 _seeds("experiments/passkey_hybrid_halflife32", 1), "reach-hl"),
    ("hybrid, NoPE, trained with logn 16, decay 0.5 at evaluation",
     _seeds("passkey_hybrid_nope_logn"), ("mamba.decay_scale=0.5",), "reach"),
    ("hybrid, NoPE, trained with logn 16, decay by position (power 0.5) at evaluation",
     _seeds("passkey_hybrid_nope_logn"), ("mamba.decay_from=128", "mamba.decay_power=0.5"),
     "reach"),
    ("hybrid, NoPE, trained with logn 16, then 1,000 steps at 128",
     _seeds("passkey_hybrid_nope_logn"), (), "reach-more1k"),
    ("hybrid, NoPE, trained with logn 16, then 1,000 steps at 256 (× 256)",
     _seeds("passkey_hybrid_nope_logn"), (), "reach-curr"),
    ("hybrid, NoPE, trained with logn 16, then 1,000 steps at 128 and 256 mixed (× 256)",
     _seeds("passkey_hybrid_nope_logn"), (), "reach-mixlen"),
    ("hybrid, NoPE, trained with logn 16, then 1,000 steps at 256, then 1,000 at 512 (× 512)",
     _seeds("passkey_hybrid_nope_logn"), (), "reach-curr512"),
    ("hybrid, NoPE, trained with logn 16, then 256, then 512 (× 512), attention limited to its "
     "last 32 tokens at evaluation", _seeds("passkey_hybrid_nope_logn"), ("attention.window=32",),
     "reach-curr512"),
    ("hybrid, NoPE, trained with logn 16, then 256, then 512 (× 512), decay 0.5 at evaluation",
     _seeds("passkey_hybrid_nope_logn"), ("mamba.decay_scale=0.5",), "reach-curr512"),
    ("hybrid, NoPE, trained with logn 16, then 1,000 steps each at 256, 512 and 1,024 (× 1,024)",
     _seeds("passkey_hybrid_nope_logn"), (), "reach-curr1024"),
    ("hybrid, NoPE, trained with logn 16, then 256, 512 and 1,024 (× 1,024), decay 0.5 at "
     "evaluation", _seeds("passkey_hybrid_nope_logn"), ("mamba.decay_scale=0.5",),
     "reach-curr1024"),
    ("hybrid, NoPE, trained with logn 16, then 256, 512 and 1,024 (× 1,024), attention limited to "
     "its last 32 tokens at evaluation", _seeds("passkey_hybrid_nope_logn"),
     ("attention.window=32",), "reach-curr1024"),
    ("hybrid, NoPE, trained with logn 16, two attention layers (MAMA)",
     _seeds("experiments/passkey_hybrid2_nope_logn"), (), "reach-mama"),
    ("hybrid, NoPE, trained with logn 16, two attention layers (MAMA), both limited to their last "
     "32 tokens at evaluation", _seeds("experiments/passkey_hybrid2_nope_logn"),
     ("attention.window=32",), "reach-mama"),
    ("hybrid, NoPE, trained with logn 16 at 256 (× 256)", _seeds("passkey_hybrid_nope_logn", 2),
     (), "reach-256"),
    ("hybrid, NoPE, 500 more steps", _seeds("passkey_hybrid_nope"), (), "reach-more"),
    ("hybrid, NoPE, 500 more steps with state passing", _seeds("passkey_hybrid_nope"), (),
     "reach-sp"),
]


def levers(a) -> str:
    """The levers' table (LEVERS) from the stores under --out's parent: the RULER average
    (means over seeds) and niah single (passkey; mean [lowest, highest]) by length."""
    head = " | ".join(f"{x}×" for x in RATIOS)
    lines = [f"| change | seeds | RULER average {head} | passkey {head} |",
             "| --- | ---: |" + " ---: |" * 2 * len(RATIOS)]
    for label, tags, changes, where in LEVERS:
        store = a.out.parent / where / "store"
        if not (store / "fsc.duckdb").exists():
            continue
        st = Reader(store)
        runs = [scores(st, run) for run in _latest_runs(st, "eval", list(tags), changes).values()]
        if not runs:
            continue
        means = [[v for p in runs if (v := _average(p, x)) is not None] for x in RATIOS]
        avg = [f"{sum(v) / len(v):.2f}" if v else "–" for v in means]
        key = [_cell([p["niah single"][float(x)] for p in runs
                      if float(x) in p.get("niah single", {})]) for x in RATIOS]
        lines.append(f"| {label} | {len(runs)} | " + " | ".join(avg + key) + " |")
    return "\n".join(lines)


def figures(a) -> None:
    """`fsc plot ruler` of the seed-0 eval runs, into --figures."""
    st = Reader(a.store)
    runs = list(_latest_runs(st, "eval", [tag(r, 0) for r in a.recipes], tuple(a.set)).values())
    if runs:
        a.figures.mkdir(parents=True, exist_ok=True)
        plot("ruler", runs, a.figures / "ruler.png", a.store)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.reach", description=__doc__.split("\n\n")[0])
    p.add_argument("--recipes", default=",".join(RECIPES))
    # a fixed budget (no --stop-at: a mix's in-loop exact match is not the passkey's)
    p.add_argument("--train-steps", default="2000",
                   help="fsc train's --train-steps: N, or RECIPE=N,... per recipe")
    p.add_argument("--lr", default="passkey_attn=3e-3,passkey_mamba=1e-2,passkey_hybrid=1e-2,"
                   "passkey_attn_nope=3e-3,passkey_hybrid_nope=1e-2,passkey_hybrid_swa=1e-2,"
                   "passkey_hybrid_nope_logn=1e-2,passkey_hybrid_halflife8=1e-2,"
                   "passkey_hybrid_halflife4=1e-2,passkey_hybrid_halflife16=1e-2,"
                   "passkey_hybrid_halflife32=1e-2")
    p.add_argument("--data", default=MIX, help="the training mix (fsc train --data)")
    p.add_argument("--seq-len", default="128", help="fsc train's --seq-len: one length, or "
                   "several (128,256: each micro-batch at one; scored against the longest)")
    p.add_argument("--batch", type=positive, default=32)
    p.add_argument("--eval-every", type=positive, default=250)
    p.add_argument("--seeds", type=ints, default=[0], help="comma-separated training seeds")
    p.add_argument("--samples", type=positive, default=10, help="prompts per cell")
    p.add_argument("--depths", default="0,0.5,1", help="niah's needle depths")
    p.add_argument("--start-from", type=Path, default=None, metavar="DIR",
                   help="train on from the checkpoints of an earlier run's --out (DIR/RECIPE[-sS]),"
                   " as post-training; give this run its own --out and --store")
    p.add_argument("--state-passing", action="store_true", help="fsc train --state-passing")
    p.add_argument("--freeze", default=None, metavar="KIND[,KIND]",
                   help="fsc train --freeze: these mixers keep the weights they start with")
    p.add_argument("--levers", action="store_true",
                   help="print the levers' table (LEVERS) from the stores beside --out; run nothing")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="score with a weight-free recipe field changed (fsc eval --set; "
                   "repeatable); the tables read the runs scored so")
    return parsed(p, argv, "reach", "write ruler.png of the seed-0 runs here")


def main() -> None:
    a = options()
    if a.levers:
        print(levers(a))
        return
    retrieval.run(a, train, evaluate, tables, figures)


if __name__ == "__main__":
    boundary(main, "python -m tools.reach")
