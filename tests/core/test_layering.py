"""Imports go one way: base → registry/recipe → cost model → kernels/ops → model →
checkpoint/store/data → hub/imports → profile/decode/verify/objective → eval → train →
results/scale → cli (LAYERS below; docs/architecture.md draws it). Every import of an fsc
module, at module level or inside a function, is read from the source (AST) and must point at
its own layer or a lower one."""

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
LAYERS = [  # lowest first; a module is in the layer of the longest prefix that names it
    ["fsc.errors", "fsc.dtypes", "fsc.sections", "fsc.paths", "fsc.jsonsafe", "fsc.blocks", "fsc.recipe_yaml", "fsc.recipe_errors", "fsc.corpora",
     "fsc.hub.reach",  # whether the Hub answers: it imports no fsc module, and data reads it
     "fsc"],
    ["fsc.mixers", "fsc.recipe"],
    ["fsc.costmodel"],
    ["fsc.kernels", "fsc.ops"],
    ["fsc.model"],
    ["fsc.tokenizer", "fsc.checkpoint", "fsc.store", "fsc.provenance",
     "fsc.data"],  # the samples training and evaluation both draw (tasks, --data sources)
    ["fsc.hub", "fsc.imports"],  # the Hub carries checkpoint directories; they never reach it
    ["fsc.source", "fsc.verify_report", "fsc.loading", "fsc.sweep", "fsc.sweep_results", "fsc.profile", "fsc.decode", "fsc.graphs", "fsc.verify",
     "fsc.objective"],  # the denoising bound: training's loss, and eval's loss task
    ["fsc.eval"],
    ["fsc.train"],  # training evaluates in the loop (fsc.eval.retrieval.quick_eval)
    ["fsc.results", "fsc.scale", "fsc.harness"],  # the harness model runs fsc inside lm-eval
    ["fsc.cli", "fsc.__main__"],
]


def layer(module: str) -> int:
    best = None
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (
                    best is None or len(name) > len(best[1])):
                best = (i, name)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[0]


def modules():
    for path in sorted((ROOT / "fsc").rglob("*.py")) + sorted((ROOT / "kernels").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[0] == "kernels":
            parts = ["fsc", *parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a source file, parsed once a process (three checks read every module)."""
    return tuple(ast.walk(ast.parse(path.read_text())))


def imports(path: Path):
    for node in _nodes(path):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def test_imports_point_down():
    wrong = []
    for module, path in modules():
        mine = layer(module)
        for line, name in imports(path):
            if (name == "fsc" or name.startswith("fsc.")) and layer(name) > mine:
                wrong.append(f"{path.relative_to(ROOT)}:{line} ({module}) imports {name}")
    assert not wrong, "imports that reach up a layer:\n" + "\n".join(wrong)


def test_the_check_sees_a_wrong_import(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from fsc.cli.common import out\n")
    assert [name for _, name in imports(bad)] == ["fsc.cli.common"]
    assert layer("fsc.cli.common") > layer("fsc.recipe")
    assert layer("fsc.hub.push") > layer("fsc.checkpoint.io")


def _loaded_after(statement: str, watched: tuple[str, ...]) -> list[str]:
    """Which of `watched` a fresh interpreter has imported after running `statement`."""
    code = f"import sys; {statement}; print([m for m in {watched!r} if m in sys.modules])"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return ast.literal_eval(res.stdout.strip())


@pytest.mark.parametrize("statement, watched", [
    # the GPU check reads the device table: no torch, pydantic or yaml
    ("import fsc.costmodel", ("torch", "triton", "duckdb", "pydantic", "yaml")),
    ("import fsc.costmodel, fsc.mixers, fsc.recipe, fsc.kernels; fsc.kernels.op_folders()",
     ("torch", "triton", "duckdb")),
    # fsc schema describes the eval tasks' and the harness's own columns
    ("import fsc.eval.columns, fsc.harness", ("torch", "lm_eval")),
    # every command is registered at start-up; plotting loads matplotlib only when it runs
    ("import fsc.cli.main", ("torch", "matplotlib", "duckdb", "transformers")),
    # checkpoints are saved, loaded and recorded without the Hub's client
    pytest.param("import fsc.checkpoint.io, fsc.checkpoint.registry", ("huggingface_hub",),
                 marks=pytest.mark.slow),  # imports torch: 3 s of a fresh interpreter
    # a published config read as a recipe (fsc estimate hf:...) needs neither
    ("import fsc.source", ("torch", "transformers")),
    # fsc profile and fsc eval check the executor options and the sweep before torch
    ("import fsc.scale, fsc.sweep", ("torch", "duckdb")),
    # and fsc eval the options its task takes (a bad one is an error in a second, not three)
    ("import fsc.eval.request; from fsc.cli.main import main; "
     "main(['eval', 'tiny_attn', '--task', 'loss', '--policy', 'random'])", ("torch",)),
    # the mixers' fla recurrences import fla (optional, slow to import) on their first call
    pytest.param("import fsc.model.gla, fsc.model.gated_delta, fsc.model.linear, fsc.model.mamba",
                 ("fla",), marks=pytest.mark.slow),  # likewise
])
def test_light_modules_stay_light(statement, watched):
    assert _loaded_after(statement, watched) == []


def test_imports_inside_functions_only_in_the_cli():
    """The library imports what it uses at the top; only fsc/cli/ defers imports, so that
    `fsc --help` and option checks start fast."""
    deferred = []
    for module, path in modules():
        if module.startswith("fsc.cli"):
            continue
        for fn in _nodes(path):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                deferred += [f"{path.relative_to(ROOT)}:{node.lineno} in {fn.name}"
                             for node in ast.walk(fn)
                             if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert not deferred, "imports inside functions outside fsc/cli:\n" + "\n".join(deferred)


def test_no_cli_module_grows_past_250_lines():
    """The command line parses, calls the library and renders: a module past 250 lines is
    doing the library's work."""
    cli = Path(__file__).resolve().parents[2] / "fsc" / "cli"
    long = {p.name: n for p in cli.glob("*.py") if (n := len(p.read_text().splitlines())) > 250}
    assert not long, long


def _graph() -> dict[str, set[str]]:
    """Module -> the fsc modules it imports, type-only imports included (a `from fsc.x import
    y` names fsc.x.y when that is a module, else fsc.x)."""
    known = {m for m, _ in modules()}
    graph: dict[str, set[str]] = {}
    for module, path in modules():
        edges = graph.setdefault(module, set())
        for node in _nodes(path):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" for a in node.names]
                edges.update(n for n in names if n in known)
                if not any(n in known for n in names) and node.module in known:
                    edges.add(node.module)
            elif isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in known)
        edges.discard(module)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, on, stack, found = {}, {}, set(), [], []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles_not_even_type_only():
    assert _circles(_graph()) == []
    assert _circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]  # the check bites
