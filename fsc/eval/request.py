"""What `fsc eval` is asked (EvalRequest), and the checks of it that need no model: the task
a checkpoint's training record implies and the options that task takes. Light (no torch), so
that the command's option errors come before torch is imported."""

from __future__ import annotations

from dataclasses import dataclass, replace

from fsc import corpora
from fsc.data.mix import RULER, parse_mix
from fsc.data.sources import KNOBS, SYNTHETIC, TEXT_SUFFIXES, absolute, hub_parts
from fsc.errors import UsageError
from fsc.recipe import parse_changes
from fsc.source import Source, located_ref
from fsc.text import printable

DEFAULT_PAIRS = (8,)  # mqar's pairs unless --pairs says


@dataclass(frozen=True)
class EvalRequest:
    """What `fsc eval` was asked for; None: as the checkpoint was trained, or fsc's default."""

    source: str  # a checkpoint, a training directory (its latest step) or a recipe
    task: str | None = None  # None: the task training data implies (default_task)
    lengths: tuple[int, ...] | None = None
    depths: tuple[float, ...] | None = None  # niah's (None: fsc.eval.grid.DEFAULT_DEPTHS)
    pairs: tuple[int, ...] | None = None  # mqar's, and loss's on mqar data (None: 8)
    samples: int = 20
    steps: tuple[int, ...] | None = None  # K; genppl takes several
    mode: str | None = None
    batch: int = 20
    data: str | None = None
    needle_digits: int | None = None
    text_field: str | None = None  # None: "text", or the field training read (its own data)
    tokenizer: str | None = None
    seed: int = 0
    device: str = "cpu"
    # genppl's own (None: not given; the defaults are GENPPL_DEFAULTS)
    scorer: str | None = None
    G: tuple[int, ...] | None = None  # block sizes decoded with (default: the recipe's)
    policies: tuple[str, ...] | None = None
    thresholds: tuple[float | None, ...] | None = None
    temperatures: tuple[float, ...] | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    prompt_length: int | None = None
    baseline: str | None = None  # an autoregressive checkpoint decoded beside, as a row
    ngram: int | None = None
    mauve: bool = False
    # the RULER-style suite's own (None: not given; the defaults are fsc.data.ruler.RulerOptions)
    variant: str | None = None  # niah: single, multikey, multivalue or multiquery
    needles: int | None = None  # niah
    distractors: int | None = None  # niah
    hops: int | None = None  # vt
    chains: int | None = None  # vt
    words: int | None = None  # cwe, fwe
    haystack: str | None = None  # niah, vt: filler or a corpus
    template: str | None = None  # niah, vt, cwe, fwe: the prompts' wording, fsc's or RULER's
    changes: tuple[str, ...] = ()  # --set KEY=VALUE: weight-free recipe fields changed
    resume: str | None = None  # an eval run to continue: only its missing cells are scored

    def genppl_options(self) -> list[str]:
        """The genppl options this request gives (an error for any other task)."""
        return [f"--{name.replace('_', '-')}" for name in GENPPL_DEFAULTS
                if getattr(self, name) not in (None, False)]


GENPPL_DEFAULTS = {"scorer": None, "G": None, "policies": ("confidence",), "thresholds": (None,),
                   "temperatures": (1.0,), "top_p": 1.0, "top_k": 0, "min_p": 0.0,
                   "repetition_penalty": 1.0, "prompt_length": 64, "baseline": None,
                   "ngram": 4, "mauve": False}

# how every genppl cell draws besides its temperature (the cuts and the repetition penalty)
SAMPLING = ("top_p", "top_k", "min_p", "repetition_penalty")


TRAINED_TASK = {"passkey": "niah", "mqar": "mqar", "copy": "copy", "niah_multikey": "niah",
                "niah_multivalue": "niah", "niah_multiquery": "niah", "vt": "vt", "cwe": "cwe",
                "fwe": "fwe", "ruler": "ruler"}  # training data -> the eval task that scores it
TRAINED_VARIANT = {"niah_multikey": "multikey", "niah_multivalue": "multivalue",
                   "niah_multiquery": "multiquery"}  # and niah's variant
