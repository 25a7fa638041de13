"""A new eval task is one module and one registration, its own columns included: a toy task
registered in TASKS is scored, its own column reaches the store (table and view) with no
migration, and a column it does not declare is refused before anything is stored."""

import io

import pytest
from rich.console import Console

from fsc.cli import eval_render
from fsc.cli.eval_options import Task as TaskChoice
from fsc.errors import UsageError
from fsc.eval import tasks
from fsc.eval.request import EvalRequest
from fsc.scale import ExecutorSettings, Watch
from fsc.scale.evaluation import evaluate
from fsc.store import Store
from fsc.store.schema import Column

SHARPNESS = Column("sharpness", "DOUBLE", "toy: how sharp the answers were.")
BLUNTNESS = Column("bluntness", "DOUBLE", "toy: not measured.")


def _check(grid, tokenizer) -> None:
    if max(grid.lengths) > 64:
        raise UsageError("--lengths: toy prompts are at most 64 tokens")


def _measure(model, tokenizer, grid, lengths, device):
    for n in lengths:
        yield {"task": "toy", "length": n, "n": 1, "accuracy": 1.0, "sharpness": n / 64}


def _register(monkeypatch, columns) -> None:
    toy = tasks.Task("toy", _check, _measure, lambda g: 1, columns=columns)
    monkeypatch.setitem(tasks.TASKS, "toy", toy)


def _run(tmp_path, lengths=(16, 32)):
    st = Store(tmp_path / "store")
    request = EvalRequest("tiny_attn", task="toy", lengths=lengths, samples=1, batch=1)
    return st, evaluate(request, ExecutorSettings(), st, "fsc eval tiny_attn --task toy", Watch())


def test_a_registered_task_stores_its_own_column_without_a_migration(tmp_path, monkeypatch):
    _register(monkeypatch, (SHARPNESS, BLUNTNESS))
    st, result = _run(tmp_path)
    assert [c.get("sharpness") for c in result.cells] == [0.25, 0.5]
    # every cell's row has each of its task's columns, None where it measured none
    assert [c.columns()["bluntness"] for c in result.cells] == [None, None]
    _, rows = st.query("SELECT task, length, accuracy, sharpness FROM evaluation ORDER BY length")
    assert rows == [("toy", 16, 1.0, 0.25), ("toy", 32, 1.0, 0.5)]
    assert SHARPNESS in tasks.declared_columns()  # what `fsc schema` describes
    console = Console(file=io.StringIO(), width=120)  # and a table without code of its own
    monkeypatch.setattr(eval_render, "out", console)
    eval_render.render(result.cells, "toy", "tiny_attn", result.run_id)
    text = console.file.getvalue()
    assert "toy accuracy by length" in text and "1.00" in text and "16" in text


def test_a_task_is_checked_before_its_model_is_loaded(tmp_path, monkeypatch):
    _register(monkeypatch, (SHARPNESS,))
    with pytest.raises(UsageError, match="at most 64"):
        _run(tmp_path, lengths=(128,))
    assert not (tmp_path / "store").exists()


def test_a_column_the_task_does_not_declare_is_refused(tmp_path, monkeypatch):
    _register(monkeypatch, ())
    with pytest.raises(ValueError, match="sharpness"):
        _run(tmp_path)
    _, rows = Store(tmp_path / "store").query("SELECT count(*) FROM eval_cells")
    assert rows == [(0,)]


def test_the_command_line_offers_every_registered_task():
    """`fsc eval --task` lists its choices without importing torch: keep it with TASKS."""
    assert {t.value for t in TaskChoice} == {*tasks.TASKS, "harness"}


def test_every_registered_tasks_columns_are_the_ones_fsc_schema_describes():
    from fsc.eval.columns import ALL

    assert set(tasks.declared_columns()) == set(ALL)
