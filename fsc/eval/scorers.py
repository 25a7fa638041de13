"""Scorers: the autoregressive language models that judge generated text (`--scorer`).

A scorer reads a context and a continuation and gives the continuation's summed next-token
NLL (nats) and its token count, in its own tokenization. Two adapters:

- `FscScorer`: an fsc checkpoint (or recipe) decoded autoregressively: one trained with
  `fsc train --objective ar`, or a model imported with `fsc import` (G = 1). A block-diffusion
  checkpoint is refused: its bound is not a next-token likelihood.
- `TransformersScorer`: a transformers causal LM directory or Hub id (the convention of MDLM
  and BD3-LM, which score with GPT-2 Large), when transformers is installed.

When the scorer's tokenizer is not the generator's, the text is decoded and retokenized by
the scorer (context and continuation apart, so the boundary stays where it was).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import torch

from fsc.errors import FscError, UsageError
from fsc.hub.reach import looks_local, quiet, unreachable
from fsc.loading import load_model
from fsc.source import Source, is_checkpoint, load_source_recipe, resolve_checkpoint
from fsc.text import first_line
from fsc.tokenizer import ByteTokenizer, check_vocab


def same_tokenizer(a, b) -> bool:
    """Whether ids of tokenizer `a` mean the same text under `b` (so no retokenizing)."""
    if isinstance(a, ByteTokenizer) or isinstance(b, ByteTokenizer):
        return isinstance(a, ByteTokenizer) and isinstance(b, ByteTokenizer)
    return a.name == b.name and a.vocab_size == b.vocab_size


@torch.no_grad()
def continuation_nll(scorer, context: list[int], continuation: list[int]) -> float:
    """Summed NLL (nats, float64) of `continuation` after `context` (at least one id) under
    `scorer.logits`. Text longer than the scorer reads (`scorer.window` positions) is read as
    BD3-LM reads it: windows of that size starting every half window, the first scoring all
    it holds, each later one the tokens past the one before (each after half a window)."""
    ids = context + continuation
    window = max(getattr(scorer, "window", None) or len(ids), 2)
    stride, start, first, total = window // 2, 0, 1, 0.0
    while first < len(ids):
        end = min(start + window, len(ids))
        lo = max(first, len(context))  # the context is read, never scored
        if lo < end:
            logits = scorer.logits(ids[start:end])[lo - start - 1 : end - start - 1]
            logp = torch.log_softmax(logits.double(), dim=-1)
            target = torch.tensor(ids[lo:end], device=logp.device)
            total -= float(logp.gather(-1, target[:, None]).sum())
        first, start = start + window, start + stride
    return total


def _last_window(ids: list[int], window: int | None, device) -> torch.Tensor:
    """[1, n] the last `window` ids (all of them without a window): what a scorer reads to
    feature a text (MAUVE)."""
    return torch.tensor([ids[-window:] if window else ids], dtype=torch.long, device=device)


class FscScorer:
    """An fsc model at G = 1: the NLL of each continuation token given everything before it,
    from one block-causal forward with blocks of one token."""

    def __init__(self, spec: str, device, seed: int = 0):
        src = Source.read(spec)
        source, recipe = src.ref, src.recipe
        _autoregressive(spec, recipe)
        self.tokenizer = src.tokenizer(need_mask=False)  # its own, as decode's
        try:
            check_vocab(self.tokenizer, recipe)
        except UsageError as e:
            raise UsageError(f"--scorer {spec}: {e}") from None
        _, self.model = load_model(src, device=device, seed=seed)
        self.model.eval()
        self.device = device
        self.window = scorer_window(src)
        self.name = f"{recipe.name} ({source})" if src.is_checkpoint else recipe.name
        self.bos = src.starts_with_bos(self.tokenizer)

    def logits(self, ids: list[int]) -> torch.Tensor:
        """Next-token logits [len(ids), V] at every position."""
        x = torch.tensor([ids], dtype=torch.long, device=self.device)
        return self.model.forward_blockwise(x, [1] * len(ids))[0]

    def nll(self, context: list[int], continuation: list[int]) -> float:
        return continuation_nll(self, context, continuation)

    @torch.no_grad()
    def hidden(self, ids: list[int]) -> torch.Tensor:
        """The final hidden state [d_model] after the last `window` of `ids` (MAUVE's
        features)."""
        x = _last_window(ids, self.window, self.device)
        seen = []
        hook = self.model.norm_f.register_forward_hook(lambda _m, _i, out: seen.append(out))
        try:
            self.model.forward_blockwise(x, [1] * x.shape[1])
        finally:
            hook.remove()
        return seen[0][0, -1].double().cpu()


def scorer_window(src: Source) -> int | None:
    """The positions an fsc scorer learned to read, past which text is read in windows
    (`continuation_nll`): a published model's own length (`Source.published_length`), else
    the length fsc trained it at (a 128-token scorer read 192 at a mean NLL of 1.70 nats
    against 1.55 at 128); None where neither says (a recipe's seeded weights)."""
    if src.published:
        return src.published_length()
    length = src.training.get("seq_len")
    return length if isinstance(length, int) and length >= 2 else None


class TransformersScorer:
    """A transformers causal LM (a local directory, or a Hub id where the Hub is reachable)."""

    def __init__(self, spec: str, device, seed: int = 0):
        transformers = _transformers(spec, "not an fsc checkpoint or recipe, and a")
        transformers.logging.set_verbosity_error()  # its notes and progress bars: not ours
        transformers.logging.disable_progress_bar()
        try:
            self.hf_tok = transformers.AutoTokenizer.from_pretrained(spec)
            self.model = transformers.AutoModelForCausalLM.from_pretrained(
                spec, dtype=torch.float32).to(device).eval()
        except Exception as e:  # noqa: BLE001 - transformers raises many kinds
            first = first_line(e) or type(e).__name__
            raise UsageError(f"--scorer {spec}: cannot load a transformers causal LM "
                             f"({first[:200]})") from None
        self.tokenizer = _HFText(self.hf_tok)
        self.device = device
        # the positions it reads (GPT-2's n_positions, 1024): longer text is read in windows
        self.window = getattr(getattr(self.model, "config", None), "max_position_embeddings",
                              None)
        self.name = spec
        self.bos = False  # the tokenizer's own special tokens begin a context (encode_context)

    def logits(self, ids: list[int]) -> torch.Tensor:
        x = torch.tensor([ids], dtype=torch.long, device=self.device)
        return self.model(input_ids=x).logits[0]

    def nll(self, context: list[int], continuation: list[int]) -> float:
        return continuation_nll(self, context, continuation)

    @torch.no_grad()
    def hidden(self, ids: list[int]) -> torch.Tensor:
        """The final hidden state [d_model] after the last `window` of `ids` (MAUVE's features)."""
        x = _last_window(ids, self.window, self.device)
        out = self.model(input_ids=x, output_hidden_states=True)
        return out.hidden_states[-1][0, -1].double().cpu()


class _HFText:
    """A transformers tokenizer seen as fsc sees tokenizers (encode, decode, BOS)."""

    def __init__(self, tok):
        self.tok = tok
        self.name = getattr(tok, "name_or_path", "transformers")
        self.vocab_size = len(tok)
        self.bos_id = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False)

    def encode_context(self, text: str) -> list[int]:
        """A context as the model's tokenizer begins one (BOS where it adds one)."""
        return self.tok.encode(text, add_special_tokens=True)

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids)


