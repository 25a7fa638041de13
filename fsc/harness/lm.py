"""fsc models inside EleutherAI's lm-evaluation-harness: the model `fsc` (`--model fsc
--model_args pretrained=CKPT,...`), a `TemplateLM` whose three request types run on fsc.

Requests are tokenised as the harness's Hugging Face backend tokenises them (the harness's own
`_encode_pair`, trailing spaces moved to the continuation, an empty context replaced by the
prefix token; a string encoded with the tokenizer's own special tokens unless it already
begins with the prefix token), long inputs are cut from the left at `max_length` as that
backend cuts them (a published model's own length by default, as that backend reads it), and
generation's arguments are read by the harness's own `normalize_gen_kwargs` (one fsc's
decoder cannot apply as transformers' generate would is refused), so an imported model scores
and answers what transformers does.

model_args: pretrained (a checkpoint or training directory, or a recipe: its seeded weights),
mc_samples (diffusion: draws per block, 32; refused for an autoregressive model, whose
likelihoods are exact), seed (0), max_length (`context_length`: a
published model's own, else 2048), steps (diffusion generation: K, default G), cached (true:
the Monte Carlo reads against the folded context; false recomputes it each draw),
max_gen_toks (256); device and batch_size come from the harness's own --device and
--batch_size.
"""

from __future__ import annotations

import inspect
import json
import sys
import zlib
from collections import Counter
from pathlib import Path

import lm_eval.models  # noqa: F401 - the harness's own models first (it loads them only into an empty registry)
import torch
from lm_eval import utils as lm_utils
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import normalize_gen_kwargs

from fsc.decode import DecodeConfig, generate_batch
from fsc.errors import UsageError
from fsc.harness import DEFAULT_MAX_LENGTH, MC_SAMPLES
from fsc.harness.likelihood import ar_batch, diffusion_loglikelihood, fold_prefix
from fsc.jsonsafe import json_object
from fsc.loading import load_model, torch_device
from fsc.seeds import derive
from fsc.source import Source, config_alone, resolve_checkpoint
from fsc.text import first_line
from fsc.tokenizer import GENERATION_FILE, ByteTokenizer, HFTokenizer, IdTokenizer

FLAGS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def _flag(name: str, value) -> bool:
    """`value` (a model_args value: a bool, or its text) as a bool; UsageError (one line) for
    anything else."""
    if isinstance(value, bool):
        return value
    got = FLAGS.get(str(value).strip().lower())
    if got is None:
        raise UsageError(f"{name}={value}: expected true or false")
    return got


MAX_GEN_TOKS = 256  # the tokens a request generates where it names no max_gen_toks (the hf backend's)
HARNESS_ARGS = {"max_batch_size", "trust_remote_code"}  # the harness hands every model these


def _integer(name: str, value, low: int) -> int:
    """`value` (a model_args value or an option's, as text or a number) as an integer of at
    least `low`; UsageError (one line) else."""
    text = str(value).strip()
    if isinstance(value, bool) or not text.lstrip("-").isdigit() or int(text) < low:
        raise UsageError(f"{name}={value}: expected an integer of at least {low}")
    return int(text)


