"""The miniature of the paper's Table 5 (`make quality`): what the denoising steps per block
cost in text quality, for attention, Mamba-2 and the hybrid.

Trains, on the shipped Shakespeare (fsc.corpora, its training split):
- the quality trio (quality_attn, quality_mamba, quality_hybrid: G 8, parameters within 20 %
  of each other, differing in the mixer) with the every-block objective, once per --seeds;
- quality_attn again with the next-token objective: the AR row, a model of the same size;
- the scorer (quality_scorer, wider, next-token objective): a separate model, so no sample is
  scored by its own generator or that generator's twin.

Then evaluates, on the validation split, with `fsc eval`: genppl of each denoiser at K = 1, 2,
4, 8 under each reveal policy of --policies (samples continuing prompts of validation text,
temperature 1, float64 sampling, each scored by the scorer; the validation text's own
continuations as the reference row; the AR model decoded on the same prompts as a baseline
row) and the held-out NLL (the bound for the denoisers, the exact NLL for the AR models) with
its standard error. Prints the tables of docs/benchmarks.md section 14, checks the targets,
and with --figures draws `fsc plot quality` there.

    python -m tools.quality [--train-steps N] [--scorer-steps N] [--ar-steps N] [--seeds 0,1]
        [--policies confidence,random] [--samples N] [--jobs 2] [--out DIR] [--store DIR]
        [--figures DIR] [--skip-train] [--tables-only]

Training and evaluation run as `fsc train` and `fsc eval` processes, `--jobs` at a time, one
torch thread each; everything is recorded in --store and the tables are read back from it.
Seed s > 0 trains the trio into --out/RECIPE-sS (the scorer and the AR row are seed 0's).
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tools.fscjson import Reader, plot, run_json
from tools.options import boundary, ints, positive
from tools.retrieval import tag

TRIO = ["quality_attn", "quality_mamba", "quality_hybrid"]
SCORER = "quality_scorer"
AR = "quality_ar"  # quality_attn trained next-token: the AR row
STEPS = (1, 2, 4, 8)  # K; G is 8
ENTROPY_TOLERANCE = 0.10  # samples' entropy within 10 % of the validation text's
PARITY = 0.15  # Mamba-2 and the hybrid at K = G within 15 % of attention's Gen-PPL


@dataclass(frozen=True)
class Job:
    tag: str  # the folder under --out
    recipe: str
    objective: str
    steps: int
    seed: int = 0


def jobs(a) -> list[Job]:
    """Longest first, so that two workers finish together; the scorer and the AR row once."""
    trio = {r: [Job(tag(r, s), r, "blocks", a.train_steps, s) for s in a.seeds] for r in TRIO}
    shared = [Job(SCORER, SCORER, "ar", a.scorer_steps), Job(AR, "quality_attn", "ar",
                                                             a.ar_steps)]
    if 0 not in a.seeds:
        shared = []  # another seed's trio scored by seed 0's scorer, trained before
    return [*trio["quality_mamba"], *trio["quality_hybrid"], *shared[:1],
            *trio["quality_attn"], *shared[1:]]


def train(job: Job, a) -> None:
    t0 = time.perf_counter()
    doc = run_json(["train", job.recipe, "--data", "shakespeare", "--seq-len", str(a.seq_len),
                    "--train-steps", str(job.steps), "--batch", str(a.batch), "--lr", str(a.lr),
                    "--objective", job.objective,
                    *(["--weighting", a.weighting] if job.objective != "ar" else []),
                    "--log-every", "25", "--seed", str(job.seed), "--out", str(a.out / job.tag),
                    "--store", str(a.store)])
    print(f"trained {job.tag}: {doc['step']} steps, {time.perf_counter() - t0:.0f} s, "
          f"loss {doc['final_loss']:.4f}", flush=True)


def genppl(name: str, a) -> None:
    """genppl of a denoiser; seed 0's attention run carries the AR row too (same prompts)."""
    t0 = time.perf_counter()
    doc = run_json(["eval", str(a.out / name), "--task", "genppl", "--data", "shakespeare",
                    "--steps", ",".join(map(str, STEPS)), "--policy", ",".join(a.policies),
                    "--samples", str(a.samples), "--lengths", str(a.length),
                    "--prompt-length", str(a.prompt_length), "--scorer", str(a.out / SCORER),
                    "--batch", "1",  # tokens/s of one stream, as the table says
                    *(["--baseline", str(a.out / AR)] if name == "quality_attn" else []),
                    "--store", str(a.store)])
    print(f"genppl {name}: run {doc['run_id']}, {time.perf_counter() - t0:.0f} s", flush=True)


