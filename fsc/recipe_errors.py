"""A pydantic ValidationError of a recipe, told as one line:
``<file>: <field.path>: <problem> (got <value>); allowed: <what is>``.

What a field allows is read from the schema itself (its type, bounds or description), which the
caller passes in (`root`, the recipe model), so this module knows no schema and imports none.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from fsc.recipe_yaml import MAX_MESSAGE, MAX_SHOWN, one_line, show
from fsc.sections import Bad

_PROBLEMS = {
    "int_type": "expected an integer", "float_type": "expected a number",
    "finite_number": "expected a finite number", "string_type": "expected text",
    "model_type": "expected a mapping", "dict_type": "expected a mapping",
    "list_type": "expected a list", "literal_error": "not an allowed value",
    "missing": "required field is missing", "greater_than_equal": "too small",
    "greater_than": "too small", "less_than_equal": "too large", "less_than": "too large",
    "too_long": "too many entries", "string_too_long": "too long", "string_too_short": "empty",
    "bool_type": "expected true or false",
}


def _at(root: type[BaseModel], loc: tuple) -> tuple[type[BaseModel] | None, FieldInfo | None]:
    """The schema section and field at `loc` under `root` (list indices stay on their list's
    field)."""
    model, field = root, None
    for part in loc:
        if isinstance(part, int):
            continue
        if model is None or part not in model.model_fields:
            return None, None
        field = model.model_fields[part]
        model = next((a for a in _alternatives(field.annotation)
                      if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return model, field


def _alternatives(annotation) -> tuple:
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    return typing.get_args(annotation) if union else (annotation,)


def _num(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _choices(field: FieldInfo | None) -> list[str]:
    """The values a Literal field takes (none for any other field)."""
    if field is None:
        return []
    return [str(v) for a in _alternatives(field.annotation) if typing.get_origin(a) is Literal
            for v in typing.get_args(a)]


def _describe(field: FieldInfo | None) -> str:
    """What a field accepts, from its type and bounds (or its description)."""
    if field is None:
        return ""
    if field.description:
        return field.description
    for a in _alternatives(field.annotation):
        if typing.get_origin(a) is Literal:
            return ", ".join(_choices(field))
        if a is bool:
            return "true or false"
        if isinstance(a, type) and issubclass(a, BaseModel):
            return "a mapping of " + ", ".join(a.model_fields)
    b = {k: getattr(m, k) for m in field.metadata for k in ("ge", "gt", "le") if hasattr(m, k)}
    if "le" not in b:
        return ""
    kind = "an integer" if int in _alternatives(field.annotation) else "a finite number"
    low = f"from {_num(b['ge'])} to" if "ge" in b else f"above {_num(b['gt'])} up to"
    return f"{kind} {low} {_num(b['le'])}"


def _line(loc: tuple, lines: Mapping[tuple, int]) -> int | None:
    """The line of `loc` in the file, or of the deepest section above it that the file holds
    (a missing field: its section's line)."""
    return next((lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in lines), None)


def _message(source: str, loc: tuple, problem: str, got: object = ..., allowed: str = "",
             lines: Mapping[tuple, int] | None = None) -> str:
    where = ".".join(one_line(str(p), MAX_SHOWN) for p in loc)
    text = f"{source}: {where}: {problem}" if where else f"{source}: {problem}"
    if got is not ...:
        text += f" (got {show(got)})"
    text = f"{text}; allowed: {allowed}" if allowed else text
    line = _line(loc, lines or {})
    if line is None:
        return one_line(text)
    at = f" (line {line})"  # kept when the rest is cut to fit
    return one_line(text, MAX_MESSAGE - len(at)) + at


def _homes(key: object, model: type[BaseModel] | None, root: type[BaseModel],
           sections: Mapping[str, type[BaseModel]]) -> str:
    """Where an unknown `key` of `model` is a field: ``(it belongs in mamba)`` for a section's
    key at the top level, ``(a field of mamba)`` for one given in another section."""
    home = [k for k, section in sections.items()
            if section is not model and key in section.model_fields]
    if not home or model is None:
        return ""
    if model is root:
        return f" (it belongs in {' or '.join(home)})"
    return f" (a field of {', '.join(home[:-1]) + ' or ' if len(home) > 1 else ''}{home[-1]})"


def bad_message(source: str, bad: Bad, lines: Mapping[tuple, int] | None = None) -> str:
    """The one-line message of a rule a file's document breaks before validation (`bad.field`
    from the document's top)."""
    return _message(source, bad.field, bad.problem, bad.got, bad.allowed, lines)


def format_error(source: str, err: ValidationError, root: type[BaseModel],
                 sections: Mapping[str, type[BaseModel]],
                 lines: Mapping[tuple, int] | None = None) -> str:
    """The one-line message for `err`, raised validating `root` from the file `source`.
    `sections`: the sections (name -> model) that an unknown key may belong in, named in the
    message (``it belongs in attention``); `lines`: the line of each key in the file
    (fsc.recipe_yaml.parse_yaml_lines), the field's named at the end of the message."""
    # An unknown key first: a misspelt key also reports its correct spelling as missing.
    e = min(err.errors(include_url=False),
            key=lambda e: e["type"] not in ("extra_forbidden", "invalid_key"))
    loc = tuple(e["loc"])
    bad = (e.get("ctx") or {}).get("error")
    if isinstance(bad, Bad):
        where = loc + bad.field
        return _message(source, where, bad.problem, bad.got,
                        bad.allowed or _describe(_at(root, where)[1]), lines)
    if e["type"] in ("extra_forbidden", "invalid_key"):
        model = _at(root, loc[:-1])[0]
        allowed = list(model.model_fields) if model is not None else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        problem = ("unknown key" + (f" (did you mean {close[0]}?)" if close else "")
                   + _homes(loc[-1], model, root, sections))
        return _message(source, loc, problem, allowed=", ".join(allowed), lines=lines)
    problem = _PROBLEMS.get(e["type"]) or e["msg"].removeprefix("Value error, ")
    got = ... if e["type"] == "missing" else e.get("input")
    if e["type"] == "literal_error" and isinstance(got, str):  # a misspelt choice: mambe, elu
        choices = {c.lower(): c for c in _choices(_at(root, loc)[1])}
        close = difflib.get_close_matches(got.lower(), choices, n=1)
        problem += f" (did you mean {choices[close[0]]}?)" if close else ""
    if e["type"] in ("too_long", "string_too_long"):
        problem += f" ({len(got)} {'characters' if isinstance(got, str) else 'entries'})"
    return _message(source, loc, problem, got, _describe(_at(root, loc)[1]), lines)
