"""Shared option aliases and output helpers for every command group."""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from fsc.blocks import MODES
from fsc.errors import UsageError
from fsc.interrupts import signal_name
from fsc.jsonsafe import plain
from fsc.paths import store_dir
from fsc.text import human_bytes, printable  # noqa: F401 - printable re-exported for every command

# Human tables on stdout; when stdout is not a terminal (a log, a pipe) rich would wrap wide
# tables at 80 columns, so give them room, unless $COLUMNS says how wide to be. Neither console
# reads rich markup or emoji codes: every string printed, put in a table or a title is shown as
# it is (a recipe named like a closing tag, a path holding :cat:); styles are given as Text or
# style=, never as markup inside text. What a machine reads (YAML, JSON, CSV, a path) never goes
# through them: see print_json and print_plain.
_SIZED = sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit()


class _Console(Console):
    """rich's console, except where the reader of a pipe has left (`fsc schema | head`):
    rich then exits 1; fsc's boundary (fsc.cli.main) ends quietly with 0 instead."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError("the reader of stdout left")  # the boundary silences stdout


out = _Console(width=None if _SIZED else 160, markup=False, emoji=False)
# progress and logs: stderr; a line of it in a log file or a pipe stays one line (rich would
# break it at 80 columns, in a path or a number), while a terminal folds it at its width
err = _Console(stderr=True, markup=False, emoji=False, soft_wrap=not sys.stderr.isatty())

INVOKED: list[str] = []  # the arguments fsc was run with (fsc.cli.main.main sets them)


def command_line() -> str:
    """The command as it was run, quoted as a shell reads it (a path with a space stays one
    argument), so the command a run records can be pasted back."""
    import shlex

    return shlex.join(["fsc", *INVOKED])

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]

StoreOpt = Annotated[
    Path | None,
    typer.Option("--store", help="Store directory (default: $FSC_STORE or ./store).",
                 show_default=False, metavar="DIR"),
]
MAX_SEED = 2**63 - 1  # torch.Generator.manual_seed takes a signed 64-bit seed
DeviceOpt = Annotated[str, typer.Option(
    "--device", help="auto (CUDA when present), cpu, cuda or cuda:N.")]


class Choice(str, Enum):
    """A fixed set of option values; typer lists them in --help and in the error for a bad one.
    str() and f-strings give the plain value."""

    def __str__(self) -> str:
        return self.value


def choices(name: str, *values: str) -> type[Choice]:
    """A Choice class `name` with one member per value, named by it: `Mode.ar == "ar"`."""
    return Choice(name, [(v, v) for v in values])


Backend = choices("Backend", "auto", "torch", "triton")
Mode = choices("Mode", *MODES)
DType = choices("DType", "bf16", "fp16", "fp32")

BackendOpt = Annotated[
    Backend,
    typer.Option("--backend", help="Kernel backend: auto (Triton on CUDA), torch or triton."),
]


def finite(low: float | None = None, high: float | None = None, *, low_open: bool = False):
    """A typer callback: the option's float must be finite and within [low, high]
    ((low, high] with `low_open`). nan and inf parse as floats; they are never meant."""

    def check(value: float | None) -> float | None:
        if value is None:
            return None
        if not math.isfinite(value):
            raise typer.BadParameter(f"{value} is not a finite number")
        if low is not None and (value <= low if low_open else value < low):
            raise typer.BadParameter(f"{value} must be {'>' if low_open else '>='} {low:g}")
        if high is not None and value > high:
            raise typer.BadParameter(f"{value} must be <= {high:g}")
        return value

    return check


ForceOpt = Annotated[bool, typer.Option(
    "--force", help="Replace the file written if it exists (fsc never replaces one unasked).")]


def output_path(path: Path, option: str, *, force: bool = True) -> Path:
    """A file the command is about to write, given by `option` (see fsc.paths.output_file)."""
    from fsc.paths import output_file

    return output_file(path, f"{option} {path}", force=force)


def output_dir(path: Path, option: str, **how) -> Path:
    """A directory the command is about to create, given by `option` (fsc.paths.output_dir)."""
    from fsc import paths

    return paths.output_dir(path, f"{option} {path}", **how)


def given_options(ctx: typer.Context, names: tuple[str, ...]) -> list[str]:
    """The options among `names` set on the command line (not left at their defaults)."""
    return [p.opts[0] for p in ctx.command.params
            if p.name in names and ctx.get_parameter_source(p.name).name != "DEFAULT"]


def renamed(ctx: typer.Context, old: str, new: str, old_value: Any, new_value: Any, *,
            quiet: bool = False) -> Any:
    """The value of an option renamed from `old` to `new`. The old spelling stays accepted (a
    hidden option) and works as the new one, after one line on stderr (none with `quiet`);
    giving both is an error."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise UsageError(f"{old} is the old spelling of {new}; give {new} only")
    if not quiet:
        say(f"{ctx.command_path}: {old} is deprecated, use {new}")
    return old_value


def print_json(doc: Any) -> None:
    """One JSON document on stdout; non-finite numbers become null."""
    print(json.dumps(plain(doc), indent=2, default=str, allow_nan=False))


def store_option(store: Path | None) -> str:
    """` --store DIR` (quoted for a shell) for a command fsc prints, where --store was given."""
    return f" --store {shlex.quote(str(store))}" if store is not None else ""


def stopped_run(stopped, kept: str, resume: str, as_json: bool) -> int:
    """What a run a stop signal ended (fsc.interrupts.Stopped) kept (`kept`: "3 of 8 points of
    run R are stored") and the command that continues it, on stderr; with --json a document on
    stdout too, as fsc train's (a script reading stdout got nothing). Its exit status."""
    print(f"interrupted: {kept}; continue with:\n  {resume}", file=sys.stderr)
    if as_json:
        print_json({"run_id": stopped.run_id, "interrupted": True,
                    "signal": signal_name(stopped.signum), "stored": stopped.kept,
                    "total": stopped.total, "resume": resume})
    return stopped.exit_code


def print_plain(text: str) -> None:
    """Text a machine reads (a recipe's YAML, the path of a file written) on stdout exactly as
    it is, whatever the terminal: never wrapped at its width, styled or emoji-replaced."""
    sys.stdout.write(text)


def fmt_bytes(n: float | None) -> str:
    """Binary units, stated explicitly (KiB, MiB, GiB; see fsc.text.human_bytes)."""
    return "-" if n is None else human_bytes(n)


def fmt_count(n: int) -> str:
    """n in thousands (K), millions (M), billions (B) or trillions (T) to two decimals; a count
    that would round to 1000.00 of a unit is 1.00 of the next (999,999,999: 1.00B)."""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size * (1 - 5e-6):
            return f"{n / size:.2f}{unit}"
    return str(n)


def check_store(store, write: bool = True):
    """The Store of a --store / $FSC_STORE, which fails before any work when it cannot hold a
    store (never after a checkpoint written, pushed or pulled that it could not record)."""
    from fsc.store import Store

    st = Store(store_dir(store))
    st.check(write=write)
    return st


def torch_threads() -> int:
    """Set torch's CPU threads from $FSC_THREADS (see fsc.loading.set_threads)."""
    from fsc.loading import set_threads

    return set_threads()


def torch_device(text: str) -> str:
    """Validate --device (fsc.loading.torch_device)."""
    from fsc.loading import torch_device as checked

    return checked(text)


def say(text: str) -> None:
    """A notice on stderr, shown as it is (no markup) on one line."""
    err.print(text, markup=False, highlight=False, soft_wrap=True)