def heldout(name: str, a) -> None:
    doc = run_json(["eval", str(a.out / name), "--task", "loss", "--data", "shakespeare",
                    "--lengths", str(a.seq_len), "--samples", str(a.loss_samples),
                    "--store", str(a.store)])
    print(f"loss {name}: run {doc['run_id']}", flush=True)


def _latest(st: Reader, task: str) -> dict[str, str]:
    """The newest finished eval run of `task` per checkpoint folder under --out."""
    _, rows = st.query("select json_extract_string(config, '$.checkpoint'), run_id from runs "
                       "where kind = 'eval' and status = 'finished' and "
                       "json_extract_string(config, '$.task') = ? order by started_at", [task])
    return {Path(path).parent.name: run for path, run in rows if path}


COLUMNS = "mode, K, recipe, gen_ppl, gen_ppl_lo, gen_ppl_hi, entropy, tokens_per_s, policy"


def _cells(st: Reader, run: str) -> list[tuple]:
    _, rows = st.query(f"select {COLUMNS} from evaluation where run_id = ?", [run])
    return rows


def tables(a) -> str:
    st = Reader(a.store)
    runs = _latest(st, "genppl")
    cells = {t: _cells(st, runs[t]) for t in TRIO if t in runs}
    lines = [f"Gen-PPL under {SCORER} [95 % bootstrap interval], {a.samples} samples of "
             f"{a.length} characters after {a.prompt_length} of validation text, temperature 1, "
             "seed 0; entropy H (nats) and tokens/s (batch 1) in the same cell:", "",
             "| policy | K | " + " | ".join(TRIO) + " |", "| --- | --- |" + " --- |" * len(TRIO)]

    def cell(r) -> str:
        return f"{r[3]:.1f} [{r[4]:.1f}, {r[5]:.1f}]; H {r[6]:.2f}; {r[7]:.0f} tok/s"

    for policy in a.policies:
        for K in STEPS:
            row = [next((cell(r) for r in cells.get(t, []) if r[0] == "diffusion"
                         and r[1] == K and r[8] == policy), "–") for t in TRIO]
            lines.append(f"| {policy} | {K} | " + " | ".join(row) + " |")
    ar = next((r for rows in cells.values() for r in rows if r[0] == "ar"), None)
    ref = next((r for rows in cells.values() for r in rows if r[0] == "reference"), None)
    if ar:
        lines.append(f"| AR ({ar[2]}, next-token) | | {cell(ar)} | | |")
    if ref:
        lines.append(f"| validation text | | {ref[3]:.2f} [{ref[4]:.2f}, {ref[5]:.2f}]; "
                     f"H {ref[6]:.2f} | | |")
    losses = _latest(st, "loss")
    lines += ["", f"Held-out NLL per character on the validation split ({a.loss_samples} "
              f"sequences of {a.seq_len}; the denoisers' bound over every block, the AR models' "
              "exact NLL):", "", "| model | nats/char ± s.e. | bits/byte |", "| --- | ---: | ---: |"]
    for name in [*(tag(r, s) for s in a.seeds for r in TRIO), AR, SCORER]:
        if name in losses:
            _, [(loss, se, bpb)] = st.query("select loss, loss_se, bits_per_byte from evaluation"
                                            " where run_id = ?", [losses[name]])
            lines.append(f"| {name} | {loss:.3f} ± {se:.3f} | {bpb:.3f} |")
    if len(a.seeds) > 1:
        lines += ["", *seed_spread(st, runs, a)]
    lines += ["", *verdicts(cells, ref, a.policies)]
    return "\n".join(lines)


def seed_spread(st: Reader, runs: dict[str, str], a) -> list[str]:
    """Gen-PPL at K = G per backbone and policy over the seeds: mean [lowest, highest]."""
    K = STEPS[-1]
    out = [f"Over seeds {', '.join(map(str, a.seeds))}: Gen-PPL at K = {K}, mean [lowest, "
           "highest], and entropy:", "", "| policy | " + " | ".join(TRIO) + " |",
           "| --- |" + " --- |" * len(TRIO)]
    for policy in a.policies:
        row = []
        for r in TRIO:
            got = [c for s in a.seeds if tag(r, s) in runs for c in _cells(st, runs[tag(r, s)])
                   if c[0] == "diffusion" and c[1] == K and c[8] == policy]
            if not got:
                row.append("–")
                continue
            ppl = [c[3] for c in got]
            ent = sum(c[6] for c in got) / len(got)
            row.append(f"{sum(ppl) / len(ppl):.1f} [{min(ppl):.1f}, {max(ppl):.1f}]; "
                       f"H {ent:.2f} ({len(got)} seeds)")
        out.append(f"| {policy} | " + " | ".join(row) + " |")
    return out


