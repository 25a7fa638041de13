"""`fsc compare RUN_A RUN_B`: the same points measured twice, side by side.

Points are matched on what makes them the same measurement: (recipe hash, S, B, G, K, dtype,
backend, device). For each matched pair, the ratio B/A of the step and fold times, tokens/s and
peak memory, and whether the p10–p90 intervals of each timed phase overlap. The verdict
follows the time per block (K steps and a fold: what tokens/s measures): faster or slower when
the intervals of K·step + fold (K·p10 + p10 to K·p90 + p90) are disjoint, noise when they
overlap; so it always agrees with the time ratio printed beside it. Ratios of time are B/A, so
above 1 is slower; the summary is the geometric mean over the points both runs measured.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fsc.noise import overlap
from fsc.sweep import timed_with_graphs
from fsc.text import human_bytes

KEY = ("recipe_hash", "S", "B", "G", "K", "dtype", "backend", "device")
RATIOS = ("step", "fold", "time", "tokens_per_s", "peak_bytes")  # time: per block, 1 / tokens/s
PHASES = ("step", "fold")
OVERLAPS = (*PHASES, "time")  # time: the block's, which the verdict follows


@dataclass
class Pair:
    """One point of both runs."""

    key: dict[str, Any]
    recipe: str
    status: tuple[str, str]  # (A's, B's)
    step: tuple[float | None, float | None] = (None, None)  # median ms
    fold: tuple[float | None, float | None] = (None, None)
    ratios: dict[str, float | None] = field(default_factory=dict)  # B / A
    overlap: dict[str, bool | None] = field(default_factory=dict)  # p10–p90 intervals
    verdict: str = "noise"  # faster | slower | noise | status (of the time per block)

    def to_dict(self) -> dict[str, Any]:
        return {**self.key, "recipe": self.recipe, "status_a": self.status[0],
                "status_b": self.status[1], "step_ms_a": self.step[0], "step_ms_b": self.step[1],
                "fold_ms_a": self.fold[0], "fold_ms_b": self.fold[1],
                **{f"{k}_ratio": self.ratios.get(k) for k in RATIOS},
                **{f"{k}_overlap": self.overlap.get(k) for k in OVERLAPS}, "verdict": self.verdict}


@dataclass
class Comparison:
    run_a: str
    run_b: str
    pairs: list[Pair]
    only_a: list[dict[str, Any]]
    only_b: list[dict[str, Any]]
    geomean: dict[str, float | None]

    @property
    def time_ratio(self) -> float | None:
        """Geometric mean of B's time per block over A's: the figure --fail-above gates."""
        return self.geomean.get("time")

    def to_dict(self) -> dict[str, Any]:
        return {"run_a": self.run_a, "run_b": self.run_b, "key": list(KEY),
                "geomean": self.geomean, "points": [p.to_dict() for p in self.pairs],
                "only_a": self.only_a, "only_b": self.only_b}


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a <= 0 or b <= 0:
        return None
    return b / a


def _verdict(pair: Pair) -> str:
    """What the time per block did: the measure the time and tok/s ratios name."""
    if pair.status[0] == pair.status[1] != "ok":  # oom in both: nothing changed, nothing timed
        return f"both {pair.status[0]}"
    if pair.status != ("ok", "ok"):
        return "status"
    ratio, within = pair.ratios.get("time"), pair.overlap.get("time")
    if ratio is None or within is not False:
        return "noise"
    return "slower" if ratio > 1 else "faster"


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _short(p: dict) -> dict[str, Any]:
    return {"recipe": p["recipe"], **{k: p[k] for k in KEY}, "status": p["status"]}


def timing(config: dict[str, Any], points: list[dict]) -> str:
    """How a profile run timed its GPU points: "graphs" (replayed from CUDA graphs, the default
    since `fsc profile` captures them), "eager" (`--no-graphs`, or a run from before graphs), or
    "cpu" when none of its points ran on a GPU, where the question does not arise."""
    if not any(str(p.get("device") or "").startswith("cuda") for p in points):
        return "cpu"
    return "graphs" if timed_with_graphs(config) else "eager"


def timing_note(run_a: str, timing_a: str, run_b: str, timing_b: str) -> str | None:
    """A line saying the two runs were timed differently on the GPU, or None."""
    if timing_a == timing_b or "cpu" in (timing_a, timing_b):
        return None
    how = {"graphs": "replayed from CUDA graphs", "eager": "issued eagerly (--no-graphs)"}
    return (f"note: A ({run_a}) timed its steps {how[timing_a]}, B ({run_b}) {how[timing_b]}: "
            "the ratios compare the two ways of issuing as well as the runs")


def _count(config: dict[str, Any], key: str) -> int | None:
    """A positive whole number a run's config records under `key`, else None."""
    n = config.get(key)
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def repeats(config: dict[str, Any]) -> int | None:
    """The timed repeats of each point of a profile run, as its config records them."""
    return _count(config, "repeats")


