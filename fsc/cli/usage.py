"""A click usage error (a bad option value, an unknown option) as fsc's one line: the problem,
the value given, where to read more, in the same words whichever typer and click run it."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import typer


def _given(argv: list[str], opts: list[str]) -> str | None:
    """The value the command line gave an option (`--S 4k` or `--S=4k`), if it is there: its
    last, where it is given twice (the one click takes)."""
    given = None
    for i, arg in enumerate(argv):
        for opt in opts:
            if arg == opt and i + 1 < len(argv):
                given = argv[i + 1]
            elif arg.startswith(opt + "="):
                given = arg[len(opt) + 1 :]
    return given


def _bounds(param) -> tuple[float | None, float | None]:
    """An option's declared min and max: on the option itself in newer typers, on its click
    range type in older ones."""
    for holder in (param, getattr(param, "type", None)):
        low, high = getattr(holder, "min", None), getattr(holder, "max", None)
        if low is not None or high is not None:
            return low, high
    return None, None


def _out_of_range(param, value: str | None) -> str | None:
    """fsc's own words for a number outside an option's bounds (each typer and click version
    words it differently), in the form the `between` and `finite` callbacks use."""
    low, high = _bounds(param)
    if value is None or (low is None and high is None):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if (low is not None and number < low) or (high is not None and number > high):
        if low is not None and high is not None:
            return f"{value} must be between {low} and {high}"
        return f"{value} must be >= {low}" if low is not None else f"{value} must be <= {high}"
    return None


# how typers word a value that is not a number (pydantic's words in newer ones, click's in older),
# and fsc's one wording for each
NOT_A_NUMBER = (("Input should be a valid integer", "is not a whole number"),
                ("is not a valid integer", "is not a whole number"),
                ("Input should be a valid number", "is not a number"),
                ("is not a valid float", "is not a number"))


def _not_a_number(msg: str, param, value: str | None) -> str | None:
    """fsc's words for an option's value that does not parse as its number, or None."""
    if value is None or param is None:
        return None
    said = next((words for marker, words in NOT_A_NUMBER if marker in msg), None)
    return None if said is None else f"Invalid value for '{param.opts[0]}': {value!r} {said}"


def usage_line(e, argv: list[str]) -> str:
    """A click usage error as one line: the problem, the value given, where to read more."""
    msg = " ".join(e.format_message().replace("Value error, ", "").split())
    if len((text := getattr(e, "option_name", None) or "").split()) > 1:  # text, not an option
        msg = (f"{' '.join(text.split())[:60]!r} was read as an option: text that begins with "
               "'-' goes after `--`, the options before it (e.g. `-- \"-- a note ...\"`)")
    param = getattr(e, "param", None)
    value = _given(argv, list(getattr(param, "opts", []))) if param is not None else None
    if (bound := _out_of_range(param, value)) is not None:
        msg = f"Invalid value for '{param.opts[0]}': {bound}"
    elif (number := _not_a_number(msg, param, value)) is not None:
        msg = number
    elif value is not None and repr(value) not in msg and f" {value} " not in f" {msg} ":
        msg = f"{msg} (got {value!r})"
    ctx = getattr(e, "ctx", None)
    return msg.rstrip(".") + (f" (see `{ctx.command_path} --help`)" if ctx is not None else "")


def shape_options(cmd) -> None:
    """fsc's options over typer's, for `cmd` and every command below it: each option's value
    named in capitals (`name_value`), and an empty path refused, an option's or an argument's
    (`refuse_empty_path`)."""
    for sub in getattr(cmd, "commands", {}).values():
        shape_options(sub)
    for p in cmd.params:
        if p.param_type_name == "option" and not p.is_flag:
            name_value(p)
        if p.param_type_name == "argument":
            bracket_argument(p)
        if _takes_path(p):
            refuse_empty_path(p)


def name_value(p) -> None:
    """Name an option's value in capitals after the option (`--seed SEED`), as argparse does,
    where the option names none itself: typer writes the Python type (`<int range>`,
    `<list[str]>`), which reads as code, and older typers other words again. A choice keeps
    its list of values (`<diffusion|ar>`)."""
    desc = getattr(p, "type_descriptor", None)  # newer typers' (their options have no click type)
    choice = desc.is_choice if desc is not None else _is_a(p.type, "Choice")
    if p.metavar is None and not choice:
        p.metavar = max(p.opts, key=len).lstrip("-").replace("-", "_").upper()


def bracket_argument(p) -> None:
    """An optional argument's name in brackets, and dots after one taking several, in the usage
    line (`fsc report [OPTIONS] [RUN]...`): newer typers add them to its metavar themselves,
    older ones write the metavar as it is (`RUN`, which reads as required)."""
    if p.metavar is None or hasattr(p, "_usage_display_name") or p.required:
        return
    p.metavar = f"[{p.metavar}]" + ("..." if p.nargs != 1 else "")


def _takes_path(p) -> bool:
    """Whether an option's value is a path (newer typers say so in its annotation, older
    ones by its click type; an option read as text names its value DIR or FILE)."""
    if p.metavar in ("DIR", "FILE"):
        return True
    desc = getattr(p, "type_descriptor", None)
    if desc is not None:
        return Path in (desc.annotation, *get_args(desc.annotation))
    return _is_a(p.type, "Path")


def _is_a(kind, name: str) -> bool:
    """Whether an older typer's click type is click's `name` (or typer's subclass of it)."""
    return any(k.__name__ == name for k in type(kind).__mro__)


def refuse_empty_path(p) -> None:
    """An empty path (`--out "$DIR"` of an unset DIR) as a usage error, where it read as the
    current folder: `fsc train --out ""` trained into it, `--store ""` kept its store there."""
    convert = p.process_value

    def process_value(ctx, value):
        given = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(v, str) and not v.strip() for v in given):
            hint = (", or leave --store out for $FSC_STORE or ./store" if p.name == "store"
                    else "")
            raise typer.BadParameter(f"empty; give a path{hint}", ctx=ctx, param=p)
        return convert(ctx, value)

    p.process_value = process_value