def verdicts(cells: dict, ref, policies) -> list[str]:
    """The targets, each met or missed, with the numbers that decide it (seed 0)."""
    out = []
    for policy in policies:
        for name, rows in cells.items():
            by_k = {r[1]: r for r in rows if r[0] == "diffusion" and r[8] == policy}
            first, last = by_k.get(STEPS[0]), by_k.get(STEPS[-1])
            if first and last:
                ok = last[3] < first[3]
                out.append(f"- {policy}, {name}: Gen-PPL {'falls' if ok else 'does not fall'} "
                           f"from K = {STEPS[0]} to K = {STEPS[-1]} ({first[3]:.1f} → "
                           f"{last[3]:.1f}): {'met' if ok else 'missed'}")
            if ref and by_k:
                worst = max(abs(r[6] / ref[6] - 1) for r in by_k.values())
                out.append(f"- {policy}, {name}: sample entropy within {worst:.1%} of the "
                           f"text's ({ref[6]:.2f}) at every K: "
                           f"{'met' if worst <= ENTROPY_TOLERANCE else 'missed'}")
        base = {r[1]: r for r in cells.get("quality_attn", [])
                if r[0] == "diffusion" and r[8] == policy}
        for name in TRIO[1:]:
            mine = {r[1]: r for r in cells.get(name, []) if r[0] == "diffusion" and r[8] == policy}
            K = STEPS[-1]
            if K in base and K in mine:
                ratio = mine[K][3] / base[K][3]
                out.append(f"- {policy}, {name} at K = {K}: Gen-PPL {ratio:.2f}× attention's "
                           f"({mine[K][3]:.1f} against {base[K][3]:.1f}): "
                           f"{'met' if abs(ratio - 1) <= PARITY else 'missed'}")
    return out


def figures(a) -> None:
    st = Reader(a.store)
    runs = _latest(st, "genppl")
    evals = [runs[t] for t in TRIO if t in runs]
    a.figures.mkdir(parents=True, exist_ok=True)
    out = a.figures / "quality.png"
    plot("quality", evals, out, a.store)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.quality", description=__doc__.split("\n\n")[0])
    p.add_argument("--train-steps", type=positive, default=1200, help="each denoiser's steps")
    p.add_argument("--scorer-steps", type=positive, default=1200)
    p.add_argument("--ar-steps", type=positive, default=600, help="the AR row's steps")
    p.add_argument("--seq-len", type=positive, default=128)
    p.add_argument("--batch", type=positive, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    # masked: the same optimum as elbo without its 1/t spikes; measured better here
    # (docs/benchmarks.md §14)
    p.add_argument("--weighting", default="masked", choices=["elbo", "masked"])
    p.add_argument("--seeds", type=ints, default=[0], help="comma-separated seeds of the trio")
    p.add_argument("--policies", default="confidence,random",
                   help="reveal policies genppl decodes with (fsc decode --policy)")
    p.add_argument("--samples", type=positive, default=16, help="genppl samples per cell")
    p.add_argument("--length", type=positive, default=128, help="characters per sample")
    p.add_argument("--prompt-length", type=positive, default=64)
    p.add_argument("--loss-samples", type=positive, default=64)
    p.add_argument("--jobs", type=positive, default=2,
                   help="trainings and evaluations at a time, one torch thread each")
    p.add_argument("--out", type=Path, default=Path("runs/quality"))
    p.add_argument("--store", type=Path, default=Path("runs/quality/store"))
    p.add_argument("--figures", type=Path, default=None, help="write quality.png here")
    p.add_argument("--skip-train", action="store_true")
    p.add_argument("--tables-only", action="store_true",
                   help="print the tables from the newest runs in --store; run nothing")
    a = p.parse_args(argv)
    a.policies = a.policies.split(",")
    return a


def main() -> None:
    a = options()
    t0 = time.perf_counter()
    if not a.tables_only:
        names = [tag(r, s) for s in a.seeds for r in TRIO]
        extra = [AR, SCORER] if 0 in a.seeds else []
        with ThreadPoolExecutor(a.jobs) as pool:
            if not a.skip_train:
                list(pool.map(lambda job: train(job, a), jobs(a)))
            work = [(genppl, n) for n in names] + [(heldout, n) for n in [*names, *extra]]
            list(pool.map(lambda w: w[0](w[1], a), work))
        print(f"\nmake quality: {time.perf_counter() - t0:.0f} s\n", flush=True)
    print(tables(a))
    if a.figures is not None:
        figures(a)


if __name__ == "__main__":
    boundary(main, "python -m tools.quality")
