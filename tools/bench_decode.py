"""Autoregressive decoding against transformers' `generate` on the same weights (docs/benchmarks.md
sections 17 and 18): greedy, the same tokens out (checked), prompt processing and generation
timed apart.

    python -m tools.bench_decode [--models llama,mamba2,qwen3-0.6b] [--prompt 64] [--new 64]
                                 [--rounds 3] [--device cpu] [--dtype float32]
                                 [--sides transformers,fsc] [--store DIR]

The sides: `transformers` is `generate` as it comes (its dynamic cache, eager);
`transformers-static` with `cache_implementation="static"` and compilation off;
`transformers-compile` the static cache with the forward pass compiled (`generate`'s own
compilation, CUDA only); `fsc` is `fsc.decode.generate` in AR mode, what `fsc decode --mode ar`
runs. On the CPU one torch thread.

Each model is a random-weight transformers model (seed 0) saved to a temporary folder and
imported with `fsc import`: a tiny Llama (4 layers, width 128), a tiny Mamba-2 (4 layers,
width 128) and Qwen3-0.6B's shape (28 layers, width 1,024, 151,936 tokens). Both sides decode
the same prompt of --prompt random ids greedily for --new tokens, with nothing that stops them
early (no end-of-sequence token), so both emit exactly --new tokens.

Beside them, the weights a token reads and the speed of reading them once with nothing else
(every parameter summed): the ceiling a weight-bound decoder cannot pass on this machine.

Prompt processing is timed as a decode of one new token (the prompt's tokens over its time);
generation as the time of --new tokens less that one, per token after the first. The two sides
are timed by turns, --rounds times (the median of each round's median of --repeats calls, and
the range over rounds), so that a slow spell of the machine hits both. Each row is recorded in
the store (a run of kind 'bench').
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
from pathlib import Path

import torch

from tools.options import Refused, boundary, check_store, command, positive
from tools.timing import median_s

MODELS = ("llama", "mamba2", "qwen3-0.6b")


def _config(name: str):
    from transformers import AutoConfig

    if name == "llama":
        return AutoConfig.for_model("llama", vocab_size=512, hidden_size=128, intermediate_size=352,
                                    num_hidden_layers=4, num_attention_heads=4,
                                    num_key_value_heads=2, dtype="float32")
    if name == "mamba2":
        return AutoConfig.for_model("mamba2", vocab_size=512, hidden_size=128, num_hidden_layers=4,
                                    state_size=16, expand=2, head_dim=32, num_heads=8, n_groups=1,
                                    chunk_size=64, dtype="float32")
    # Qwen3-0.6B's published shape (recipes/published has the real config)
    return AutoConfig.for_model("qwen3", vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                                num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                                head_dim=128, tie_word_embeddings=True, rope_theta=1000000.0,
                                max_position_embeddings=40960, rms_norm_eps=1e-6, dtype="float32")


def _save(name: str, folder: Path):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_config(name)).eval()
    model.save_pretrained(folder)
    return model


SIDES = ("transformers", "transformers-static", "transformers-compile", "fsc")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _hf_decoder(model, prompt: list[int], side: str):
    """transformers' greedy `generate` of exactly `new` tokens: its default cache, or (`-static`)
    a static cache, compiled (`-compile`: `generate` compiles the forward pass itself on CUDA
    when its cache is static) or not."""
    ids = torch.tensor([prompt], device=model.device)
    cache = {} if side == "transformers" else {"cache_implementation": "static",
                                               "disable_compile": side != "transformers-compile"}

    def run(new: int) -> list[int]:
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                                 min_new_tokens=new, do_sample=False, eos_token_id=None,
                                 pad_token_id=0, use_cache=True, **cache)
        return out[0, len(prompt):].tolist()

    return run


def _fsc_decoder(ckpt: Path, prompt: list[int], device: str, dtype: torch.dtype):
    from fsc.decode import DecodeConfig, generate
    from fsc.loading import load_model
    from fsc.tokenizer import IdTokenizer

    # as `fsc decode --mode ar` loads it
    recipe, model = load_model(str(ckpt), device=device, dtype=dtype, one_token_steps=True)
    tok = IdTokenizer(recipe.vocab_size)

    def run(new: int) -> list[int]:
        cfg = DecodeConfig(length=new, G=1, steps=1, mode="ar", temperature=0.0)
        return generate(model, tok, prompt, cfg, device).token_ids

    run.model = model
    return run


def _weights_floor(model) -> tuple[float, float]:
    """(GB of weights a token reads: every parameter once, the embedding only where it is also
    the head (a lookup reads one row of it); the tokens/s of reading them once and doing
    nothing else: the ceiling of weight-bound decoding on this machine)."""
    read = [p for p in model.parameters() if p is not model.embed.weight or model.lm_head is None]
    nbytes = sum(p.numel() * p.element_size() for p in read)
    seconds = median_s(lambda: _synced([p.sum() for p in read]), 3, warmup=1)
    return nbytes / 1e9, 1 / seconds


def _synced(x):
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return x


def _time(run, prompt: int, new: int, repeats: int) -> tuple[float, float]:
    """(prompt tokens/s, generated tokens/s) of one decoder (warmed up at both lengths before;
    each call returns the tokens on the host, so the device is done when it returns)."""
    first = median_s(lambda: run(1), repeats)
    whole = median_s(lambda: run(new), repeats)
    return prompt / first, (new - 1) / max(whole - first, 1e-9)


def _listed(option: str, text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    """The names of a comma list, each one of `allowed` and given once."""
    got = [x.strip() for x in text.split(",") if x.strip()]
    if not got:
        raise Refused(f"{option}: name at least one of {', '.join(allowed)}")
    if bad := [x for x in got if x not in allowed]:
        raise Refused(f"unknown {what} {bad[0]!r}; some of {', '.join(allowed)}")
    if twice := sorted({x for x in got if got.count(x) > 1}):
        raise Refused(f"{option}: {', '.join(twice)} given twice")
    return got


def _device(text: str) -> str:
    """--device as a torch device this machine has: cpu, cuda, cuda:N, or auto."""
    if text == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if text != "cpu" and not re.fullmatch(r"cuda(:\d+)?", text):
        raise Refused(f"--device {text!r}: one of cpu, cuda, cuda:N, auto")
    if text != "cpu" and not torch.cuda.is_available():
        raise Refused(f"--device {text}: no CUDA device here (--device cpu, or auto)")
    return text


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.bench_decode",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"some of {', '.join(MODELS)} (default all three)")
    p.add_argument("--prompt", type=positive, default=64, help="prompt tokens (default 64)")
    p.add_argument("--new", type=positive, default=64,
                   help="generated tokens, at least 2 (generation is timed after the first; "
                   "default 64)")
    p.add_argument("--repeats", type=positive, default=3,
                   help="timed calls per round (the median; 1 for qwen3-0.6b; default 3)")
    p.add_argument("--rounds", type=positive, default=3,
                   help="the sides timed by turns (default 3)")
    p.add_argument("--device", default="cpu",
                   help="cpu, cuda, cuda:N or auto (CUDA when present; default cpu)")
    p.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    p.add_argument("--sides", default="transformers,fsc",
                   help=f"some of {', '.join(SIDES)} (default transformers,fsc)")
    p.add_argument("--store", type=Path, default=None,
                   help="the store the run is recorded in (default: FSC_STORE, else ./store)")
    a = p.parse_args(argv)
    if a.new < 2:
        p.error("--new: at least 2 (a token's generation is the time of --new less the first's)")
    names = _listed("--models", a.models, MODELS, "model")
    sides = _listed("--sides", a.sides, SIDES, "side")
    if "fsc" not in sides or len(sides) < 2:
        raise Refused("--sides: fsc and at least one side of transformers")
    device = _device(a.device)
    if "transformers-compile" in sides and not device.startswith("cuda"):
        raise Refused("transformers-compile: generate compiles its forward pass on CUDA only")
    dtype = DTYPES[a.dtype]
    if device == "cpu":
        torch.set_num_threads(1)
    from fsc.cli.main import main as fsc
    from fsc.provenance import environment

    st = check_store(a.store)
    rows, floors = [], []
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            folder, ckpt = Path(tmp) / name, Path(tmp) / f"{name}-fsc"
            hf_model = _save(name, folder).to(device=device, dtype=dtype)
            if fsc(["import", str(folder), "--out", str(ckpt), "--store", str(Path(tmp) / "st")]):
                raise SystemExit(f"fsc import of {name} failed")
            vocab = hf_model.config.vocab_size
            prompt = torch.randint(0, vocab, (a.prompt,), generator=torch.Generator().manual_seed(1)).tolist()
            runs = {s: _fsc_decoder(ckpt, prompt, device, dtype) if s == "fsc"
                    else _hf_decoder(hf_model, prompt, s) for s in sides}
            # each side's first calls, at both lengths, are its warm-up (compilation, graphs)
            # and give its tokens
            tokens = {s: (run(1), run(a.new))[1] for s, run in runs.items()}
            got: dict[str, list[tuple[float, float]]] = {s: [] for s in runs}
            repeats = 1 if name == "qwen3-0.6b" else a.repeats
            for _ in range(a.rounds):
                for side, run in runs.items():
                    got[side].append(_time(run, a.prompt, a.new, repeats))
            gb, ceiling = _weights_floor(runs["fsc"].model)
            floors.append(f"{name}: {gb:.3f} GB of weights a token; reading them once alone "
                          f"runs at {ceiling:.1f} tok/s ({gb * ceiling:.1f} GB/s)")
            for side, pairs in got.items():
                pre, gen = [x[0] for x in pairs], [x[1] for x in pairs]
                rows.append({"model": name, "side": side, "same_tokens": tokens[side] == tokens["fsc"],
                             "prompt_tok_s": statistics.median(pre), "prompt_range": (min(pre), max(pre)),
                             "gen_tok_s": statistics.median(gen), "gen_range": (min(gen), max(gen))})
            del hf_model, runs
    with st.run("bench", command("bench_decode", argv),
                vars(a) | {"store": str(st.dir)}, environment=environment(device)) as run:
        for r in rows:
            extra = {"model": r["model"], "prompt": a.prompt, "new": a.new, "dtype": a.dtype,
                     "same_tokens": r["same_tokens"]}
            run.add_bench(f"ar decode prompt {r['model']} {r['side']}", r["prompt_tok_s"], "tok/s", extra)
            run.add_bench(f"ar decode generate {r['model']} {r['side']}", r["gen_tok_s"], "tok/s", extra)
    print(_table(rows))
    print("\n".join(floors))
    print(json.dumps({"run_id": run.run_id, "rows": rows, "weights": floors}))


def _table(rows: list[dict]) -> str:
    """The rows as markdown; beside each side of transformers, fsc's speed over that side's and
    whether its tokens are fsc's."""
    out = ["| model | side | prompt tok/s [range] | generation tok/s [range] | fsc / this side "
           "(prompt / generation) | same tokens as fsc |", "| --- | --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        mine = next(x for x in rows if x["model"] == r["model"] and x["side"] == "fsc")
        ratio = ("" if r is mine else f"{mine['prompt_tok_s'] / r['prompt_tok_s']:.2f}× / "
                 f"{mine['gen_tok_s'] / r['gen_tok_s']:.2f}×")
        out.append(f"| {r['model']} | {r['side']} | {r['prompt_tok_s']:.1f} [{r['prompt_range'][0]:.1f}–"
                   f"{r['prompt_range'][1]:.1f}] | {r['gen_tok_s']:.1f} [{r['gen_range'][0]:.1f}–"
                   f"{r['gen_range'][1]:.1f}] | {ratio} | {r['same_tokens']} |")
    return "\n".join(out)


if __name__ == "__main__":
    boundary(main, "python -m tools.bench_decode")