def checked_args(pretrained: str | None = None, batch_size: int | str = 16,
                 mc_samples: int | None = None,
                 seed: int = 0, max_length: int | None = None, steps: int | None = None,
                 cached: bool = True, max_gen_toks: int = MAX_GEN_TOKS, **harness) -> dict:
    """The model's arguments (model_args and the harness's --batch_size) checked, as the model
    reads them: UsageError (one line) for an unknown or missing one, a value of the wrong kind,
    or a checkpoint that is not there. `python -m fsc.harness` checks them before the harness
    indexes its tasks (seconds), the model again when the harness makes it."""
    unknown = sorted(set(harness) - HARNESS_ARGS)
    if unknown:
        ours = [p for p in inspect.signature(checked_args).parameters
                if p not in ("batch_size", "harness")]
        raise UsageError(f"model_args {', '.join(unknown)}: not an argument of the model fsc "
                         f"({', '.join(ours)})")
    if pretrained is None:
        raise UsageError("model_args: pretrained=CKPT is required (a checkpoint or training "
                         "directory, or a recipe)")
    if str(pretrained).startswith("hf:"):  # not seeded weights under a published model's name
        raise UsageError(f"model_args pretrained: the harness would score seeded random "
                         f"weights: {config_alone(str(pretrained))}")
    got = {"mc": None if mc_samples is None else _integer("model_args mc_samples", mc_samples, 1),
            "seed": _integer("model_args seed", seed, 0),
            "max_length": (None if max_length is None
                           else _integer("model_args max_length", max_length, 2)),
            "max_gen_toks": _integer("model_args max_gen_toks", max_gen_toks, 1),
            "steps": None if steps is None else _integer("model_args steps", steps, 1),
            "batch_size": (16 if str(batch_size).startswith("auto")
                           else _integer("--batch_size", batch_size, 1)),
            "cached": _flag("model_args cached", cached)}
    source = str(resolve_checkpoint(str(pretrained)))
    if got["mc"] is not None and Source.read(source).recipe.block_size == 1:
        raise UsageError(f"model_args mc_samples={mc_samples}: {pretrained} is autoregressive "
                         "(G 1): its likelihoods are exact, drawn by no Monte Carlo")
    return got | {"source": source}


def generation_steps(steps: int | None, G: int, source: str,
                     option: str = "model_args steps=") -> int:
    """K of generation for a model of block size G: `steps`, else G. UsageError, naming steps
    as the user gave it (`option`: `model_args steps=`, or `--steps ` of `fsc eval`), for steps
    on an autoregressive model (G 1) or outside 1..G."""
    if steps is None:
        return G
    if G == 1:
        raise UsageError(f"{option}{steps}: {source} is autoregressive (G 1): it generates with "
                         "no denoising steps")
    if not 1 <= steps <= G:
        raise UsageError(f"{option}{steps} must be between 1 and G = {G} (each step reveals at "
                         "least one of the block's G positions)")
    return steps


MORE_LENGTH = "--max-length N (model_args max_length=N) reads more"


def context_length(src: Source) -> int:
    """max_length where model_args gives none. A published model (an import source, or a
    checkpoint `fsc import` wrote): the length the harness's hf backend reads off it
    (`fsc.imports.published_length`), as the checkpoint recorded it, or (a checkpoint
    older than that record) read off the published model where it is at hand; 2048 where
    none says, and for every model fsc trains."""
    length = src.published_length()
    return DEFAULT_MAX_LENGTH if length is None else length


# What transformers' generate decodes with where neither the request nor the model's
# generation_config.json names a value (its GenerationConfig defaults): the hf backend's top_k 50
# (where it samples), no min_p cut, no repetition penalty.
HF_SAMPLING = {"top_k": 50, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0}
# What transformers' generate would apply that fsc's decoder does not, at the value that applies
# nothing (None applies nothing too); SAMPLING_ONLY ones only where it samples.
NOT_APPLIED = {"typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "top_h": None,
               "no_repeat_ngram_size": 0, "min_length": 0,
               "min_new_tokens": 0, "bad_words_ids": None, "suppress_tokens": None,
               "begin_suppress_tokens": None, "sequence_bias": None, "num_beams": 1,
               "num_beam_groups": 1, "diversity_penalty": 0.0, "num_return_sequences": 1,
               "guidance_scale": 1.0, "forced_bos_token_id": None, "forced_eos_token_id": None,
               "exponential_decay_length_penalty": None}
SAMPLING_ONLY = ("typical_p", "epsilon_cutoff", "eta_cutoff", "top_h")
READ = {"until", "max_gen_toks", "do_sample", "temperature", "top_k", "top_p", "min_p",
        "repetition_penalty"}
# What changes no answer of transformers' generate on a decoder-only model without beams: its
# outputs' form and cache, beam search's own settings, the encoder's penalties
NO_EFFECT = {"use_cache", "output_scores", "output_logits", "output_attentions",
             "output_hidden_states", "return_dict_in_generate", "renormalize_logits",
             "cache_implementation", "length_penalty", "early_stopping",
             "encoder_repetition_penalty", "encoder_no_repeat_ngram_size"}


