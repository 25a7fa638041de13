"""Reading a recipe file: finding it (a path, or the name of a shipped recipe: `resolve_path`,
`shipped_recipes`, `published_recipes`), then reading a regular UTF-8 file of bounded size,
parsed as YAML that a careless or hostile file cannot turn into a hang, a huge allocation or a
misleading value. fsc.recipe validates the document (`load_recipe` there does both steps).

- only regular files, at most MAX_BYTES (a FIFO or /dev/zero would block or never end);
- duplicate keys are refused (YAML silently keeps the last one);
- every key is the text it is written as (`true:` is the key "true", not True, which the schema
  would report as the key 1);
- nesting is bounded, so neither the parser nor the validator can exhaust the stack;
- the document, with aliases expanded, holds at most MAX_VALUES values (a "billion laughs" file of
  a few hundred bytes otherwise stands for 10⁹ values);
- every message is one line of printable text, capped in length (`one_line`, `show`).
"""

from __future__ import annotations

import difflib
import os
import re
import reprlib
import stat
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from fsc.errors import RecipeError

MAX_BYTES = 256 * 1024  # the largest shipped recipe is under 1 KiB
MAX_DEPTH = 16  # a recipe nests 4 levels (layers.attention.positions.0)
MAX_VALUES = 4096  # a 1024-layer recipe with every layer listed in positions needs ~1,100
MAX_SHOWN = 80  # characters of a value quoted in an error
MAX_SOURCE = 160  # characters of a file name in an error (its end: the file, not the folders)
MAX_MESSAGE = 400  # characters of a whole error (the CLI prints at most as many)

