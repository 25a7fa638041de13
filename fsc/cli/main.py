"""Entry point: the Typer app, command registration and the one error boundary."""

from __future__ import annotations

import functools
import os
import sys

import typer

from fsc import __version__, interrupts
from fsc.cli import (
    artifacts,
    build,
    common,
    compare,
    decode,
    estimate,
    evaluate,
    imports,
    plot,
    profile,
    query,
    recipes,
    train,
    verify,
)
from fsc.cli.common import printable
from fsc.cli.usage import shape_options, usage_line
from fsc.errors import FscError, NothingToDo, is_out_of_memory


class _Typer(typer.Typer):
    """A Typer app that builds its click command once: typer.Typer builds the whole tree again
    on every call (about 80 ms), which each in-process run of `main` would pay. (Typer's own
    call also installs its exception hook, which, with pretty exceptions off, shows Python's
    standard traceback: the same as no hook.)"""

    @functools.cached_property
    def _click_command(self):
        command = typer.main.get_command(self)
        shape_options(command)
        return command

    def __call__(self, *args, **kwargs):
        return self._click_command(*args, **kwargs)


class _Unheard(Exception):
    """A stop signal (KeyboardInterrupt) no command caught, carried past typer, which would
    turn it into exit 130, unsaid and whatever the signal."""

    def __init__(self, interruption: KeyboardInterrupt):
        super().__init__(interruption)
        self.interruption = interruption