def repeats_note(run_a: str, repeats_a: int | None, run_b: str,
                 repeats_b: int | None) -> str | None:
    """A line saying the two runs timed each point over different numbers of repeats, or that
    one of them timed it once (an interval of no width: no difference reads as noise), or
    None."""
    once = [f"{which} ({run})" for which, run, n in (("A", run_a, repeats_a),
                                                     ("B", run_b, repeats_b)) if n == 1]
    if once:
        return (f"note: {' and '.join(once)} timed each point once (--repeats 1): a p10–p90 "
                "interval of no width, so no difference reads as noise and every verdict is "
                "faster or slower; time them with --repeats 3 or more before concluding")
    if repeats_a is None or repeats_b is None or repeats_a == repeats_b:
        return None
    return (f"note: A ({run_a}) timed each point over {repeats_a} repeats, B ({run_b}) over "
            f"{repeats_b}: the medians and p10–p90 intervals (and so the verdicts) rest on "
            "different numbers of samples")


def budget(config: dict[str, Any]) -> int | None:
    """The --memory-budget (bytes) a profile run fitted its points to, as its config records
    it; None: the device's free memory."""
    return _count(config, "memory_budget")


def budget_note(run_a: str, budget_a: int | None, run_b: str,
                budget_b: int | None) -> str | None:
    """A line saying the two runs fitted their points to different memory budgets, or None."""
    if budget_a == budget_b:
        return None

    def said(n: int | None) -> str:
        return f"--memory-budget {human_bytes(n)}" if n else "the device's free memory"

    return (f"note: A ({run_a}) fitted its points to {said(budget_a)}, B ({run_b}) to "
            f"{said(budget_b)}: a point out of memory in one run and not the other may be the "
            "budget, not the run")


def unfinished(run_id: str, status: str | None, what: str) -> str | None:
    """For a profile run that did not finish (interrupted, failed, killed: dead, or running
    still), words saying that `what` (its table, its comparison) holds the points it measured
    so far, and how to measure the rest; None for a finished one."""
    if status in (None, "finished"):
        return None
    return (f"did not finish ({status}): {what} the points it measured so far; `fsc profile "
            f"--resume {run_id}` measures the rest"
            + (" once it has stopped" if status == "running" else ""))


def unfinished_note(which: str, run_id: str, status: str | None) -> str | None:
    """A line saying run `which` (A or B) did not finish, so that it is compared on the points
    it measured so far; None for a finished one."""
    said = unfinished(run_id, status, "it is compared on")
    return None if said is None else f"note: {which} ({run_id}) {said}"


def _device(text: Any) -> Any:
    """A point's device as matching reads it: `cuda` (what `--device auto` resolves to) is
    the current CUDA device, cuda:0, as a worker process records it."""
    return "cuda:0" if text == "cuda" else text


def _key(p: dict) -> tuple:
    return tuple(_device(p[k]) if k == "device" else p[k] for k in KEY)


def device_names(points: list[dict]) -> list[str]:
    """The device names (the hardware: "NVIDIA H100 80GB HBM3") a run's points ran on."""
    return sorted({str(p["device_name"]) for p in points if p.get("device_name")})


