"""What `fsc decode` delivers beside what `fsc profile` measures, at the same recipe, S, B, G and
K (docs/benchmarks.md §18):

    python -m tools.bench_decode_gpu [--recipes mamba_3b,hybrid_3b,attn_3b] [--S 16384,262144]
                                     [--B 1,8] [--length 512] [--device auto] [--store DIR]

For each point: `fsc profile`'s tokens/s (a step replayed K times and a fold, on a synthetic
cache of S tokens), then `fsc decode`'s end to end on B prompts of S tokens from a file
(`--prompt-file` at B 1, `--prompts --batch B` above): its generation's tokens/s (the prompt's
fold, `prefill_s`, and the first call's warm-up timed apart), and the ratio of the two. Each
command runs in a process of its own, as a user runs it. Every figure is recorded in the store
(a run of kind 'bench'); the last line is one JSON document.

On the CPU (`--device cpu --recipes tiny_mamba --S 64 --B 1,2 --length 8`) the same commands
run in seconds: the tool's own check (tests/core/test_bench_decode_gpu.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.options import Refused, boundary, check_store, command, positive, positives

FSC = [sys.executable, "-m", "fsc"]
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. "


def _fsc(args: list[str]) -> str:
    res = subprocess.run([*FSC, *args], capture_output=True, text=True,
                         env={**os.environ, "FSC_THREADS": os.environ.get("FSC_THREADS", "1")})
    if res.returncode != 0:
        said = " ".join(res.stderr.split())[-400:]
        raise SystemExit(f"fsc {' '.join(args)} failed (exit {res.returncode}): {said}")
    return res.stdout


def prompt_text(S: int, i: int) -> str:
    """S bytes of text (S tokens to fsc's byte tokenizer), the i-th of a batch told apart by
    its head (which S shorter than the head cuts)."""
    head = f"Prompt {i}. "
    return (head + FILLER * (S // len(FILLER) + 1))[:S]


def profiled(recipe: str, S: int, B: int, G: int, K: int, device: str, store: str) -> dict:
    doc = json.loads(_fsc(["profile", "-r", recipe, "--S", str(S), "--B", str(B), "--G", str(G),
                           "--steps", str(K), "--device", device, "--store", store, "--json"]))
    row = doc["points"][0]
    return {"status": row["status"], "tokens_per_s": row.get("tokens_per_s"),
            "profile_run": doc["run_id"]}


def decoded(recipe: str, S: int, B: int, G: int, K: int, length: int, device: str,
            folder: Path) -> dict:
    """`fsc decode`'s stats for B prompts of S tokens (those of the first row: at B > 1 its
    tokens/s is the batch's, every row's tokens over the generation's time)."""
    common = ["--length", str(length), "--G", str(G), "--steps", str(K), "--device", device]
    if B == 1:
        path = folder / f"prompt-{S}.txt"
        path.write_text(prompt_text(S, 0))
        stats = json.loads(_fsc(["decode", recipe, "--prompt-file", str(path), *common,
                                 "--json"]))["stats"]
    else:
        path = folder / f"prompts-{S}-{B}.jsonl"
        path.write_text("".join(json.dumps({"prompt": prompt_text(S, i)}) + "\n"
                                for i in range(B)))
        lines = _fsc(["decode", recipe, "--prompts", str(path), "--batch", str(B), *common])
        stats = json.loads(lines.splitlines()[0])["stats"]
    return {k: stats.get(k) for k in ("tokens_per_s", "prefill_s", "generate_s", "warmup_s",
                                      "graphs", "batch", "prompt_tokens")}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.bench_decode_gpu",
                                description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--recipes", default="mamba_3b,hybrid_3b,attn_3b",
                   help="comma-separated (default mamba_3b,hybrid_3b,attn_3b)")
    p.add_argument("--S", type=positives, default=[16384, 262144],
                   help="context lengths (prompt tokens), comma-separated (default 16384,262144)")
    p.add_argument("--B", type=positives, default=[1, 8],
                   help="batches, comma-separated (default 1,8)")
    p.add_argument("--G", type=positive, default=32, help="block size (default 32)")
    p.add_argument("--K", type=positive, default=32,
                   help="denoising steps per block, fsc's --steps (default 32)")
    p.add_argument("--length", type=positive, default=512,
                   help="tokens generated a prompt (default 512)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    p.add_argument("--store", type=Path, default=None,
                   help="the store the profile runs and this run are recorded in (default: "
                   "FSC_STORE, else ./store)")
    a = p.parse_args(argv)
    if a.device not in ("auto", "cpu") and not re.fullmatch(r"cuda(:\d+)?", a.device):
        raise Refused(f"--device {a.device!r}: one of auto, cpu, cuda, cuda:N")
    recipes = [r.strip() for r in a.recipes.split(",") if r.strip()]
    if not recipes:
        raise Refused("--recipes: name at least one recipe")
    if twice := sorted({r for r in recipes if recipes.count(r) > 1}):
        raise Refused(f"--recipes: {', '.join(twice)} given twice")
    from fsc.provenance import environment
    from fsc.recipe import load_recipe

    for r in recipes:  # a name fsc does not know is one line now, not after a sweep
        load_recipe(r)
    st = check_store(a.store)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for recipe in recipes:
            for S in a.S:
                for B in a.B:
                    prof = profiled(recipe, S, B, a.G, a.K, a.device, str(st.dir))
                    row = {"recipe": recipe, "S": S, "B": B, "profile": prof, "decode": None}
                    if prof["status"] == "ok":  # what profile cannot hold, decode cannot either
                        row["decode"] = decoded(recipe, S, B, a.G, a.K, a.length, a.device,
                                                Path(tmp))
                        row["ratio"] = row["decode"]["tokens_per_s"] / prof["tokens_per_s"]
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    # `auto` is what fsc picked: the first GPU if there is one (environment(None)), else the CPU
    device = None if a.device == "auto" else a.device
    with st.run("bench", command("bench_decode_gpu", argv),
                vars(a) | {"store": str(st.dir)}, environment=environment(device)) as run:
        for r in rows:
            extra = {"recipe": r["recipe"], "S": r["S"], "B": r["B"], "G": a.G, "K": a.K}
            if r["decode"] is None:
                continue
            run.add_bench(f"profile {r['recipe']} S {r['S']} B {r['B']}",
                          r["profile"]["tokens_per_s"], "tok/s", extra)
            run.add_bench(f"decode {r['recipe']} S {r['S']} B {r['B']}",
                          r["decode"]["tokens_per_s"], "tok/s", extra | r["decode"])
    print("| recipe | S | B | profile tok/s | decode tok/s | decode / profile | prefill s | graphs |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        d = r["decode"]
        if d is None:
            print(f"| {r['recipe']} | {r['S']} | {r['B']} | {r['profile']['status']} | | | | |")
            continue
        print(f"| {r['recipe']} | {r['S']} | {r['B']} | {r['profile']['tokens_per_s']:.1f} | "
              f"{d['tokens_per_s']:.1f} | {r['ratio']:.2f} | {d['prefill_s']:.2f} | "
              f"{d['graphs']} |")
    print(json.dumps({"run_id": run.run_id, "rows": rows}))


if __name__ == "__main__":
    boundary(main, "python -m tools.bench_decode_gpu")
