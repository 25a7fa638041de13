"""What a profile sweep measured: each point's row (`PointResult`, as stored, printed and sent by
a worker), and every recipe against the baseline recipe at each point (`compare`), with what to
say where the baseline did not fit (`baseline_notes`). Pure Python, as fsc.sweep (the plan)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field, fields
from datetime import datetime

from fsc.noise import overlap
from fsc.sweep import device_key


@dataclass
class PointResult:
    """One point of a sweep as measured, or refused (status oom or error, with why): the
    columns of its profile_points row, then its raw timings and, after an error, the traceback
    (neither of those two is a column). Times in ms, sizes in bytes, bandwidth in GB/s."""

    recipe: str
    recipe_hash: str
    layer_plan: list[str]
    S: int
    B: int
    G: int
    K: int
    dtype: str
    backend: str
    device: str
    status: str = "ok"
    error: str | None = None
    step_ms: float | None = None
    step_ms_p10: float | None = None
    step_ms_p90: float | None = None
    fold_ms: float | None = None
    fold_ms_p10: float | None = None
    fold_ms_p90: float | None = None
    tokens_per_s: float | None = None
    peak_bytes: int | None = None
    mixer_backends: dict[str, str] | None = None  # mixer kind -> the backend its ops ran on
    cache_bytes: int | None = None
    weight_bytes: int | None = None
    predicted_step_bytes: int | None = None
    predicted_total_bytes: int | None = None
    floor_ms: float | None = None
    bound: str | None = None
    achieved_gbps: float | None = None
    roofline_fraction: float | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    samples: dict[str, list[float]] | None = field(default=None, repr=False)
    traceback: str | None = field(default=None, repr=False)

    def key(self) -> tuple:
        """The stored point's key: what Point.key gives for the point it measured."""
        return (self.recipe_hash, self.S, self.B, self.G, self.K, self.dtype, self.backend,
                device_key(self.device))

    def columns(self) -> dict:
        """The point's profile_points row: what the store writes (it keeps mixer_backends as
        JSON text), `--json` prints and a worker sends (with samples and traceback)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("samples", "traceback")}

    @classmethod
    def from_columns(cls, row: dict) -> PointResult:
        """The point a row of profile_points columns describes: a stored row (mixer_backends as
        JSON text) or a worker's (times as ISO text after a JSON-lines file); keys that are not
        fields are left out."""
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in row.items() if k in names}
        if isinstance(values.get("mixer_backends"), str):
            values["mixer_backends"] = json.loads(values["mixer_backends"])
        for k in ("started_at", "ended_at"):
            if isinstance(values.get(k), str):
                values[k] = datetime.fromisoformat(values[k])
        return cls(**values)


def _baseline(rows: list[PointResult]) -> str:
    """The recipe others are compared with: the all-attention one if any, else the first."""
    for r in rows:
        if set(r.layer_plan) == {"attention"}:
            return r.recipe
    return rows[0].recipe


def _status(base: PointResult | None, ran_at_G_K: bool) -> str:
    """A versus row's baseline_status: the baseline point's, else why it has none."""
    if base is not None:
        return base.status
    return MISSING if ran_at_G_K else NOT_MEASURED


NOT_MEASURED = "none"  # a versus row's baseline_status where the baseline ran at no such G, K
MISSING = "-"  # where it ran at that G, K but not at that S, B (a partial or interrupted run)


def compare(rows: list[PointResult], baseline: str | None = None,
            memory_budget: int | None = None, free_bytes: int | None = None,
            refs: dict[str, str] | None = None, dtype: str | None = None) -> list[dict]:
    """At each (S, B, G, K): latency ×, memory × and throughput × of every recipe versus the
    baseline recipe (default: the all-attention one, else the first; × > 1: better than the
    baseline). `latency_noise` / `throughput_noise`: the p10–p90 intervals of the measure the
    ratio names overlap (the step's; the block's per token, K·step + fold over B·G, which
    tokens/s inverts), so the ratio is inside the noise.

    Where the baseline is out of memory at (S, B), the recipe is compared with the baseline's
    largest batch measured at that S (and G, K) that fits: `baseline_B` is the batch compared
    with (B itself, unless so). Where the sweep measured none, `baseline_fits_B` is the largest
    batch the cost model fits in the budget (`memory_budget`, the sweep's --memory-budget,
    else `free_bytes`; None when neither is known; 0: not even one sequence) and
    `baseline_command` the `fsc profile` that measures it as the sweep did: the recipe as the
    sweep named it (`refs`: name -> the -r it was given; default the name) and its --dtype
    (`dtype`; None: the recipe's). `baseline_status` is the baseline's
    status at the point, NOT_MEASURED where the baseline ran at no such G and K (a recipe of
    another block size), MISSING where it ran at that G and K but not at that S and B.
    `status` is the recipe's own: a point of it out of memory or failed has a row with no
    ratios, so that a table of these rows shows it rather than leaving it out."""
    if not rows:
        return []
    base_name = baseline or _baseline(rows)

    def key(r):
        return r.S, r.B, r.G, r.K

    by: dict[tuple, PointResult] = {}
    for r in rows:  # a point measured twice (a recipe given twice): its first, which fsc
        by.setdefault((r.recipe, *key(r)), r)  # compare pairs with another run's first
    measured_at = {(b.G, b.K) for b in rows if b.recipe == base_name}
    result = []
    for r in rows:
        if r.recipe == base_name:
            continue
        base = by.get((base_name, *key(r)))
        fits_B = command = None
        if r.status == "ok" and base is not None and base.status == "oom":
            same_s = [b for b in rows
                      if b.recipe == base_name and (b.S, b.G, b.K) == (r.S, r.G, r.K)]
            smaller = [b for b in same_s if b.status == "ok" and b.B < r.B]
            if smaller:
                base = max(smaller, key=lambda b: b.B)
            else:
                fits_B = _batch_that_fits(base, memory_budget or free_bytes,
                                          min(b.B for b in same_s if b.status == "oom"))
                if fits_B:
                    command = _profile_command(base, fits_B, memory_budget,
                                               (refs or {}).get(base.recipe), dtype)
        ok = r.status == "ok" and base is not None and base.status == "ok"
        phase = "fold" if r.K == 0 else "step"  # ar: the pass that makes each token is the fold
        result.append({
            "S": r.S, "B": r.B, "G": r.G, "K": r.K, "recipe": r.recipe, "status": r.status,
            "baseline": base_name,
            "baseline_B": base.B if ok else None,
            "latency_x": getattr(base, f"{phase}_ms") / getattr(r, f"{phase}_ms") if ok else None,
            "memory_x": base.peak_bytes / r.peak_bytes if ok else None,
            "throughput_x": r.tokens_per_s / base.tokens_per_s if ok else None,
            "baseline_status": _status(base, (r.G, r.K) in measured_at),
            "baseline_fits_B": fits_B,
            "baseline_command": command,
            "latency_noise": ok and overlap(base, r, phase) is True,
            "throughput_noise": ok and overlap(base, r, "token") is True,
        })
    return sorted(result, key=lambda c: (c["G"], c["K"], c["B"], c["S"], c["recipe"]))


def _batch_that_fits(oom: PointResult, budget: int | None, oom_from: int) -> int | None:
    """The largest B below `oom_from` (the smallest batch measured out of memory) at which the
    cost model fits `oom`'s recipe at its S and G in `budget` bytes (0: none; None: no budget
    or no prediction). A point's bytes are the weights plus a part per sequence (see
    costmodel.max_batch), which the oom row's predicted total at its B gives."""
    if budget is None or not oom.predicted_total_bytes or oom.weight_bytes is None:
        return None
    per_sequence = (oom.predicted_total_bytes - oom.weight_bytes) / oom.B
    if per_sequence <= 0:
        return None
    return max(0, min(int((budget - oom.weight_bytes) // per_sequence), oom_from - 1))


def _profile_command(p: PointResult, B: int, memory_budget: int | None, ref: str | None = None,
                     dtype: str | None = None) -> str:
    """The `fsc profile` that measures point `p`'s recipe (`ref`: as the sweep named it, default
    its name) at its S, G and K at batch `B`, with the sweep's budget, --dtype and --backend."""
    block = "--mode ar" if p.K == 0 else f"--G {p.G} --steps {p.K}"
    settings = (f" --dtype {dtype}" if dtype else "") + (
        f" --backend {p.backend}" if p.backend != "auto" else "")
    budget = f" --memory-budget {_size_option(memory_budget)}" if memory_budget else ""
    return (f"fsc profile -r {shlex.quote(ref or p.recipe)} --S {p.S} --B {B} {block}{settings}"
            f"{budget}")


def _size_option(n: int) -> str:
    """Bytes as --memory-budget reads them back exactly: '24MiB', '3GiB', '1000000'."""
    for name, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n % size == 0:
            return f"{n // size}{name}"
    return str(n)


# What each ratio of a versus-baseline table divides, said below it (fsc profile, fsc report)
VERSUS_KEY = ("latency ×: the baseline's step time over the recipe's (one forward of G tokens "
              "at each B; ar, K 0: the fold's, the pass that makes each token); memory ×: the baseline's peak memory over the recipe's; throughput ×: "
              "the recipe's tokens/s over the baseline's, over whole blocks (K steps and the "
              "fold) of all B rows")


def baseline_notes(comparison: list[dict]) -> list[str]:
    """What a versus-baseline table says below it: for each (G, K) the baseline was not
    measured at (recipes of other block sizes), why there is no ratio; for each S (and G, K)
    where the baseline is out of memory and the sweep measured no batch of it that fits, the
    batch the cost model fits and the command that measures it."""
    notes: list[str] = []
    said = set()
    for x in comparison:
        if x.get("status", "ok") != "ok":  # the recipe's own point failed: nothing to measure
            continue
        if x["baseline_status"] == NOT_MEASURED and (x["G"], x["K"]) not in said:
            said.add((x["G"], x["K"]))
            notes.append(f"{x['baseline']} was not measured at G {x['G']}, K {x['K']}: no "
                         "ratio there (each recipe runs at its own block size unless --G and "
                         "--steps give one for all)")
        where = (x["S"], x["G"], x["K"])
        if x["baseline_status"] != "oom" or x["baseline_B"] is not None or where in said:
            continue
        said.add(where)
        base = x["baseline"]
        at = (f"{base} is out of memory at S {x['S']}, B {x['B']} and the sweep measured no "
              "smaller batch of it that fits")
        if x["baseline_command"]:
            notes.append(f"{at}; per the cost model it fits at B {x['baseline_fits_B']}, which "
                         f"this measures: `{x['baseline_command']}`")
        elif x["baseline_fits_B"] == 0:
            notes.append(f"{at}; the cost model fits not even B 1 at S {x['S']}")
        else:
            notes.append(f"{at}; measure it at a smaller --B to compare")
    return notes