SUITE_OPTIONS = {"variant": ("niah",), "needles": ("niah", "ruler"),
                 "distractors": ("niah", "ruler"), "hops": ("vt", "ruler"),
                 "chains": ("vt", "ruler"), "words": ("cwe", "fwe", "ruler"),
                 "haystack": ("niah", "vt", "ruler"),
                 "template": ("niah", "vt", "cwe", "fwe", "ruler")}  # each: the tasks taking it
# and --task loss takes those its data's tasks read (fsc.data.sources.KNOBS), as fsc train does


def default_task(request: EvalRequest, data) -> str:
    """The task `fsc eval` runs when --task is not given: the one that measures what the
    checkpoint was trained on (passkey: niah, mqar: mqar, copy: copy, vt: vt, ..., a mix of
    tasks: ruler, text: loss; genppl when --scorer is given), niah for untrained weights;
    UsageError naming the fitting task otherwise."""
    if request.scorer is not None:
        return "genppl"
    if data is None:
        return "niah"
    if (one := _one_task(data)) in TRAINED_TASK:  # a task, or a mix of one (niah_multikey:3)
        return TRAINED_TASK[one]
    if isinstance(data, str) and (mix := parse_mix(data, SYNTHETIC)) is not None:
        return _mix_task(request.source, data, [name for name, w in mix if w > 0])
    if is_text(data) or str(data).startswith("hf:") or request.data is not None:
        return "loss"
    raise UsageError(f"{request.source} was trained on {data}, which no eval task measures "
                     f"as it is: give --task loss --data {data} (its held-out loss), or --task "
                     "niah, mqar or copy")


def _mix_task(source: str, data: str, names: list[str]) -> str:
    """The task scoring a mix of several training tasks: ruler for parts of the suite, or
    UsageError naming the tasks that score its parts one at a time."""
    if all(name in RULER for name in names):
        return "ruler"
    tasks = sorted({TRAINED_TASK[name] for name in names if name in TRAINED_TASK})
    each = "".join(f"--task {t} or " for t in tasks)
    raise UsageError(f"{source} was trained on {data}, a mix no one eval task measures: give "
                     f"{each}--task loss (the mix's held-out loss)")


def trained_text(request: EvalRequest, trained: dict) -> str | None:
    """The data --data leaves to training's record: genppl's prompts from the text it was
    trained on (a corpus's val split), loss on a corpus's held-out split or on a task (or a
    mix of tasks) trained on, drawn afresh (the eval's samples come from a seed of its own);
    None where training recorded none; an hf: dataset named without a split as it is (read
    for evaluation, its held-out split). UsageError for loss after a text file, or an hf:
    dataset's split, which holds no held-out part."""
    recorded = trained.get("data")
    if request.task == "loss" and isinstance(recorded, str) and (
            recorded in SYNTHETIC or parse_mix(recorded, SYNTHETIC) is not None):
        return recorded
    hub = isinstance(recorded, str) and recorded.startswith("hf:")
    if request.task == "loss" and hub and hub_parts(recorded)[2] is None:
        return recorded  # read for evaluation: its held-out split, as it names none
    if not (is_text(recorded) or hub) or request.task not in ("genppl", "loss"):
        return None
    if corpora.is_corpus(recorded):  # (genppl reads a bare corpus name's val split)
        if request.task == "genppl":
            return recorded.split(":")[0]
        _, part = corpora.split_of(recorded, "train")  # loss: the split training did not read
        return recorded.split(":")[0] + (":val" if part == "train" else ":train")
    if request.task == "genppl":
        return recorded
    raise UsageError(f"--task loss needs --data: {request.source} was trained on "
                     f"{printable(recorded)}, whose loss is not held out (give held-out text)")


def trained_on_warning(request: EvalRequest, trained: dict, data: str | None) -> str | None:
    """Why --task loss on `data` (--data) is not a held-out loss: it is the text, or the split
    of a corpus or an hf: dataset, that training read; None where it is not (or is drawn
    afresh: a task)."""
    recorded = trained.get("data")
    if request.task != "loss" or request.data is None or not isinstance(recorded, str):
        return None
    read = _text_read(data, "val")
    if read is None or read != _text_read(recorded, "train"):
        return None
    return (f"--data {printable(request.data)} is text {request.source} was trained on: its "
            "loss is not held out")


