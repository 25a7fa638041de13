"""Requests per second through lm-evaluation-harness (docs/benchmarks.md section 16): fsc's
model `fsc` against the harness's own `hf` backend on the same imported model and requests,
and for a block-diffusion model the Monte Carlo bound read against the folded context against
the same draws recomputing the context. One torch thread, the same requests for every row;
each row is recorded in the store (a run of kind 'bench').

    python -m tools.bench_harness [--docs 40] [--mc 16] [--store DIR]

The AR rows time hf and fsc by turns, --rounds times (the median of each round's median, and
the range over rounds: this machine's speed drifts by about a tenth between rounds).

Requests: multiple-choice loglikelihood requests (a context of 200 characters of the shipped
Shakespeare validation text and 3 continuations of 20 characters each), and rolling
log-likelihoods of 400-character passages; the diffusion rows read contexts of --context
characters (1,000), where recomputing them for every draw is what costs. The AR model is a random-weight Llama
(4 layers, width 128, a character tokenizer) saved by transformers and imported with `fsc
import`; the diffusion model is `quality_hybrid`'s seeded weights at G 8.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import torch

from tools.options import boundary, check_store, command, positive
from tools.timing import median_s

CHARS = [chr(i) for i in range(128)] + ["\ufffd"]


def _char_tokenizer(folder: Path) -> None:
    import transformers
    from tokenizers import Tokenizer, decoders, models

    vocab = {c: i for i, c in enumerate(CHARS)}
    vocab["<s>"], vocab["</s>"] = len(CHARS), len(CHARS) + 1
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.decoder = decoders.Fuse()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>",
                                         eos_token="</s>").save_pretrained(folder)


def _llama(folder: Path) -> Path:
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model("llama", vocab_size=len(CHARS) + 2, hidden_size=128,
                                  intermediate_size=352, num_hidden_layers=4,
                                  num_attention_heads=4, num_key_value_heads=2, dtype="float32")
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    _char_tokenizer(folder)
    return folder


def _text() -> str:
    """The shipped Shakespeare validation text, its characters outside ASCII as spaces."""
    from fsc import corpora

    return "".join(c if ord(c) < 128 else " " for c in corpora.read("shakespeare:val"))


def _longest_context() -> int:
    """The most --context characters whose requests all fit the text: its length less the
    continuations' 60 characters and the 1,000 a document's start ranges over."""
    return len(_text()) - 1060


def _requests(docs: int, context: int = 200):
    """3 multiple-choice requests (`context` characters, 3 continuations of 20) and one
    400-character passage per document, every one whole inside the text."""
    from lm_eval.api.instance import Instance

    text = _text()
    span = max(1000, context + 60)  # a request's characters from its document's start
    ll, rolling = [], []
    for d in range(docs):
        at = 997 * d % (len(text) - span)
        ctx = text[at : at + context]
        for c in range(3):
            lo = at + context + 20 * c
            ll.append(Instance("loglikelihood", {}, (ctx, text[lo : lo + 20]), len(ll)))
        rolling.append(Instance("loglikelihood_rolling", {}, (text[at : at + 400],), d))
    return ll, rolling


def _rate(fn, n: int, repeats: int) -> float:
    """Requests per second: n over the median of `repeats` timed calls, after a warm-up."""
    return n / median_s(fn, repeats, warmup=1)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.bench_harness",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=positive, default=40,
                   help="documents: 3 multiple-choice requests and one passage each (the "
                   "diffusion rows: a quarter as many documents; default 40)")
    p.add_argument("--mc", type=positive, default=16,
                   help="diffusion: Monte Carlo draws per block (default 16)")
    p.add_argument("--batch", type=positive, default=8,
                   help="requests a forward pass, both backends (default 8)")
    p.add_argument("--repeats", type=positive, default=3,
                   help="AR rows: timed calls per round (the median; default 3); the diffusion "
                   "rows time one call")
    p.add_argument("--rounds", type=positive, default=3,
                   help="AR rows: hf and fsc timed by turns this many times (the median of the "
                   "rounds, their range beside it)")
    p.add_argument("--context", type=positive, default=1000,
                   help="diffusion rows: characters of context before each continuation "
                   "(default 1000)")
    p.add_argument("--store", type=Path, default=None,
                   help="the store the run is recorded in (default: FSC_STORE, else ./store)")
    a = p.parse_args(argv)
    if a.context > (most := _longest_context()):
        p.error(f"--context {a.context}: at most {most} characters (the validation text's "
                "length less its continuations and the documents' spread)")
    torch.set_num_threads(1)
    from lm_eval.api.registry import get_model

    from fsc.cli.main import main as fsc
    from fsc.harness.lm import FscLM
    from fsc.provenance import environment

    st = check_store(a.store)
    ll, rolling = _requests(a.docs)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = _llama(Path(tmp) / "llama")
        ckpt = Path(tmp) / "llama-fsc"
        if fsc(["import", str(folder), "--out", str(ckpt), "--store", str(Path(tmp) / "st")]):
            raise SystemExit("fsc import failed")
        hf = get_model("hf")(pretrained=str(folder), device="cpu", batch_size=a.batch,
                             dtype="float32")
        ours = FscLM(str(ckpt), batch_size=a.batch)
        for kind, reqs in (("loglikelihood", ll), ("loglikelihood_rolling", rolling)):
            rates: dict[str, list[float]] = {"hf": [], "fsc": []}
            for _ in range(a.rounds):  # by turns, so that a slow spell of the machine hits both
                for name, lm in (("hf", hf), ("fsc", ours)):
                    rates[name].append(_rate(lambda lm=lm, kind=kind, reqs=reqs:
                                             getattr(lm, kind)(reqs), len(reqs), a.repeats))
            for name, got in rates.items():
                rows.append({"model": "llama 4x128 (imported)", "backend": name,
                             "requests": kind, "n": len(reqs),
                             "requests_per_s": statistics.median(got),
                             "range": f"{min(got):.1f}–{max(got):.1f}"})
        long, _ = _requests(max(1, a.docs // 4), a.context)
        for cached in (True, False):
            lm = FscLM("quality_hybrid", batch_size=a.batch, mc_samples=a.mc, cached=cached)
            rate = _rate(lambda lm=lm: lm.loglikelihood(long), len(long), 1)
            rows.append({"model": f"quality_hybrid (G 8, mc {a.mc}, {a.context}-character "
                                  "contexts)",
                         "backend": "fsc, folded context" if cached else "fsc, context recomputed per draw",
                         "requests": "loglikelihood", "n": len(long), "requests_per_s": rate})
    with st.run("bench", command("bench_harness", argv),
                vars(a) | {"store": str(st.dir)}, environment=environment("cpu")) as run:
        for r in rows:
            run.add_bench(f"harness {r['requests']} {r['backend']}", r["requests_per_s"],
                          "requests/s", {"model": r["model"], "n": r["n"]})
    print("| model | backend | requests | n | requests/s | range over rounds |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['model']} | {r['backend']} | {r['requests']} | {r['n']} | "
              f"{r['requests_per_s']:.1f} | {r.get('range', '')} |")
    print(json.dumps({"run_id": run.run_id, "rows": rows}))


if __name__ == "__main__":
    boundary(main, "python -m tools.bench_harness")