def generation_defaults(folder: Path | None) -> dict:
    """The generation arguments a request takes where it names none, as the hf backend's
    transformers takes them: the model's generation_config.json (beside its tokenizer), else
    transformers' own (`HF_SAMPLING`). `NOT_APPLIED` arguments it sets to a value that applies
    something are kept too, to be said."""
    config = json_object(folder / GENERATION_FILE) if folder is not None else {}
    got = {k: v if config.get(k) is None else config[k] for k, v in HF_SAMPLING.items()}
    return got | {k: config[k] for k in NOT_APPLIED if config.get(k) not in (None, NOT_APPLIED[k])}


def unapplied(args: dict, sample: bool) -> list[tuple[str, object]]:
    """(name, value) of each generation argument of `args` that would change transformers'
    answer and that fsc's decoder does not apply (a name transformers does not know
    included: its generate refuses it)."""
    return [(name, value) for name, value in args.items()
            if not (name in READ or name in NO_EFFECT or value is None
                    or value == NOT_APPLIED.get(name, object())
                    or (name in SAMPLING_ONLY and not sample))]


def samples(kwargs: dict) -> bool:
    """Whether a request (its arguments as `normalize_gen_kwargs` gives them) samples:
    `do_sample` at a temperature above 0."""
    return bool(kwargs["do_sample"]) and float(kwargs.get("temperature", 0.0)) > 0


# The values a request's arguments that fsc applies may take (None: the model's own, for all
# but max_gen_toks): (an integer, what is allowed, in words), as transformers checks them (the
# first four only where do_sample is true: it reads them only then)
SAMPLING = ("temperature", "top_k", "top_p", "min_p")
LIMITS = {"max_gen_toks": (True, lambda v: v >= 1, "an integer of at least 1"),
          "temperature": (False, lambda v: v >= 0, "a number of at least 0"),
          "top_k": (True, lambda v: v >= 0, "an integer of at least 0 (0: every token)"),
          "top_p": (False, lambda v: 0 < v <= 1, "a number in (0, 1]"),
          "min_p": (False, lambda v: 0 <= v <= 1, "a number in [0, 1] (0: every token)"),
          "repetition_penalty": (False, lambda v: v > 0, "a number above 0 (1: none)")}


def read_generation(args: dict | None, max_gen_toks: int, max_length: int | None,
                    who: str | None, drop: str = "the task's generation_kwargs",
                    sample: bool | None = None) -> dict:
    """A request's generation arguments (`args`, of `who`: a task, or --gen_kwargs) as the hf
    backend reads them (`normalize_gen_kwargs`, `max_gen_toks` its default), checked before
    the model is asked: UsageError for a value of the wrong kind or range, a max_gen_toks
    that leaves no room for the context in `max_length` (the hf backend refuses it too), and
    for a stop sequence that is not text or is empty, and for an argument
    fsc's decoder does not apply where transformers' generate would (its answers would not be
    the hf model's; those of sampling only where it samples, or `sample` says so; `drop`:
    where the user takes it away)."""
    who = who or "a request"
    try:
        kwargs = normalize_gen_kwargs(dict(args or {}), max_gen_toks)
    except (TypeError, ValueError) as e:  # max_gen_toks or temperature that is no number
        raise UsageError(f"generate_until: {who} asks for a max_gen_toks or temperature that "
                         f"is no number ({first_line(e)})") from None
    odd = [u for u in kwargs["until"] if not isinstance(u, str) or not u]
    if odd:  # the hf model fails on one that is not text, and stops after a token on ''
        raise UsageError(f"generate_until: {who} asks for until {odd[0]!r}: expected stop "
                         "sequences, each a text that is not empty")
    if not isinstance(kwargs["do_sample"], bool):
        raise UsageError(f"generate_until: {who} asks for do_sample {kwargs['do_sample']!r}: "
                         "expected true or false")
    for name, (integer, allowed, what) in LIMITS.items():
        value = kwargs.get(name) if kwargs["do_sample"] or name not in SAMPLING else None
        number = isinstance(value, int if integer else (int, float)) and not isinstance(value, bool)
        if value is not None and not (number and allowed(value)):
            raise UsageError(f"generate_until: {who} asks for {name} {value!r}: expected {what}")
    if max_length is not None and kwargs["max_gen_toks"] >= max_length:
        raise UsageError(f"generate_until: max_gen_toks {kwargs['max_gen_toks']} leaves no room "
                         f"for the context in max_length {max_length}; {MORE_LENGTH}")
    refused = unapplied(kwargs, samples(kwargs) if sample is None else sample)
    if refused:
        name, value = refused[0]
        raise UsageError(f"generate_until: {who} asks for {name} {value}, which fsc's decoder "
                         f"does not apply (it applies {', '.join(sorted(READ))}); drop it from "
                         f"{drop}")
    return kwargs