def _text_read(spec: str, split: str) -> tuple | None:
    """What text the data `spec` reads when a command reads its `split` (train or val) where
    it names none: a corpus's split, an hf: dataset's name, config and split (None for its
    held-out one, whichever it is), a file's path; None for a task or a mix, drawn afresh."""
    if corpora.is_corpus(spec):
        corpus, part = corpora.split_of(spec, split)
        return ("corpus", corpus.name, part)
    if spec.startswith("hf:"):
        name, config, part = hub_parts(spec)
        return ("hf", name, config, part or ("train" if split == "train" else None))
    return ("file", spec) if spec.endswith(TEXT_SUFFIXES) else None


def _one_task(data) -> str | None:
    """The one task training drew from: its --data, or the one task of a mix (niah_multikey:3)."""
    mix = parse_mix(data, SYNTHETIC) if isinstance(data, str) else None
    names = {name for name, w in mix or () if w > 0}
    return names.pop() if len(names) == 1 and data != "ruler" else data


def is_text(data) -> bool:
    """Whether training data `data` (as recorded) is natural text genppl can draw from."""
    return isinstance(data, str) and (corpora.is_corpus(data) or data.endswith(TEXT_SUFFIXES))


def checked(request: EvalRequest, trained: dict) -> EvalRequest:
    """`request` with its task filled in from the training record `trained` (default_task);
    UsageError for an option its task does not take: several --steps, genppl's options, or
    --scorer missing, but with genppl; --depths but with niah; --text-field but with loss or
    genppl; --pairs but with mqar or loss; a suite option (SUITE_OPTIONS) but with its tasks,
    or loss for a knob of the suite's data (KNOBS: whether its data reads it is checked with
    the data); a depth, policy, threshold or temperature given twice. (A resumed run's stored
    request holds the depths and pairs it was given whatever its task: those are not checked
    again.)"""
    if request.task is None:
        request = replace(request, task=default_task(request, trained.get("data")))
        if request.task == "niah" and request.variant is None:  # the variant trained on
            request = replace(request, variant=TRAINED_VARIANT.get(_one_task(trained.get("data"))))
    task = request.task
    if task != "genppl" and request.steps is not None and len(request.steps) > 1:
        raise UsageError("--steps takes one K except with --task genppl")
    given = request.genppl_options()
    if task != "genppl" and given:
        names = [{"--policies": "--policy", "--thresholds": "--threshold",
                  "--temperatures": "--temperature"}.get(g, g) for g in given]
        raise UsageError(f"{', '.join(names)}: for --task genppl only")
    if task == "genppl" and request.scorer is None:
        raise UsageError("--task genppl needs --scorer (an autoregressive fsc checkpoint or "
                         "recipe, or a transformers model)")
    if request.resume is None:
        for option, values in (("--depths", request.depths), ("--policy", request.policies),
                               ("--threshold", request.thresholds),
                               ("--temperature", request.temperatures)):
            _once(option, values or ())
        if task == "loss" and request.steps is not None:
            raise UsageError("--steps: --task loss decodes nothing (its bound reads each block "
                             "in one pass); drop --steps")
        if request.depths is not None and task not in ("niah", "ruler"):
            raise UsageError(f"--depths: for --task niah or ruler only (this is {task})")
        if request.text_field is not None and task not in ("loss", "genppl"):
            raise UsageError(f"--text-field: for --task loss or genppl only, whose --data it "
                             f"names a field of (this is {task}, which reads no data)")
        if request.pairs is not None and task not in ("mqar", "loss"):
            raise UsageError(f"--pairs: for --task mqar (or loss on mqar data) only (this is "
                             f"{task})")
        for name, tasks in SUITE_OPTIONS.items():
            if getattr(request, name) is None or task in tasks or (task == "loss"
                                                                   and name in KNOBS):
                continue
            loss = f", or --task loss on {_either(KNOBS[name])} data" if name in KNOBS else ""
            raise UsageError(f"--{name}: for --task {_either(tasks)} only (this is {task}){loss}")
    return request