def check_scorer(spec: str) -> str:
    """'fsc' or 'transformers': what kind of scorer `spec` is, checked without loading its
    weights; UsageError (one line) for one that is missing, neither kind, or not
    autoregressive."""
    if not spec.strip():
        raise UsageError("--scorer: an empty name: give an autoregressive fsc checkpoint or "
                         "recipe, or a transformers model")
    source = resolve_checkpoint(spec)
    path = Path(spec)
    if not is_checkpoint(source) and path.is_dir() and (path / "config.json").is_file():
        if importlib.util.find_spec("transformers") is None:
            raise UsageError(f"--scorer {spec}: a transformers model needs transformers "
                             "(pip install 'fsc[hf]'), or import it first with fsc import")
        return "transformers"
    if is_checkpoint(source) or _is_recipe(spec):
        _autoregressive(spec, load_source_recipe(str(source)))
        return "fsc"
    if looks_local(spec) or not re.fullmatch(r"[\w.-]+/[\w.-]+", spec):  # never the Hub's
        raise UsageError(f"--scorer {spec}: " + (
            "no fsc checkpoint, recipe or transformers model directory there" if path.exists()
            else "no such file or directory"))
    _hub_config(spec)  # a Hub id: its config, where the Hub (or its cache) has it
    return "transformers"


