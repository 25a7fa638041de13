"""`python -m fsc.harness ARGS`: lm-evaluation-harness's own command line (`lm_eval ARGS`) with
the model `fsc` registered, e.g.

    python -m fsc.harness --model fsc --model_args pretrained=runs/x,mc_samples=64 \\
        --batch_size 16 --device cpu --tasks arc_easy --include_path my_tasks --limit 100

What fsc refuses (a missing or unknown model_args, a value of the wrong kind, a checkpoint that
is not there, steps outside 1..G, --apply_chat_template) is one line and exit 2, as in fsc's
own commands, and so is a task the harness does not find (with the task YAML of --include_path that does not parse, if
one does not, in the line `fsc eval --task harness` says); FSC_DEBUG=1 shows the traceback.
"""

import os
import sys
from pathlib import Path

try:
    import lm_eval.__main__
    from lm_eval._cli import HarnessCLI

    import fsc.harness.lm  # noqa: F401 - registers the model `fsc`
except ImportError as e:
    print(f"error: the harness needs lm-evaluation-harness ({e}): pip install 'fsc[harness]'",
          file=sys.stderr)
    raise SystemExit(2) from None

from fsc.errors import FscError, UsageError
from fsc.harness.lm import checked_args, generation_steps, read_generation
from fsc.harness.run import local_tasks, unparsed
from fsc.source import load_source_recipe
from fsc.text import first_line, printable

# How the harness says it found no task: a name it lacks, or none at all (a folder of the
# name in the working directory, read as a folder of task YAMLs, that holds none)
NOT_FOUND = ("Tasks not found", "No tasks specified, or no tasks found")


def _option(argv: list[str], name: str) -> str | None:
    """The value `name` gives (`name VALUE` or `name=VALUE`), None where it is not given."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.partition("=")[2]
    return None


def check_model(args) -> None:
    """For `--model fsc`: its model_args and --batch_size, as the harness's parser read them,
    checked, and the checkpoint read (its recipe, not its weights), before the harness indexes
    its tasks (half a minute): a mistake there is a line in seconds. (The model checks them
    again when the harness makes it.)"""
    if getattr(args, "model", None) != "fsc":
        return
    if getattr(args, "apply_chat_template", False):
        raise UsageError("--apply_chat_template: the model fsc reads plain prompts; it applies "
                         "no chat template")
    batch = getattr(args, "batch_size", None)
    got = checked_args(**(args.model_args or {}),
                       **({"batch_size": batch} if batch is not None else {}))
    recipe = load_source_recipe(got["source"])
    generation_steps(got["steps"], recipe.block_size, args.model_args["pretrained"])
    if getattr(args, "gen_kwargs", None):  # (a task's own are checked as the model reads them)
        read_generation(args.gen_kwargs, 1, None, "--gen_kwargs", "--gen_kwargs", sample=True)


def check_tasks(args) -> None:
    """A task of --tasks that --include_path lacks, named by a task YAML there that does not
    parse: the line `fsc eval --task harness` says (local_tasks), before the harness indexes its
    tasks (it skips such a file, then fails without naming it, or with a traceback where a
    folder of that name is in the working directory)."""
    folder = getattr(args, "include_path", None)
    names = [t for t in getattr(args, "tasks", None) or () if not t.endswith(".yaml")]
    if folder and names and Path(folder).is_dir():
        local_tasks(folder, names)


def main() -> int:
    """The harness's command line (lm_eval's `cli_evaluate`, the model's arguments checked
    between parsing and running); fsc's errors, and a task not found, as one line."""
    try:
        lm_eval.__main__.setup_logging()
        cli = HarnessCLI()
        args = cli.parse_args()
        check_model(args)
        check_tasks(args)
        cli.execute(args)
    except (FscError, ValueError) as e:
        missing = isinstance(e, ValueError) and str(e).startswith(NOT_FOUND)
        if os.environ.get("FSC_DEBUG") == "1" or not (isinstance(e, FscError) or missing):
            raise
        folder = _option(sys.argv[1:], "--include_path") if missing else None
        broken = unparsed(folder) if folder and Path(folder).is_dir() else None
        print(f"error: {printable(first_line(e), 400)}" + (f" ({broken})" if broken else ""),
              file=sys.stderr)
        return 2 if missing else e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