class _Group(typer.core.TyperGroup):
    """fsc's command group: a stop signal a command did not catch leaves it as _Unheard."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:
            raise _Unheard(e) from None
        except Exception as e:  # a stop signal a library made its own error of (DuckDB's)
            if interrupts.swallowed(e):
                raise _Unheard(interrupts.Interrupted(interrupts.last_signal())) from None
            raise


app = _Typer(
    cls=_Group,
    name="fsc",
    help="Build, decode, profile and share attention, Mamba, linear-attention and hybrid LMs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

for module in (recipes, build, imports, decode, verify, profile, query, estimate, train,
               evaluate, plot, compare, artifacts):
    module.register(app)

# `fsc --help` lists each command by these lines, whole at 80 columns (click would cut each
# command's first sentence at about 45 characters).
SUMMARIES = {
    "recipes": "List the shipped recipes.",
    "build": "Validate a recipe, build its model, report its layers.",
    "import": "A published model as a recipe or a checkpoint.",
    "decode": "Generate text, autoregressively or by block diffusion.",
    "verify": "Check that the cached decoder equals recomputing.",
    "profile": "Time step and fold over S and B into the store.",
    "query": "Run SQL against the store.",
    "export": "Write a query's result to a file.",
    "schema": "The store's tables, views and columns.",
    "estimate": "Predict memory, bytes, FLOPs and tokens/s.",
    "train": "Train a recipe or a checkpoint.",
    "eval": "Score a checkpoint: retrieval, loss, Gen-PPL, harness.",
    "plot": "Draw one figure from the store.",
    "report": "Write runs' figures and tables as one page.",
    "compare": "Compare two profile runs point by point.",
    "push": "Verify a checkpoint and push it to the Hub.",
    "pull": "Download a checkpoint and verify it.",
    "artifacts": "Checkpoints the store knows.",
    "runs": "Recent runs; remove or close one.",
}
for info in app.registered_commands:
    info.short_help = info.short_help or SUMMARIES.get(info.name or "")
for info in app.registered_groups:
    info.short_help = info.short_help or SUMMARIES.get(info.name or "")


def _version(value: bool) -> None:
    if value:
        print(f"fsc {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """fsc: a decode-time architecture workstation."""


# The click typer runs on (newer typers carry their own copy, older ones use the click package),
# from typer's own exceptions (typer.Exit and typer.Abort are click's own in older typers).
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
_NoArgsIsHelp = getattr(sys.modules[_ClickException.__module__], "NoArgsIsHelpError", ())

MAX_ERROR_CHARS = 1000  # a bound on a runaway message, above one that names a command to run


def _fail(message: str, code: int) -> int:
    print(f"error: {printable(message, MAX_ERROR_CHARS)}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    """Run fsc on `argv` (default: the command line) in this process; return the exit code.

    The one boundary: library errors (FscError) and usage errors print one line on stderr and
    exit with their code (2 for bad input); anything else is a bug, reported in one line with
    exit 1. FSC_DEBUG=1 re-raises instead, to show the traceback.
    """
    debug = os.environ.get("FSC_DEBUG") == "1"
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    common.INVOKED[:] = argv
    try:
        rv = app(args=argv, prog_name="fsc", standalone_mode=False)
    except _NoArgsIsHelp as e:  # bare `fsc` or a bare group: the help is the answer
        print(e.format_message())
        return 0
    except typer.Exit as e:
        return e.exit_code
    except _Unheard as e:  # Ctrl-C or a stop signal (fsc.interrupts) the command did not catch
        return _interrupted(e.interruption, argv)
    except SystemExit:  # click ends a closed pipe with exit 1, its streams pacified
        if type(sys.stdout).__name__.lstrip("_") == "PacifyFlushWrapper":  # click, any version
            _reader_left()
            return 0
        raise
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 130
    except KeyboardInterrupt as e:  # before typer ran a command (its tree still being built)
        return _interrupted(e, [])
    except _ClickException as e:
        if debug:
            raise
        return _fail(usage_line(e, argv), e.exit_code)
    except NothingToDo as e:  # already done: not an error
        print(str(e), file=sys.stderr)
        if "--json" in argv:  # the document a reader of stdout waits for
            common.print_json({**e.facts, "nothing_to_do": str(e)})
        return 0
    except FscError as e:
        if debug:
            raise
        return _fail(str(e), e.exit_code)
    except BrokenPipeError:  # `fsc query ... | head`: the reader left; nothing to report
        _reader_left()
        return 0
    except OSError as e:  # a path the user gave that cannot be read or written
        if debug:
            raise
        what = (f"{e.strerror or type(e).__name__}: {printable(e.filename, 120)}" if e.filename
                else printable(e, 200))
        return _fail(what, 2)
    except (Exception, RecursionError, MemoryError) as e:  # the boundary: a bug, in one line
        if debug:
            raise
        if is_out_of_memory(e):  # not a bug: the sizes asked for did not fit
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            return _fail(f"out of memory ({first}); lower the sizes asked for (--batch, "
                         "--seq-len, --S, --B, --length) or free memory", 1)
        return _fail(f"internal error ({type(e).__name__}: {e}); rerun with FSC_DEBUG=1 for the "
                     "traceback and please report it", 1)
    return rv if isinstance(rv, int) else 0


# Commands that never write to the store, and those that write only with an option: one
# stopped by a signal its own handler did not catch says that nothing was stored.
STORES_NOTHING = frozenset({"recipes", "decode", "verify", "estimate", "schema", "compare",
                            "plot", "report", "artifacts"})
STORES_WITH = {"query": "--write", "build": "--save"}


def _interrupted(e: KeyboardInterrupt, argv: list[str]) -> int:
    """Ctrl-C or a stop signal (fsc.interrupts) that no command's own handler caught: one
    line on stderr, naming the command, and the exit status 128 + the signal's number."""
    name = argv[0] if argv and argv[0] in SUMMARIES else None
    said = f"interrupted: fsc {name} stopped before it finished" if name else "interrupted"
    option = STORES_WITH.get(name or "")
    if name in STORES_NOTHING or (option and option not in (a.split("=")[0] for a in argv)):
        said += "; nothing was stored"
    print(said, file=sys.stderr)
    return interrupts.exit_code(interrupts.signum_of(e))


def _reader_left() -> None:
    """The reader of stdout is gone (`fsc schema | head`): what is still buffered goes
    nowhere, so that the exit flush does not fail and turn a quiet end into exit 1."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def run() -> None:
    """Console script (through fsc.__main__): main, under `command_stops` (a SIGTERM is said
    as Ctrl-C is), then its exit code; a Ctrl-C outside the command (while main reports its
    end, or stdout drains) is one line as well."""
    code = 0
    try:
        with interrupts.command_stops():
            code = main()
        interrupts.ignore_stops()  # it has ended and said so: the exit status stays the command's
        sys.stdout.flush()
    except BrokenPipeError:
        _reader_left()
    except KeyboardInterrupt as e:
        code = _interrupted(e, [])
    sys.exit(code)


if __name__ == "__main__":
    run()