def _hub_config(spec: str) -> None:
    """UsageError (one line, at once) unless the Hub, or offline the local cache, has the
    config of Hub id `spec`; the client's retries are not shown."""
    transformers = _transformers(spec, "a")
    offline = unreachable()
    try:
        with quiet():
            transformers.AutoConfig.from_pretrained(spec, local_files_only=offline is not None)
    except Exception as e:  # noqa: BLE001 - transformers and the Hub client raise many kinds
        if offline is not None:
            raise UsageError(f"--scorer {spec}: not a local path, and not in the Hugging Face "
                             f"cache; the Hub is out of reach ({offline})") from None
        first = first_line(e) or type(e).__name__
        raise UsageError(f"--scorer {spec}: cannot read its config from the Hub ({first[:160]})"
                         ) from None


def _autoregressive(spec: str, recipe) -> None:
    if recipe.block_size != 1:
        raise UsageError(f"--scorer {spec}: a block-diffusion model (G = "
                         f"{recipe.block_size}); a scorer must be autoregressive (trained "
                         "with --objective ar, or imported with fsc import)")


def _transformers(spec: str, what: str):
    """The transformers module, or UsageError: `--scorer SPEC: WHAT transformers model needs
    transformers`."""
    try:
        return importlib.import_module("transformers")
    except ImportError:
        raise UsageError(f"--scorer {spec}: {what} transformers model needs transformers "
                         "(pip install 'fsc[hf]')") from None


def load_scorer(spec: str, device, seed: int = 0):
    """The scorer `spec` names (see check_scorer), loaded."""
    if check_scorer(spec) == "fsc":
        return FscScorer(spec, device, seed)
    return TransformersScorer(spec, device, seed)


def _is_recipe(spec: str) -> bool:
    """A recipe file (its errors are reported as they are) or a shipped recipe's name."""
    if Path(spec).suffix in (".yaml", ".yml") and Path(spec).is_file():
        return True
    try:
        load_source_recipe(spec)
    except (FscError, OSError):
        return False
    return True


class ScoredText:
    """A generator's ids mapped into a scorer's tokens: ids directly when the tokenizers
    agree, else the decoded text retokenized (context and continuation apart)."""

    def __init__(self, scorer, generator_tokenizer):
        self.scorer = scorer
        self.direct = same_tokenizer(generator_tokenizer, scorer.tokenizer)
        self.gen_tok = generator_tokenizer

    def roundtrip(self, text: str) -> str:
        """`text` encoded and decoded by the scorer's tokenizer (`text` itself where it
        carries it)."""
        tok = self.scorer.tokenizer
        return tok.decode(tok.encode(text))

    def carries(self, ids: list[int]) -> bool:
        """Whether the scorer reads the text of `ids` whole (its tokenizer gives it back)."""
        if self.direct:
            return True
        text = self.gen_tok.decode(ids)
        return self.roundtrip(text) == text

    def ids(self, ids: list[int]) -> list[int]:
        return ids if self.direct else self.scorer.tokenizer.encode(self.gen_tok.decode(ids))

    def context(self, prompt: list[int]) -> list[int]:
        """The scorer's context for a prompt: its tokens (as a transformers tokenizer begins a
        text, its special tokens included), after BOS when the prompt is empty or the fsc
        scorer was trained with BOS."""
        tok = self.scorer.tokenizer
        if not self.direct and hasattr(tok, "encode_context"):
            ctx = tok.encode_context(self.gen_tok.decode(prompt))
        else:
            ctx = self.ids(prompt)
        bos = getattr(tok, "bos_id", None)
        if (not ctx or self.scorer.bos) and bos is not None:
            ctx = [bos] + ctx
        if not ctx:
            raise UsageError(f"--scorer {self.scorer.name}: an empty prompt needs a BOS token, "
                             "which its tokenizer lacks; give --prompt-length")
        return ctx

    def nll(self, prompt: list[int], sample: list[int]) -> tuple[float, int]:
        """(summed NLL in nats, tokens) of `sample` after `prompt`, in the scorer's tokens."""
        cont = self.ids(sample)
        if not cont:
            return 0.0, 0
        return self.scorer.nll(self.context(prompt), cont), len(cont)