def device_note(run_a: str, names_a: list[str], run_b: str, names_b: list[str]) -> str | None:
    """A line saying the two runs ran on different hardware, or None (the same, or one not
    recorded)."""
    if not names_a or not names_b or names_a == names_b:
        return None
    return (f"note: A ({run_a}) ran on {', '.join(names_a)}, B ({run_b}) on "
            f"{', '.join(names_b)}: the ratios compare the devices as well as the runs")


def compare(run_a: str, points_a: list[dict], run_b: str, points_b: list[dict]) -> Comparison:
    """Match the points of two runs (rows of the profile view) and compare each pair. A key
    that a run measured more than once (a recipe or an S given twice) pairs its points in
    order, the n-th of A with the n-th of B; the rest are A's or B's alone."""
    by_b: dict[tuple, list[dict]] = {}
    for p in points_b:
        by_b.setdefault(_key(p), []).append(p)
    pairs, only_a = [], []
    for a in points_a:
        k = _key(a)
        if not by_b.get(k):
            only_a.append(_short(a))
            continue
        b = by_b[k].pop(0)
        pair = Pair(dict(zip(KEY, k, strict=True)), a["recipe"], (a["status"], b["status"]),
                    (a["step_ms"], b["step_ms"]), (a["fold_ms"], b["fold_ms"]))
        if pair.status == ("ok", "ok"):
            # time per block (K steps and a fold, over B·G tokens) is 1 / tokens_per_s
            pair.ratios = {
                "step": _ratio(a["step_ms"], b["step_ms"]),
                "fold": _ratio(a["fold_ms"], b["fold_ms"]),
                "time": _ratio(b["tokens_per_s"], a["tokens_per_s"]),
                "tokens_per_s": _ratio(a["tokens_per_s"], b["tokens_per_s"]),
                "peak_bytes": _ratio(a["peak_bytes"], b["peak_bytes"]),
            }
            pair.overlap = {phase: overlap(a, b, phase) for phase in OVERLAPS}
        pair.verdict = _verdict(pair)
        pairs.append(pair)
    only_b = [_short(p) for p in points_b if any(p is q for q in by_b[_key(p)])]
    means = {n: geomean([p.ratios.get(n) for p in pairs]) for n in RATIOS}
    return Comparison(run_a, run_b, pairs, only_a, only_b, means)


def regressions(c: Comparison, limit: float) -> list[str]:
    """Why B fails --fail-above `limit`: the geometric mean time ratio above it, or a point A
    measured that B could not (ok in A, oom or error in B). Empty when B passes."""
    why = []
    if c.time_ratio is not None and c.time_ratio > limit:
        n = sum(1 for p in c.pairs if p.ratios.get("time"))
        why.append(f"B takes {c.time_ratio:.3f}× A's time per block (geometric mean over "
                   f"{n} point{'' if n == 1 else 's'}) > {limit:g}")
    lost = [p for p in c.pairs if p.status[0] == "ok" and p.status[1] != "ok"]
    if lost:
        p = lost[0]
        became = Counter(q.status[1] for q in lost)
        what = (f"are {p.status[1]} in B" if len(became) == 1 else
                f"are not ok in B: {', '.join(f'{n} {s}' for s, n in became.items())}")
        why.append(f"{len(lost)} point(s) ok in A {what} (first: {p.recipe} "
                   f"S={p.key['S']} B={p.key['B']}, {p.status[1]})")
    return why


def apart(points_a: list[dict], points_b: list[dict]) -> str:
    """Why two runs share no point, in words: a run with none, or the key fields in which no
    value of A's is one of B's (dtype: A fp32, B bf16); "" when their values meet in every
    field and only the combinations differ."""
    if not points_a or not points_b:
        return f"{'A' if not points_a else 'B'} holds no point"

    def values(points: list[dict], k: str) -> list[str]:
        named = ((f"{p['recipe']} ({p[k]})" if k == "recipe_hash" else str(_device(p[k])))
                 for p in points)
        return list(dict.fromkeys(named))

    said = []
    for k in KEY:
        va, vb = values(points_a, k), values(points_b, k)
        if not set(va) & set(vb):
            name = "recipe" if k == "recipe_hash" else k
            said.append(f"{name}: A {', '.join(va[:3])}, B {', '.join(vb[:3])}")
    return "; ".join(said)