def _either(names: tuple[str, ...], word: str = "or") -> str:
    """'a, b or c' (`word`: or, and)."""
    return f"{', '.join(names[:-1])}{f' {word} ' if len(names) > 1 else ''}{names[-1]}"


def _once(option: str, values: tuple) -> None:
    """UsageError for a value of list option `option` given twice (1 and 1.0 among them): its
    cells would be scored twice and stored once."""
    for i, v in enumerate(values):
        if v in values[:i]:
            said = "none" if v is None else f"{v:g}" if isinstance(v, float) else v
            raise UsageError(f"{option}: {said} is given twice")


def mode_warning(request: EvalRequest, src: Source, mode: str) -> str | None:
    """Why scoring the checkpoint `src` in `mode` (diffusion or ar, as its run does) reads it
    outside what it learned, as `fsc decode` notes it: autoregressive weights (G 1) read by
    block diffusion, or a denoiser's read a token at a time; None where it is read as trained
    (or its weights are seeded: they learned nothing)."""
    G, objective = src.recipe.block_size, src.training.get("objective")
    if not src.learned:
        return None
    what = "answers" if request.task in RETRIEVAL else "cells"
    if mode == "diffusion" and G == 1 and objective in (None, "ar"):
        read = ("scores its masked-diffusion bound" if request.task == "loss"
                else f"decodes its {what} by block diffusion")
        return (f"{request.source} is autoregressive (G 1), never trained to denoise: --mode "
                f"diffusion {read}, outside what it learned (adapt it first: fsc train "
                f"{request.source} --G N --data TEXT; or give --mode ar)")
    if mode == "ar" and G > 1 and objective != "ar":
        read = ("scores its next-token NLL" if request.task == "loss"
                else f"decodes its {what} a token at a time")
        return (f"{request.source} was trained by block diffusion at G {G}, never to predict "
                f"the next token: --mode ar {read}, outside what it learned")
    return None


def untrained_warning(src: Source) -> str | None:
    """Why the checkpoint `src` scores no training: the step `fsc train` saves when a stop
    signal ends a run before its first step (step-000000, kept for --resume), which holds the
    weights the run started from; None for any other."""
    if not src.is_checkpoint or src.training.get("steps") != 0:
        return None
    seeded = ", seeded random ones" if not src.learned else ""
    return (f"{src.ref} holds no trained step (its run was interrupted before its first step "
            f"and saved it for --resume): it scores the weights the run started from{seeded}")


def block_warning(request: EvalRequest, src: Source, Gs) -> str | None:
    """Why decoding the checkpoint `src` by block diffusion at the block sizes `Gs` (genppl's
    --G) reads it outside what it learned, as `fsc decode` notes it: weights trained at a G
    above 1 decoded at another; None where each G is the one trained at, or the weights are
    seeded (an autoregressive checkpoint decoded in blocks is mode_warning's)."""
    trained = src.recipe.block_size
    other = sorted(set(Gs) - {trained})
    if not src.learned or trained == 1 or not other:
        return None
    said = _either(tuple(map(str, other)), "and")
    return (f"{request.source} was trained at G {trained}; decoding at G {said} is outside "
            "what it learned")


RETRIEVAL = ("niah", "mqar", "copy", "vt", "cwe", "fwe", "ruler")  # the tasks that decode answers


def located(request: EvalRequest) -> EvalRequest:
    """`request` with each local file or folder it names (the checkpoint, --scorer,
    --baseline, --tokenizer, a --data text file) by its absolute path, as its run records it,
    so that the run resumes, and its records read, from any directory; a recipe name, a Hub
    id or a corpus as given."""
    here = located_ref
    return replace(request, source=here(request.source), scorer=here(request.scorer),
                   baseline=here(request.baseline), tokenizer=here(request.tokenizer),
                   data=None if request.data is None else absolute(request.data))


def precheck(request: EvalRequest) -> None:
    """The checks of `checked`, with the training record of the checkpoint `request` names,
    for a caller that has not loaded torch yet (the command line). (The run's warnings are its
    grid's: fsc.eval.plan.)"""
    parse_changes(request.changes)
    checked(request, Source.read(request.source).training)
