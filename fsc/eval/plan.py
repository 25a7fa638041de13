"""The grid an eval request asks of a checkpoint (fsc.eval.grid), filled in from what its
training recorded (the task, mode, tokenizer, needle digits, suite knobs and lengths a request
leaves open) and checked before any model is loaded: a request that cannot be scored is one
line. Running it is fsc.scale.evaluation's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fsc.blocks import POLICIES, block_setting, check_temperature
from fsc.data.files import FIELD_SUFFIXES
from fsc.data.ruler import RulerOptions
from fsc.data.sources import KNOBS, DataOptions, check_read
from fsc.data.tasks import TooShort
from fsc.errors import FscError, UsageError
from fsc.eval.export import write_tasks
from fsc.eval.grid import DEFAULT_DEPTHS, Decoding, EvalGrid, EvalSettings, GenSettings
from fsc.eval.mauve import available as mauve_available
from fsc.eval.request import (
    DEFAULT_PAIRS,
    GENPPL_DEFAULTS,
    SAMPLING,
    SUITE_OPTIONS,
    EvalRequest,
    block_warning,
    checked,
    mode_warning,
    trained_on_warning,
    trained_text,
    untrained_warning,
)
from fsc.eval.scorers import check_scorer
from fsc.eval.tasks import check
from fsc.recipe import Recipe, parse_changes
from fsc.source import (
    Source,
    checkpoint_config,
    is_checkpoint,
    load_source_recipe,
    resolve_checkpoint,
)
from fsc.text import printable
from fsc.tokenizer import IdTokenizer, check_vocab

LENGTH_MULTIPLES = (1, 2, 4, 8, 16)  # default lengths: these times the training length
UNKNOWN_TRAIN_LENGTH = 256  # what the default lengths multiply when training recorded none
GENPPL_LENGTH = 128  # genppl: tokens per sample unless --lengths says
# the tasks whose prompts hold a pass key, which --needle-digits sizes (loss: on passkey data)
DIGITS_READ_BY = ("niah", "ruler", "loss")


def grid_of(request: EvalRequest) -> tuple[EvalGrid, Recipe, object]:
    """(grid, recipe, tokenizer): the grid `request` asks for, with what training recorded
    filling in the mode, tokenizer, needle digits, suite knobs and lengths it leaves open, and
    its warnings (genppl's scorer, a G or a mode the checkpoint never learned); UsageError for
    one that cannot be scored."""
    src = Source.read(request.source)
    source, recipe = src.ref, src.recipe.changed(parse_changes(request.changes))
    trained = src.training  # what `fsc train` recorded
    asked_task = request.task
    request = checked(request, trained)  # the task filled in, the options it takes checked
    mode = request.mode
    if mode is None and trained.get("objective") is not None:
        mode = "ar" if trained["objective"] == "ar" else "diffusion"
    depths = request.depths or DEFAULT_DEPTHS
    pairs = request.pairs or ((trained["pairs"],) if isinstance(trained.get("pairs"), int)
                              else DEFAULT_PAIRS)  # mqar's: as trained, unless --pairs says
    one_k = request.steps[0] if request.steps and request.task != "genppl" else None
    mode, G, K = block_setting(mode, None, one_k, recipe.block_size)
    tok = src.tokenizer(request.tokenizer, need_mask=mode != "ar")
    if isinstance(tok, IdTokenizer):
        raise UsageError(f"{request.source}: no tokenizer.json beside the model, and fsc eval "
                         "reads text: give --tokenizer")
    tok_spec = request.tokenizer if request.tokenizer is not None else src.text_tokenizer()
    check_vocab(tok, recipe)
    if request.needle_digits is not None and request.resume is None and \
            request.task not in DIGITS_READ_BY:
        raise UsageError(f"--needle-digits: for --task {', '.join(DIGITS_READ_BY[:-1])} or "
                         f"{DIGITS_READ_BY[-1]} only (this is {request.task})")
    digits = request.needle_digits or trained.get("needle_digits")  # None: the default for G
    train_len = trained.get("seq_len")
    lengths = request.lengths
    if lengths is None:
        base = train_len or UNKNOWN_TRAIN_LENGTH
        lengths = {"loss": (base,), "genppl": (GENPPL_LENGTH,)}.get(
            request.task, tuple(base * m for m in LENGTH_MULTIPLES))
    if request.task == "genppl" and (request.ngram or 0) >= (longest := max(lengths)):
        raise UsageError(f"--ngram {request.ngram}: a sample of --lengths {longest} holds no "
                         f"two {request.ngram}-grams, so none repeats; give "
                         + (f"at most --ngram {longest - 1}" if longest > 1 else "longer --lengths"))
    data = request.data if request.data is not None else trained_text(request, trained)
    if request.task == "loss" and request.resume is None and data is not None:
        # the task options the data reads, as fsc train checks them (text reads none)
        check_read(data, [k for k in ("needle_digits", "pairs", *KNOBS)
                          if getattr(request, k) is not None])
    if request.text_field is not None and request.resume is None and data is not None:
        if request.data is None and Path(data).suffix not in FIELD_SUFFIXES:
            trained_on = printable(str(trained.get("data")))
            raise UsageError(f"--text-field: {request.source} was trained on {trained_on}, "
                             "which has no fields; give --data FILE.jsonl, FILE.parquet or "
                             "hf:NAME, whose rows it names a field of")
        check_read(data, ["text_field"])  # a field of a .jsonl/.parquet file's rows, or hf:'s
    if data is None and request.task == "genppl" and asked_task is None:
        raise UsageError("--scorer asks for --task genppl, which needs --data (shakespeare or a "
                         "text file) for its prompts and reference text")
    gen, warnings = None, []
    if request.task == "genppl":
        if mode == "ar":
            _decoded_by_tokens(request)
        filled = replace(request, **{k: v for k, v in GENPPL_DEFAULTS.items()
                                     if getattr(request, k) is None})
        kind = check_scorer(filled.scorer)
        gen = _gen_settings(filled, mode, recipe.block_size)
        warnings += [*scorer_warnings(filled, kind), block_warning(
            request, src, [d.G for d in gen.decodings if d.mode == "diffusion"]),
            one_step_warning(filled, gen)]
    warnings += [untrained_warning(src), mode_warning(request, src, mode),
                 trained_on_warning(request, trained, data)]
    grid = EvalGrid(source, recipe.name, recipe.recipe_hash, G, K, request.task, lengths,
                    depths, pairs,
                    EvalSettings(mode, K or 1, request.samples, request.batch, request.seed,
                                 train_len),
                    digits, data,
                    DataOptions(digits, pairs[0], _text_field(request, trained)),
                    str(tok_spec) if tok_spec is not None else None, gen,
                    _suite_knobs(request, trained),
                    bos=src.starts_with_bos(None if request.tokenizer else tok),
                    changes=request.changes, warnings=tuple(w for w in warnings if w))
    try:
        check(grid, tok)
    except TooShort as e:
        if request.lengths is not None:
            raise
        default = ", ".join(map(str, lengths))
        raise UsageError(f"{e}; --lengths was not given: its default here is {default}, from "
                         + (f"the length trained at ({train_len})" if train_len else
                            f"{UNKNOWN_TRAIN_LENGTH} (the training length is not recorded)")
                         + "; give --lengths") from None
    return grid, recipe, tok


def _text_field(request: EvalRequest, trained: dict) -> str:
    """--text-field; where not given, "text", or the field training read where the text is
    training's own (no --data). (A run stored before the option could be left out holds
    "text" where it was not given: it resumes as it began.)"""
    unset = request.text_field is None or (request.resume and request.text_field == "text")
    if unset and request.data is None:
        return trained.get("text_field", "text")
    return request.text_field or "text"


def export(request: EvalRequest, folder: Path) -> tuple[EvalGrid, list[str], int, int]:
    """The prompts `request` would score written as lm-evaluation-harness tasks in `folder`
    (fsc.eval.export), with no model loaded: (the grid, the tasks' names, the group's last,
    the most tokens a document holds with its answer, the files of an earlier export there
    that were removed)."""
    grid, _, tok = grid_of(request)
    return grid, *write_tasks(grid, tok, Path(folder))


def _suite_knobs(request: EvalRequest, trained: dict) -> RulerOptions:
    """The suite's knobs: those given, else those training recorded (--hops 2 trained, --hops
    2 evaluated), but a single needle for niah's single variant (--task ruler's other niah
    variants keep the needles recorded)."""
    given = {k: getattr(request, k) for k in SUITE_OPTIONS if getattr(request, k) is not None}
    recorded = trained.get("suite") if isinstance(trained.get("suite"), dict) else {}
    knobs = {**recorded, **given}
    if (request.task == "niah" and knobs.get("variant", "single") == "single"
            and "needles" not in given):  # --task ruler keeps them for its other variants
        knobs.pop("needles", None)
    return RulerOptions(**knobs)


CUTS = ("top_k", "top_p", "min_p")  # what a sampled draw keeps of the distribution; greedy: all


def _gen_settings(request: EvalRequest, mode: str, recipe_G: int) -> GenSettings:
    """genppl's decodings: every G × K × policy × threshold × temperature (diffusion), or one
    per temperature (an autoregressive checkpoint), then the baseline's; checked here."""
    for p in request.policies:
        if p not in POLICIES:
            raise UsageError(f"--policy {p!r} is not one of {', '.join(POLICIES)}")
    for t in request.thresholds:
        if t is not None and not 0 < t <= 1:
            raise UsageError(f"--threshold {t} must be in (0, 1]")
    for t in request.temperatures:
        check_temperature(t)
    cuts = [f"--{k.replace('_', '-')} {getattr(request, k):g}" for k in CUTS
            if getattr(request, k) != GENPPL_DEFAULTS[k]]
    if cuts and not any(request.temperatures):  # (as fsc decode refuses them)
        raise UsageError(f"{' and '.join(cuts)} at --temperature 0 change"
                         f"{'s' * (len(cuts) == 1)} nothing: greedy decoding takes the most "
                         "likely token; give --temperature T (e.g. 0.8) to sample, or drop "
                         f"{' and '.join(c.split()[0] for c in cuts)}")
    if request.mauve:
        mauve_available()
        if request.samples < 2:
            raise UsageError(f"--mauve compares the samples with the reference text as two "
                             f"distributions: give --samples 2 or more (not {request.samples})")
    decodings: list[Decoding] = []

    def drawn(temp: float) -> dict:
        """The cuts and the penalty of every cell at `temp`: at 0 (greedy) no cut, which would
        change nothing (its rows and labels said top-k 5 of cells decoded greedily)."""
        given = {k: getattr(request, k) for k in SAMPLING}
        return given if temp else {**given, **{k: GENPPL_DEFAULTS[k] for k in CUTS}}

    for temp in request.temperatures:
        if mode == "ar":
            decodings.append(Decoding("ar", 1, 0, temperature=temp, **drawn(temp)))
            continue
        for g in request.G or (recipe_G,):
            for k in request.steps or _powers_to(g):
                block_setting("diffusion", g, k)  # K <= G, G in range: one line otherwise
                for p in request.policies:
                    for t in request.thresholds:
                        decodings.append(Decoding("diffusion", g, k, p, t, temp,
                                                  **drawn(temp)))
    if request.baseline is not None:
        base = _baseline_recipe(request.baseline)
        if base.block_size != 1:
            raise UsageError(f"--baseline {request.baseline}: a block-diffusion checkpoint "
                             f"(G = {base.block_size}); the baseline row decodes an "
                             "autoregressive one")
        for temp in request.temperatures:
            decodings.append(Decoding("ar", 1, 0, temperature=temp, **drawn(temp),
                                      checkpoint=str(resolve_checkpoint(request.baseline))))
    return GenSettings(tuple(decodings), request.prompt_length, request.scorer, request.ngram,
                       request.mauve)