def not_applied(asked: dict, sample: bool, model: dict) -> list[str]:
    """The arguments of a request (`asked`: the model's defaults, then its own) that
    transformers would apply and fsc's decoder does not, as `name value (where it comes
    from)`."""
    return [f"{name} {value} (" + ("the model's generation_config.json" if model.get(name) == value
                                   else "the request") + ")"
            for name, value in unapplied(asked, sample)]


def generation_seed(seed: int, request: str, seen: int) -> int:
    """The seed of a generate_until request's draws: `seed`, the request (its context and
    normalised arguments, as text) and how many identical requests came before it, so that a task's
    repeats (`repeats: N`, each document's request asked N times) draw N different answers,
    and a request draws the same whatever else is asked with it."""
    return derive(seed, zlib.crc32(request.encode()), seen)


@register_model("fsc")
class FscLM(TemplateLM):
    """An fsc checkpoint as a harness model: exact log-probabilities at G = 1, the masked-
    diffusion bound (by Monte Carlo over masks) at G > 1 (fsc.harness.likelihood)."""

    def __init__(self, pretrained: str | None = None, device: str = "cpu", **args) -> None:
        super().__init__()
        got = checked_args(pretrained, **args)  # (see `checked_args` for the arguments)
        self.mc = MC_SAMPLES if got["mc"] is None else got["mc"]
        self.seed, self.batch_size = got["seed"], got["batch_size"]
        self.max_gen_toks = got["max_gen_toks"]
        steps, source = got["steps"], got["source"]
        asked = str(device)  # the harness's default is cuda:0: without CUDA, the CPU
        no_cuda = asked.startswith("cuda") and not torch.cuda.is_available()
        device = torch_device("cpu" if no_cuda else asked)
        src = Source.read(source)
        self._max_length = got["max_length"] or context_length(src)
        _, self.model = load_model(src, device=device, seed=self.seed)
        if no_cuda:
            print(f"note: --device {asked}: no CUDA device is available; running on the CPU "
                  "(as the harness's hf model does)", file=sys.stderr)
        self.model.eval()
        self.G = self.model.recipe.block_size
        self.mode = "ar" if self.G == 1 else "diffusion"
        self.tok = src.tokenizer(need_mask=self.mode == "diffusion")
        if isinstance(self.tok, IdTokenizer):
            raise UsageError(f"{pretrained}: no tokenizer.json beside the model; the harness "
                             "reads text")
        self.bos = src.starts_with_bos(self.tok)  # an imported model: as its tokenizer begins a text
        bos, self._eot = self.tok.bos_id, self.tok.eos_id
        if isinstance(self.tok, ByteTokenizer) and not self.bos:
            bos = None  # a model trained without BOS begins from EOS, as the harness does then
        self._prefix = bos if bos is not None else self._eot
        if self._prefix is None:
            raise UsageError(f"{pretrained}: its tokenizer names no BOS or EOS token, which the "
                             "harness needs to begin an empty context")
        self._device = torch.device(device)
        self.steps = generation_steps(steps, self.G, pretrained)
        self.cached = got["cached"]
        self.asked = False  # whether the harness has asked the model for anything yet
        self.generation = generation_defaults(getattr(self.tok, "folder", None))
        self.noted: set[str] = set()  # what generate_until has said it does not apply
        # where its notes go: stderr as it was when the model was made (`fsc eval` quiets the
        # harness's own stderr while the harness runs, and would swallow them)
        self.stderr = sys.stderr

    # ---- what the harness reads ------------------------------------------------------------
    @property
    def eot_token_id(self) -> int:
        return self._eot if self._eot is not None else self._prefix

    @property
    def prefix_token_id(self) -> int:
        return self._prefix

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def tokenizer_name(self) -> str:
        return self.tok.name

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **_) -> list[int]:
        if not isinstance(self.tok, HFTokenizer):
            return self.tok.encode(string)
        # as the hf backend encodes: the tokenizer's own special tokens where the model's
        # sequences begin with them, unless the string already begins with the prefix token
        flag = self.bos if add_special_tokens is None else add_special_tokens
        if add_special_tokens is None and string.startswith(self.tok.token_text(self._prefix)):
            flag = False
        return self.tok.tok.encode(string, add_special_tokens=flag).ids

    def tok_decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids)

    def apply_chat_template(self, chat_history, add_generation_prompt: bool = True) -> str:
        raise UsageError("--apply_chat_template: the model fsc reads plain prompts; it applies "
                         "no chat template")

    def _say_cut(self, kind: str, cut: int, of: int, to: str) -> None:
        """Say on stderr that `cut` of `of` requests lost the start of their context (cut from
        the left, as the hf backend cuts them, to `to`)."""
        if cut:
            print(f"note: {kind}: {cut} of {of} contexts were cut from the left to {to}; "
                  f"{MORE_LENGTH}", file=self.stderr)

    # ---- scoring ----------------------------------------------------------------------------
    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, rolling: bool = False,
                              **_) -> list[tuple[float, bool]]:
        """(summed log-probability or its bound, greedy) of each (key, context ids,
        continuation ids). UsageError, before the model is asked, for a continuation longer
        than max_length (the hf backend fails on it); a context cut from the left to fit is
        said once (not a rolling text's windows, cut as the hf backend cuts them)."""
        longest = max((len(r[2]) for r in requests), default=0)
        if longest > self._max_length:
            raise UsageError(f"loglikelihood: a continuation of {longest} tokens is longer than "
                             f"max_length {self._max_length}; {MORE_LENGTH}")
        fits = self._max_length + (1 if self.mode == "ar" else 0)  # (AR reads all but the last)
        if not rolling:
            self._say_cut("loglikelihood", sum(len(r[1]) + len(r[2]) > fits for r in requests),
                          len(requests), f"max_length {self._max_length} tokens")
        self.asked = True
        out: dict[int, tuple[float, bool]] = {}
        if self.mode == "ar":  # longest first, as the hf backend batches them
            order = sorted(range(len(requests)),
                           key=lambda i: (-len(requests[i][1]) - len(requests[i][2]),
                                          tuple(requests[i][1])))
            for lo in range(0, len(order), self.batch_size):
                chunk = order[lo : lo + self.batch_size]
                batch = []
                for i in chunk:
                    _, ctx, cont = requests[i]
                    batch.append(((ctx + cont)[-(self._max_length + 1) :][:-1], cont))
                out.update(zip(chunk, ar_batch(self.model, batch, self._device)))
            return [out[i] for i in range(len(requests))]
        # by context, so that requests sharing one (a question's choices) fold it once
        capacity = min(max(len(r[1]) + len(r[2]) for r in requests), self._max_length) + self.G
        prefix_key, prefix = None, None
        for i in sorted(range(len(requests)), key=lambda i: tuple(requests[i][1])):
            _, ctx, cont = requests[i]
            ids = (ctx + cont)[-self._max_length :]
            start = len(ids) - len(cont)
            whole = ids[: start // self.G * self.G]
            if self.cached and prefix_key != tuple(whole):
                prefix_key = tuple(whole)
                prefix = fold_prefix(self.model, whole, capacity, self._device)
            out[i] = diffusion_loglikelihood(self.model, self.tok.mask_id, ids, start, self.mc,
                                             self._device, self.seed, self.cached, prefix)
        return [out[i] for i in range(len(requests))]

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """A whole text's log-likelihood: disjoint windows of max_length tokens, the first
        after the prefix token, as the harness's Hugging Face backend splits it."""
        windows, owner = [], []
        for n, (string,) in enumerate(req.args for req in requests):
            for w in map(lm_utils.make_disjoint_window, lm_utils.get_rolling_token_windows(
                    token_list=self.tok_encode(string), prefix_token=self.prefix_token_id,
                    max_seq_len=self.max_length, context_len=1)):
                windows.append((None, *w))
                owner.append(n)
        scored = self._loglikelihood_tokens(windows, rolling=True)
        totals = [0.0] * len(requests)
        for n, (logp, _) in zip(owner, scored):
            totals[n] += logp
        return totals

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """fsc's decoder (autoregressive, or block diffusion at K = steps), its arguments read
        as the harness's hf backend reads them (`normalize_gen_kwargs`: `max_gen_toks` or an
        alias of it, sampled at `temperature`, `top_k`, `top_p` and `min_p` where `do_sample` or a
        temperature asks, else greedy; top_k, top_p, min_p and repetition_penalty (greedy too) the model's
        generation_config.json's where the request names none, else transformers' own:
        `generation_defaults`); cut at EOS and the first stop sequence. What transformers would
        apply and fsc does not is refused where a request asks for it (`read_generation`,
        before the model is asked), said once where the model's generation_config.json does.
        Each sampled request draws from a seed of its own (`generation_seed`). Requests that
        ask for the same decoding are decoded together (fsc.decode.generate_batch: each as it
        decodes alone)."""
        normalized = [read_generation(req.args[1], self.max_gen_toks, self._max_length,
                                      req.task_name and f"task {req.task_name}")
                      for req in requests]
        eos = self.tok.token_text(self.eot_token_id) if isinstance(self.tok, HFTokenizer) else ""
        self.asked = True
        asks, groups, seen, cut = [], {}, Counter(), Counter()
        for i, (req, kwargs) in enumerate(zip(requests, normalized, strict=True)):
            context = req.args[0]
            # the hf backend's stop sequences: the request's, and the EOS token's text
            until = list(kwargs["until"])  # text, not empty: read_generation
            until += [eos] if eos and eos not in until else []
            n = kwargs["max_gen_toks"]
            sample = samples(kwargs)  # do_sample at temperature 0: greedy
            temperature = float(kwargs["temperature"]) if sample else 0.0
            asked = self.generation | kwargs  # transformers: the request over the model's own
            top_p = float(1.0 if asked["top_p"] is None else asked["top_p"]) if sample else 1.0
            top_k = int(asked["top_k"] or 0) if sample else 0
            min_p = float(asked["min_p"] or 0.0) if sample else 0.0
            penalty = float(1.0 if asked["repetition_penalty"] is None
                            else asked["repetition_penalty"])  # greedy too, as transformers
            for said in not_applied(asked, sample, self.generation):
                if said not in self.noted:
                    self.noted.add(said)
                    print(f"note: generate_until: {said} is not applied by fsc's decoder; its "
                          "answers can differ from the hf model's", file=self.stderr)
            whole = self.tok_encode(context)
            ids = whole[-(self._max_length - n) :] or [self._prefix]
            if len(whole) > len(ids):
                cut[n] += 1
            key = json.dumps([context, kwargs], sort_keys=True, default=str)
            asks.append((ids, until, generation_seed(self.seed, key, seen[key])))
            seen[key] += 1
            groups.setdefault((n, temperature, top_p, top_k, min_p, penalty), []).append(i)
        room = f"max_length {self._max_length} less " + (
            f"max_gen_toks {next(iter(cut))}" if len(cut) == 1 else "each one's max_gen_toks")
        self._say_cut("generate_until", cut.total(), len(requests), room)
        tokens: dict[int, list[int]] = {}
        for (n, temperature, top_p, top_k, min_p, penalty), rows in groups.items():
            cfg = DecodeConfig(length=n, G=self.G, steps=self.steps, mode=self.mode,
                               temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                               repetition_penalty=penalty, seed=self.seed)
            done = generate_batch(self.model, self.tok, [asks[i][0] for i in rows], cfg,
                                  self._device, [asks[i][2] for i in rows],
                                  batch=self.batch_size)
            tokens.update({i: res.token_ids for i, res in zip(rows, done, strict=True)})
        out = []
        for i, (_, until, _) in enumerate(asks):
            made = tokens[i]
            if self._eot in made:
                made = made[: made.index(self._eot)]
            text = self.tok.decode(made)
            for stop in until:
                if stop in text:
                    text = text[: text.index(stop)]
            out.append(text)
        return out