_MERGE = "tag:yaml.org,2002:merge"
_INT = "tag:yaml.org,2002:int"
_STR = "tag:yaml.org,2002:str"
_LEADING_ZERO = re.compile(r"[-+]?0[0-9_]+")  # YAML 1.1 reads 0100 as octal 64
_BASE_60 = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+")  # and 1:30 as 90
_repr = reprlib.Repr()  # bounded: a huge value costs no more to show than a small one
_repr.maxlevel, _repr.maxdict, _repr.maxlist = 2, 4, 6
_repr.maxstring = _repr.maxother = MAX_SHOWN


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` with every non-printable character escaped (newlines, ANSI escapes, bidi
    overrides), cut to `limit` characters with an ellipsis."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def source_name(path: object) -> str:
    """A file name for an error: escaped, and its last MAX_SOURCE characters when longer."""
    text = one_line(str(path), 10 * MAX_SOURCE)
    return text if len(text) <= MAX_SOURCE else "…" + text[1 - MAX_SOURCE:]


def show(value: object) -> str:
    """A value as the user wrote it in YAML (true, null, .inf, 'text'), bounded in length."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value != value:
        return ".nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    return one_line(_repr.repr(value), MAX_SHOWN)


class _Refused(Exception):
    """Well-formed YAML that is not an acceptable recipe document."""

    def __init__(self, where: str, problem: str, line: int | None = None):
        super().__init__(f"{where}: {problem}" + (f" (line {line})" if line else ""))
        self.problem = problem


class _Loader(yaml.SafeLoader):
    """yaml.SafeLoader (the pure-Python composer, which can be bounded) that stops composing
    past MAX_DEPTH levels or MAX_VALUES nodes, and reads two plain scalars as YAML 1.2 does:
    1e-6 is a number (YAML 1.1 reads it as text) and 2024-05-01 is text (YAML 1.1: a date).
    (Integers 1.1 reads as other than they look are refused by `_decimal`; 6_4, 0x40 and yes
    stay 1.1's: docs/models.md.)"""

    def __init__(self, text: str):
        super().__init__(text)
        self.depth = self.nodes = 0

    def compose_node(self, parent, index):
        self.nodes += 1
        line = self.peek_event().start_mark.line + 1
        if self.depth >= MAX_DEPTH:
            raise _Refused(f"line {line}", f"nested deeper than {MAX_DEPTH} levels; allowed: "
                           f"at most {MAX_DEPTH}")
        if self.nodes > MAX_VALUES:
            raise _Refused(f"line {line}", f"more than {MAX_VALUES} values; allowed: at most "
                           f"{MAX_VALUES}")
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError):  # 10^5000 as an int, an explicit !!timestamp 2001-13-45
            kind = node.tag.rsplit(":", 1)[-1]
            raise _Refused(f"line {node.start_mark.line + 1}",
                           f"cannot be read as {kind} (got {show(node.value)})") from None


_Loader.add_implicit_resolver(  # copies SafeLoader's resolvers first: SafeLoader is unchanged
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))
for _resolvers in _Loader.yaml_implicit_resolvers.values():
    _resolvers[:] = [r for r in _resolvers if r[0] != "tag:yaml.org,2002:timestamp"]


def _check(node, path: tuple, depth: int, seen: dict) -> tuple[int, int]:
    """(values, height) of the document under `node` with aliases expanded, memoised per node
    (an alias is the same node object, so a bomb costs one visit per distinct node). Refuses
    duplicate keys, cycles, documents deeper than MAX_DEPTH or larger than MAX_VALUES."""
    where = ".".join(path) or "document"
    if id(node) in seen:
        if seen[id(node)] is None:
            raise _Refused(where, "an alias refers to a section that contains it; allowed: "
                           "aliases to finished sections")
        size, height = seen[id(node)]
    else:
        if depth > MAX_DEPTH:
            raise _Refused(where, f"nested deeper than {MAX_DEPTH} levels (through aliases); "
                           f"allowed: at most {MAX_DEPTH}")
        seen[id(node)] = None
        children = []
        if isinstance(node, ScalarNode) and node.tag == _INT:
            _decimal(node.value, where, node.start_mark.line + 1)
        if isinstance(node, SequenceNode):
            children = [(v, (*path, str(i))) for i, v in enumerate(node.value)]
        elif isinstance(node, MappingNode):
            lines: dict[tuple, int] = {}
            for k, v in node.value:
                name = one_line(str(k.value), MAX_SHOWN) if isinstance(k, ScalarNode) else "?"
                if isinstance(k, ScalarNode) and k.tag not in (_STR, _MERGE):
                    k.tag = _STR  # a key as written: true:, 5:, ~: reached the schema as 1, 5, None
                if isinstance(k, ScalarNode) and k.tag != _MERGE:
                    line = k.start_mark.line + 1
                    if (k.tag, k.value) in lines:
                        first = lines[k.tag, k.value]
                        at = f"lines {first} and {line}" if first != line else f"line {line}, twice"
                        raise _Refused(".".join((*path, name)),
                                       f"duplicate key at {at}; allowed: each key once")
                    lines[k.tag, k.value] = line
                children += [(k, (*path, name)), (v, (*path, name))]
        size, height = 1, 0
        for child, child_path in children:
            s, h = _check(child, child_path, depth + 1, seen)
            size, height = size + s, max(height, h + 1)
            if size > MAX_VALUES:
                break
        seen[id(node)] = (size, height)
    if depth + height > MAX_DEPTH:
        raise _Refused(where, f"nested deeper than {MAX_DEPTH} levels (through aliases); "
                       f"allowed: at most {MAX_DEPTH}")
    if size > MAX_VALUES:
        raise _Refused(where, f"expands to more than {MAX_VALUES} values (through aliases); "
                       f"allowed: at most {MAX_VALUES}")
    return size, height


def _decimal(text: str, where: str, line: int) -> None:
    """Refuse the integer forms YAML 1.1 reads as something other than the decimal they look
    like: a leading zero (octal) and colons (base 60); `line` is where the value is, said as
    every recipe error says it."""
    if _LEADING_ZERO.fullmatch(text):
        meant = text.lstrip("+-").replace("_", "").lstrip("0") or "0"
        raise _Refused(where, f"{text} has a leading zero (YAML reads it as the octal number "
                       f"{int(yaml.safe_load(text))}); allowed: a decimal integer such as {meant}",
                       line)
    if _BASE_60.fullmatch(text):
        raise _Refused(where, f"{text} is a base-60 number to YAML "
                       f"({int(yaml.safe_load(text))}); allowed: a decimal integer", line)


def _document(text: str) -> tuple[object, dict[tuple, int]]:
    """The one document in `text` (None when there is none), composed by _Loader and checked by
    `_check` before it is built, and the line of each of its keys and list items (`_lines`);
    _Refused or yaml.YAMLError otherwise."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        _check(node, (), 0, {})
        data = loader.construct_document(node)  # merges (<<) are flattened into the mappings
        return data, _lines(node, (), {})
    finally:
        loader.dispose()


def _lines(node, path: tuple, out: dict[tuple, int]) -> dict[tuple, int]:
    """1-based line of each key (`("attention", "n_heads")`) and list item (`(..., 0)`) under
    `node`, as the schema's error locations name them (a key given beside a merge `<<` that
    also holds it: the one given, which is the one read). `_check` bounded the document,
    aliases expanded."""
    if isinstance(node, MappingNode):
        children = [((*path, str(k.value)), k, v) for k, v in node.value
                    if isinstance(k, ScalarNode)]
    elif isinstance(node, SequenceNode):
        children = [((*path, i), v, v) for i, v in enumerate(node.value)]
    else:
        return out
    for where, mark, value in children:
        out[where] = mark.start_mark.line + 1
        _lines(value, where, out)
    return out


def parse_yaml(text: str, source: str) -> object:
    """The document in `text`, or RecipeError naming `source`, the place and the problem."""
    return parse_yaml_lines(text, source)[0]


def _place(mark, text: str) -> str:
    """A YAML error's place in words: its line and column, or the end of the file (PyYAML
    names the line after the last, which a two-line file has not)."""
    if mark.line >= len(text.splitlines()):
        return "the end of the file"
    return f"line {mark.line + 1}, column {mark.column + 1}"


def parse_yaml_lines(text: str, source: str) -> tuple[object, dict[tuple, int]]:
    """`parse_yaml`'s document and the line of each key and list item in it (`_lines`), for
    an error of the schema to name."""
    source = source_name(source)
    try:
        return _document(text)
    except _Refused as e:
        raise RecipeError(one_line(f"{source}: {e}")) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        at = f" at {_place(mark, text)}" if mark else ""
        context = e.context
        if context and e.context_mark and e.problem_mark and (
                e.context_mark.line != e.problem_mark.line):  # where the unclosed thing began
            context += f" (begun at {_place(e.context_mark, text)})"
        problem = ", ".join(p for p in (context, e.problem) if p) or "malformed"
        if "'\\t'" in problem:  # PyYAML's words for a tab where indentation or a token goes
            problem += "; allowed: spaces (YAML indents with spaces, never tabs)"
        raise RecipeError(one_line(f"{source}: YAML syntax error{at}: {problem}")) from None
    except yaml.YAMLError as e:  # ReaderError: a character YAML does not allow (NUL, ...)
        raise RecipeError(one_line(f"{source}: not YAML text: {str(e).splitlines()[0]}")) from None
    except RecursionError:
        raise RecipeError(f"{source}: nested too deeply to read") from None


def parse_value(text: str, source: str) -> object:
    """A value given on the command line (`--set KEY=VALUE`), read as a recipe file reads it:
    1e-6 is a number, 010 and 1:30 are refused (not read as 8 and 90); text that is not YAML
    (``[1``) is that text, for the schema to refuse by the field's type."""
    try:
        return _document(text)[0]
    except _Refused as e:
        raise RecipeError(one_line(f"{source}: {e.problem}")) from None
    except (yaml.YAMLError, RecursionError):
        return text.strip()


def read_text(path: Path) -> str:
    """The text of the regular file at `path`: at most MAX_BYTES of UTF-8. The file type is
    checked before opening, and the open does not block, so a FIFO or a device is refused at
    once rather than waited on or read forever."""
    where = source_name(path)
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise RecipeError(f"{where}: is a directory; allowed: a recipe file")
        if not stat.S_ISREG(st.st_mode):
            raise RecipeError(f"{where}: is not a regular file (a FIFO, device or socket); "
                              "allowed: a recipe file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())  # the file opened, not the one stat()ed a moment ago
            data = f.read(MAX_BYTES + 1) if stat.S_ISREG(st.st_mode) else None
    except (OSError, ValueError) as e:
        raise RecipeError(one_line(f"{where}: cannot read ({getattr(e, 'strerror', None) or e})")) \
            from None
    if data is None:
        raise RecipeError(f"{where}: is not a regular file; allowed: a recipe file")
    if len(data) > MAX_BYTES:
        raise RecipeError(f"{where}: is larger than {MAX_BYTES // 1024} KiB; allowed: a recipe "
                          f"file of at most {MAX_BYTES // 1024} KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecipeError(f"{where}: is not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                          f"{e.start})") from None


def shipped_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "recipes"


def resolve_path(ref: str | Path) -> Path:
    """A recipe path, or the name of a shipped recipe (``tiny_hybrid``, or a published model's
    ``published/Llama-3.1-8B``, whose dots are not a file suffix). A name is relative and stays
    in recipes/: ``/home/me/x``, ``./x`` and ``../x`` are paths, never read as ``x.yaml``
    files."""
    p = Path(ref)
    try:
        if p.exists():
            return p
        shipped = shipped_dir() / f"{ref}.yaml"
        if (p.suffix not in (".yaml", ".yml") and not p.is_absolute() and ".." not in p.parts
                and not str(ref).startswith(("./", "~")) and shipped.exists()):
            return shipped
    except (OSError, ValueError):  # a name too long for the OS, or with a NUL byte
        pass
    close = _close_to(str(ref))
    if "/" in str(ref) and p.suffix not in (".yaml", ".yml"):  # a folder's path, by its look
        raise RecipeError(f"{source_name(ref)}: no such checkpoint, training directory or recipe "
                          "file" + (f" (did you mean {close}?)" if close else ""))
    raise RecipeError(f"{source_name(ref)}: no such recipe file (and no shipped recipe of that "
                      f"name; {f'did you mean {close}?' if close else 'see `fsc recipes`'})")


def _close_to(ref: str) -> str | None:
    """What a recipe reference that names nothing was likely meant as: the file with a YAML
    suffix beside it (its name), or the shipped recipe whose name is closest (case aside), if
    any is."""
    try:
        beside = next((f"{ref}{s}" for s in (".yaml", ".yml") if Path(f"{ref}{s}").is_file()),
                      None)
    except (OSError, ValueError):
        return None
    if beside is not None:  # as it was given: ../recipes/x.yaml, not x.yaml
        return one_line(beside, 4 * MAX_SHOWN)
    names = {name.lower(): name
             for name in {**shipped_recipes(), **experiment_recipes(), **published_recipes()}}
    stem = ref.removesuffix(".yaml").removesuffix(".yml").lower()
    close = difflib.get_close_matches(stem, names, n=1)
    return names[close[0]] if close else None


def shipped_recipes() -> dict[str, Path]:
    return {p.stem: p for p in sorted(shipped_dir().glob("*.yaml"))}


EXPERIMENTS = "experiments"  # recipes/experiments/NAME.yaml: a command's ``experiments/NAME``


def experiment_recipes() -> dict[str, Path]:
    """The variants of the shipped recipes that docs/benchmarks.md tried, named as commands
    take them: ``experiments/NAME``."""
    folder = shipped_dir() / EXPERIMENTS
    return {f"{EXPERIMENTS}/{p.stem}": p for p in sorted(folder.glob("*.yaml"))}


PUBLISHED = "published"  # recipes/published/NAME.yaml: a command's ``published/NAME``


def published_recipes() -> dict[str, Path]:
    """The recipes `fsc import` makes of the published configs in recipes/published, named
    as commands take them: ``published/NAME``."""
    return {f"{PUBLISHED}/{p.stem}": p for p in sorted((shipped_dir() / PUBLISHED).glob("*.yaml"))}
