"""Autoregressive decoding against transformers' `generate` on the same weights (docs/benchmarks.md
section 17): greedy, one torch thread, the same tokens out (checked), prompt processing and
generation timed apart.

    python -m tools.bench_decode [--models llama,mamba2,qwen3-0.6b] [--prompt 64] [--new 64]
                                 [--rounds 3] [--store DIR]

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
import statistics
import sys
import tempfile
from pathlib import Path

import torch

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


def _hf_decoder(model, prompt: list[int]):
    ids = torch.tensor([prompt])

    def run(new: int) -> list[int]:
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                                 min_new_tokens=new, do_sample=False, eos_token_id=None,
                                 pad_token_id=0, use_cache=True)
        return out[0, len(prompt):].tolist()

    return run


def _fsc_decoder(ckpt: Path, prompt: list[int]):
    from fsc.decode import DecodeConfig, generate
    from fsc.loading import load_model
    from fsc.tokenizer import IdTokenizer

    recipe, model = load_model(str(ckpt), one_token_steps=True)  # as `fsc decode --mode ar`
    tok = IdTokenizer(recipe.vocab_size)

    def run(new: int) -> list[int]:
        cfg = DecodeConfig(length=new, G=1, steps=1, mode="ar", temperature=0.0)
        return generate(model, tok, prompt, cfg).token_ids

    run.model = model
    return run


def _weights_floor(model) -> tuple[float, float]:
    """(GB of weights a token reads: every parameter once, the embedding only where it is also
    the head (a lookup reads one row of it); the tokens/s of reading them once and doing
    nothing else: the ceiling of weight-bound decoding on this machine)."""
    read = [p for p in model.parameters() if p is not model.embed.weight or model.lm_head is None]
    nbytes = sum(p.numel() * p.element_size() for p in read)
    seconds = median_s(lambda: [p.sum() for p in read], 3, warmup=1)
    return nbytes / 1e9, 1 / seconds


def _time(run, prompt: int, new: int, repeats: int) -> tuple[float, float]:
    """(prompt tokens/s, generated tokens/s) of one decoder."""
    first = median_s(lambda: run(1), repeats, warmup=1)
    whole = median_s(lambda: run(new), repeats, warmup=0)
    return prompt / first, (new - 1) / max(whole - first, 1e-9)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help=f"some of {', '.join(MODELS)}")
    p.add_argument("--prompt", type=int, default=64, help="prompt tokens")
    p.add_argument("--new", type=int, default=64, help="generated tokens")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per round (the median)")
    p.add_argument("--rounds", type=int, default=3, help="the two sides timed by turns")
    p.add_argument("--store", type=Path, default=None)
    a = p.parse_args(argv)
    names = [m for m in a.models.split(",") if m]
    if bad := [m for m in names if m not in MODELS]:
        raise SystemExit(f"unknown model {bad[0]!r}; one of {', '.join(MODELS)}")
    torch.set_num_threads(1)
    from fsc.cli.common import store_dir
    from fsc.cli.main import main as fsc
    from fsc.provenance import environment
    from fsc.store import Store

    rows, floors = [], []
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            folder, ckpt = Path(tmp) / name, Path(tmp) / f"{name}-fsc"
            hf_model = _save(name, folder)
            if fsc(["import", str(folder), "--out", str(ckpt), "--store", str(Path(tmp) / "st")]):
                raise SystemExit(f"fsc import of {name} failed")
            vocab = hf_model.config.vocab_size
            prompt = torch.randint(0, vocab, (a.prompt,), generator=torch.Generator().manual_seed(1)).tolist()
            sides = {"transformers": _hf_decoder(hf_model, prompt), "fsc": _fsc_decoder(ckpt, prompt)}
            same = sides["transformers"](a.new) == sides["fsc"](a.new)
            got: dict[str, list[tuple[float, float]]] = {s: [] for s in sides}
            repeats = 1 if name == "qwen3-0.6b" else a.repeats
            for _ in range(a.rounds):
                for side, run in sides.items():
                    got[side].append(_time(run, a.prompt, a.new, repeats))
            gb, ceiling = _weights_floor(sides["fsc"].model)
            floors.append(f"{name}: {gb:.3f} GB of weights a token; reading them once alone "
                          f"runs at {ceiling:.1f} tok/s ({gb * ceiling:.1f} GB/s)")
            for side, pairs in got.items():
                pre, gen = [x[0] for x in pairs], [x[1] for x in pairs]
                rows.append({"model": name, "side": side, "same_tokens": same,
                             "prompt_tok_s": statistics.median(pre), "prompt_range": (min(pre), max(pre)),
                             "gen_tok_s": statistics.median(gen), "gen_range": (min(gen), max(gen))})
            del hf_model, sides
    st = Store(store_dir(a.store))
    with st.run("bench", " ".join(["python -m tools.bench_decode", *sys.argv[1:]]),
                vars(a) | {"store": str(st.dir)}, environment=environment("cpu")) as run:
        for r in rows:
            extra = {"model": r["model"], "prompt": a.prompt, "new": a.new,
                     "same_tokens": r["same_tokens"]}
            run.add_bench(f"ar decode prompt {r['model']} {r['side']}", r["prompt_tok_s"], "tok/s", extra)
            run.add_bench(f"ar decode generate {r['model']} {r['side']}", r["gen_tok_s"], "tok/s", extra)
    print("| model | side | prompt tok/s [range] | generation tok/s [range] | fsc / transformers | same tokens |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for r in rows:
        ref = next(x for x in rows if x["model"] == r["model"] and x["side"] == "transformers")
        ratio = (f"{r['prompt_tok_s'] / ref['prompt_tok_s']:.2f}× / {r['gen_tok_s'] / ref['gen_tok_s']:.2f}×"
                 if r["side"] == "fsc" else "")
        print(f"| {r['model']} | {r['side']} | {r['prompt_tok_s']:.1f} [{r['prompt_range'][0]:.1f}–"
              f"{r['prompt_range'][1]:.1f}] | {r['gen_tok_s']:.1f} [{r['gen_range'][0]:.1f}–"
              f"{r['gen_range'][1]:.1f}] | {ratio} | {r['same_tokens']} |")
    print("\n".join(floors))
    print(json.dumps({"run_id": run.run_id, "rows": rows, "weights": floors}))


if __name__ == "__main__":
    main()