def _decoded_by_tokens(request: EvalRequest) -> None:
    """UsageError for genppl's block-diffusion options given where the checkpoint decodes
    autoregressively (they would change nothing)."""
    given = [name for name, v in (("--G", request.G), ("--steps", request.steps),
                                  ("--policy", request.policies),
                                  ("--threshold", request.thresholds)) if v is not None]
    if given:
        who = "--mode ar" if request.mode == "ar" else "an autoregressive checkpoint"
        raise UsageError(f"{', '.join(given)}: {who} decodes at G 1, a token a forward pass, "
                         "with no denoising steps, reveal policy or threshold; drop "
                         + ("it" if len(given) == 1 else "them"))


def _baseline_recipe(ref: str) -> Recipe:
    """The recipe of --baseline `ref`; its errors name the option."""
    try:
        return load_source_recipe(str(resolve_checkpoint(ref)))
    except FscError as e:
        said = str(e).removeprefix(f"{ref}: ")
        raise type(e)(f"--baseline {ref}: {said}" if ref.strip() else f"--baseline: {said}"
                      ) from None


def one_step_warning(request: EvalRequest, gen: GenSettings) -> str | None:
    """A line where cells decode at K 1 with several --policy or --threshold: one step reveals
    the whole block, so those cells are alike (fsc decode says as much of one decode)."""
    several = [o for o, v in (("--policy", request.policies), ("--threshold", request.thresholds))
               if len(v) > 1]
    if not several or not any(d.mode == "diffusion" and d.K == 1 for d in gen.decodings):
        return None
    return (f"at K 1 one step reveals the whole block: its cells of each {' and '.join(several)} "
            "decode alike")


