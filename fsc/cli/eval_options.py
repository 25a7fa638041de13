"""Options of `fsc eval` declared beside the command: its --task choice, the RULER-style
suite's options (niah's --variant, --needles, --distractors; vt's --hops, --chains; cwe's and
fwe's --words; --haystack; --template; --export) and genppl's sampling besides --temperature and --top-p
(--top-k, --min-p, --repetition-penalty): `with_task_options(names)` adds them to a command and
hands it the ones given as `suite` (a dict; fsc.eval.request and fsc.data.sources check
which task takes each, fsc.data.ruler their bounds). `fsc train` takes the knobs of the suite's
training data (TRAIN_KNOBS)."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Annotated

import typer

from fsc.cli.bounds import one_value
from fsc.cli.common import Choice, finite


def _one(option: str, help: str, metavar: str | None = None):
    """An option that names one input: a second value is refused (bounds.one_value), where
    click would keep the last unsaid; the command unpacks its list of one."""
    return Annotated[list[str] | None, typer.Option(
        option, callback=one_value(option, None, "it names one input"), metavar=metavar,
        help=help, show_default=False)]


DataOpt = _one("--data", "loss, genppl: shakespeare or a .txt/.jsonl/.parquet file; loss also "
               "hf:NAME, a task or a mix of tasks (passkey, mqar, copy, vt, ...; "
               "passkey:1,vt:1); default: the corpus trained on, its val split, or the tasks "
               "trained on, drawn afresh.")
TokenizerOpt = _one("--tokenizer", "Local Hugging Face tokenizer directory (default: as "
                    "trained).", "DIR")
ScorerOpt = _one("--scorer", "genppl: the autoregressive model that scores the samples: an "
                 "fsc checkpoint, training dir or recipe (G 1), or a transformers model "
                 "directory.")
BaselineOpt = _one("--baseline", "genppl: an autoregressive checkpoint decoded on the same "
                   "prompts, as a row.")
IncludePathOpt = _one("--include-path", "harness: a folder of local task YAML files.", "DIR")
OutputPathOpt = _one("--output-path", "harness: a folder for the harness's results JSON (and "
                     "--log-samples' JSONL), as lm_eval --output_path writes them.", "DIR")
ResumeOpt = _one("--resume", "Continue an eval run (after Ctrl-C, SIGTERM or a kill): only its "
                 "missing cells are scored; a finished one is left as it is (exit 0).", "RUN_ID")


class Task(Choice):
    niah = "niah"
    mqar = "mqar"
    copy = "copy"
    vt = "vt"
    cwe = "cwe"
    fwe = "fwe"
    ruler = "ruler"
    loss = "loss"
    genppl = "genppl"
    harness = "harness"


TASK_OPTIONS = {
    "variant": Annotated[str | None, typer.Option(
        "--variant", help="niah: single (one key asked; the default), multikey (several keys, "
        "one asked), multivalue (one key, several values, all asked) or multiquery (several "
        "keys, all asked).", show_default=False)],
    "needles": Annotated[int | None, typer.Option(
        "--needles", help="niah: keys (multikey, multiquery) or values (multivalue) per "
        "prompt (default 4).", show_default=False)],
    "distractors": Annotated[int | None, typer.Option(
        "--distractors", help="niah: more needles, of keys never asked (default 0).",
        show_default=False)],
    "hops": Annotated[int | None, typer.Option(
        "--hops", help="vt: links of each chain after its value (default 4).",
        show_default=False)],
    "chains": Annotated[int | None, typer.Option(
        "--chains", help="vt: chains per prompt, one asked (default 1).", show_default=False)],
    "words": Annotated[int | None, typer.Option(
        "--words", help="cwe, fwe: words the answer names (default 3).", show_default=False)],
    "haystack": Annotated[str | None, typer.Option(
        "--haystack", help="niah, vt: filler (the default) or shakespeare around the needles "
        "(fsc eval reads its validation text, fsc train its training text).",
        show_default=False)],
    "template": Annotated[str | None, typer.Option(
        "--template", help="niah, vt, cwe, fwe: the prompts' wording: fsc (its short question; "
        "the default) or ruler (RULER's own: its instruction, question and answer prefix, "
        "needle sentence, cwe's numbered list, fwe's noise word).", show_default=False)],
    "export": Annotated[Path | None, typer.Option(
        "--export", metavar="DIR", help="niah, vt, cwe, fwe, ruler: write the prompts as "
        "lm-evaluation-harness tasks in DIR (JSON lines, a task YAML each, a group YAML) "
        "instead of scoring them; an earlier export there is replaced whole.",
        show_default=False)],
    "top_k": Annotated[int | None, typer.Option(
        "--top-k", min=0, max=2**31 - 1, help="genppl: sample from the K most likely tokens "
        "only, then --top-p (0: all; the default).", show_default=False)],
    "min_p": Annotated[float | None, typer.Option(
        "--min-p", callback=finite(0, 1), help="genppl: then only from tokens at least this "
        "fraction of the most likely one's probability, in [0, 1] (0: all; the default).",
        show_default=False)],
    "repetition_penalty": Annotated[float | None, typer.Option(
        "--repetition-penalty", callback=finite(0, low_open=True), help="genppl: make ids of "
        "the prompt and earlier blocks less likely, as transformers does (1: none; the "
        "default).", show_default=False)],
}

# The options that shape a grid: a resumed run takes all of them from its stored request.
GRID_OPTIONS = ("task", "lengths", "depths", "pairs", "samples", "steps", "mode", "batch", "data",
                "needle_digits", "text_field", "tokenizer", "seed", "scorer", "G", "policy",
                "threshold", "temperature", "top_p", "prompt_length", "baseline", "ngram",
                "mauve", "changes", *TASK_OPTIONS)
TRAIN_KNOBS = ("needles", "distractors", "hops", "chains", "words", "haystack", "template")


def with_task_options(names: tuple[str, ...] = tuple(TASK_OPTIONS)):
    """A decorator: `command` (a typer command taking `suite`) with the task options `names`
    added before its --store; the ones given are handed to it as `suite`."""

    def add(command):
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values()
               if p.name != "suite"]
        at = next(i for i, p in enumerate(own) if p.name == "store")
        added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                   annotation=TASK_OPTIONS[name], default=None)
                 for name in names]
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[:at]]
        params += added + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[at:]]

        @functools.wraps(command)
        def run(*args, **values):
            suite = {name: v for name in names if (v := values.pop(name)) is not None}
            return command(*args, suite=suite, **values)

        run.__signature__ = inspect.Signature(params)
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return add


# what --export does not read: it loads no model, decodes and stores nothing
EXPORT_UNREAD = ("mode", "batch", "device", "store", "executor", "workers", "address", "retries",
                 "slurm_partition", "slurm_gpus_per_node", "slurm_time")


def export_prompts(asked, folder: Path, as_json: bool = False, unread: list[str] = ()) -> None:
    """`fsc eval --export DIR`: the request's prompts written as harness tasks, and how to
    score them, with its --steps (with --json, as one document on stdout); UsageError with
    --set, which changes the model, not the prompts, or the options `unread` (those of
    EXPORT_UNREAD given)."""
    import shlex

    from fsc.cli.common import output_dir, print_json, say
    from fsc.errors import UsageError
    from fsc.eval.plan import export
    from fsc.harness import DEFAULT_MAX_LENGTH
    from fsc.text import counted

    if asked.changes:
        raise UsageError("--set changes the model scored; --export writes prompts only")
    if unread:
        raise UsageError(f"{', '.join(unread)}: --export writes prompts only, loading no model "
                         "and storing nothing (the harness command it prints decodes the "
                         f"checkpoint as trained); drop {'it' if len(unread) == 1 else 'them'}")
    output_dir(folder, "--export", replace=True)  # a folder that takes files: one line if not
    grid, names, longest, replaced = export(asked, folder)
    command = ["fsc", "eval", grid.checkpoint, "--task", "harness", "--tasks", names[-1],
               "--include-path", str(folder)]
    if asked.steps:  # the harness's generation K
        command += ["--steps", str(asked.steps[0])]
    if longest + 1 > DEFAULT_MAX_LENGTH:  # (+1: a tokenizer's BOS) read whole, not cut
        command += ["--max-length", str(longest + 1)]
    if as_json:
        print_json({"folder": str(folder), "tasks": names[:-1], "group": names[-1],
                    "replaced": replaced, "checkpoint": grid.checkpoint,
                    "command": shlex.join(command)})
        return
    instead = f" in place of the earlier export's {counted(replaced, 'file')}" if replaced else ""
    say(f"wrote {counted(len(names) - 1, 'lm-evaluation-harness task')} and their group "
        f"{names[-1]} to {folder}{instead}; score them with\n  {shlex.join(command)}")


MAX_SAMPLES = 100_000  # prompts a cell (--samples), documents a harness task (--limit)
MAX_PAIRS = 676  # mqar's keys are two letters


def documents(value: float | None) -> float | int | None:
    """--limit: a whole number of documents from 1 to MAX_SAMPLES, or a fraction in (0, 1)."""
    if value is None:
        return None
    finite(0, MAX_SAMPLES, low_open=True)(value)
    if value >= 1 and value != int(value):
        raise typer.BadParameter(f"{value:g} is neither a whole number of documents nor a "
                                 "fraction below 1")
    return int(value) if value >= 1 else value