def scorer_warnings(request: EvalRequest, kind: str) -> tuple[str, ...]:
    """Why Gen-PPL under `request.scorer` (of `kind`, see check_scorer) flatters or judges
    nothing, a line each (docs/quality.md): the scorer is the checkpoint scored or the
    --baseline (the same weights, a training directory taken at its step), or its weights are
    seeded random ones (a recipe, or a checkpoint `fsc build --save` wrote, or the step-000000
    of a training from a recipe stopped before its first step: untrained)."""
    scorer = resolve_checkpoint(request.scorer)
    published = _published(request.scorer, kind)
    said = []
    for ref, what, whose in ((request.source, "the checkpoint it scores", "its samples are"),
                             (request.baseline, "the --baseline", "the baseline's samples are")):
        if ref is None:
            continue
        if resolve_checkpoint(ref).resolve() == scorer.resolve():
            said.append(f"--scorer {request.scorer} is {what} ({scorer}): {whose} scored by "
                        "their own model, which flatters them")
        elif published is not None and _published(ref, "fsc") == published:
            said.append(f"--scorer {request.scorer} holds the weights of {what} ({ref}, "
                        f"imported from {published} and not trained since): {whose} scored "
                        "by their own model, which flatters them")
    config = checkpoint_config(scorer)
    untrained = not config.get("training") or config["training"].get("steps") == 0
    if kind == "fsc" and (not is_checkpoint(scorer) or (config.get("seed") is not None
                                                        and untrained
                                                        and not config.get("imported_from"))):
        said.append(f"--scorer {request.scorer}: seeded random weights (untrained); a Gen-PPL "
                    "under it says nothing about the text")
    return tuple(said)


def _published(ref: str, kind: str) -> str | None:
    """The published model whose weights `ref` (a scorer of `kind`, or an fsc source) holds
    unchanged, as `fsc import` records its origin (a folder's absolute path, or hf:ID): a
    transformers folder or Hub id itself; an fsc checkpoint imported and not trained since;
    else None."""
    if kind == "transformers":
        return str(Path(ref).resolve()) if Path(ref).is_dir() else "hf:" + ref.removeprefix("hf:")
    config = checkpoint_config(resolve_checkpoint(ref))
    origin = config.get("imported_from")
    if not isinstance(origin, str) or config.get("training"):
        return None
    return origin.rsplit(" (", 1)[0]  # "ORIGIN (Architecture)"


def _powers_to(G: int) -> tuple[int, ...]:
    """K = 1, 2, 4, ... up to G (and G itself)."""
    ks, k = [], 1
    while k < G:
        ks.append(k)
        k *= 2
    return (*ks, G)
