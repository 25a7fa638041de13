"""Store.run: one session registers, starts and ends a run however its block is left."""

import signal

import pytest

from fsc.errors import StoreError
from fsc.interrupts import Interrupted, StopSignals
from fsc.provenance import environment
from fsc.recipe import load_recipe
from fsc.store import Store


def _run_row(st, run_id):
    return st.query(f"SELECT status, error, env_id FROM runs WHERE run_id = '{run_id}'")[1][0]


def test_finished_with_recipe_environment_and_rows(tmp_path):
    st = Store(tmp_path)
    recipe = load_recipe("tiny_attn")
    with st.run("eval", "fsc eval x", {"a": 1}, recipes=[recipe],
                environment=environment("cpu")) as run:
        run.add_rows("eval_cells", [{"task": "passkey", "length": 16, "accuracy": 1.0}])
    status, error, env_id = _run_row(st, run.run_id)
    assert (status, error) == ("finished", None) and env_id is not None
    assert run.rows == 1
    assert st.query("SELECT count(*) FROM recipes")[1][0][0] == 1
    assert st.query("SELECT count(*) FROM eval_cells")[1][0][0] == 1


def test_end_sets_how_a_normal_exit_reads(tmp_path):
    st = Store(tmp_path)
    with st.run("train", "fsc train", {}) as run:
        run.end("interrupted", "stopped at step 3 by SIGTERM")
    assert _run_row(st, run.run_id)[:2] == ("interrupted", "stopped at step 3 by SIGTERM")


def test_an_exception_marks_failed_and_propagates(tmp_path):
    st = Store(tmp_path)
    with pytest.raises(RuntimeError), st.run("profile", "fsc profile", {}) as run:
        raise RuntimeError("boom")
    assert _run_row(st, run.run_id)[:2] == ("failed", "RuntimeError: boom")


def test_a_stop_signal_marks_interrupted_with_the_callers_note(tmp_path):
    st = Store(tmp_path)
    with pytest.raises(KeyboardInterrupt), st.run("eval", "fsc eval", {}) as run:
        run.interrupt_note = lambda name: f"interrupted ({name}) after 2 cells"
        raise Interrupted(signal.SIGTERM)
    assert _run_row(st, run.run_id)[:2] == ("interrupted", "interrupted (SIGTERM) after 2 cells")


def test_points_are_checked_on_finish(tmp_path):
    st = Store(tmp_path)
    with st.run("profile", "fsc profile", {}) as run:
        run.add_point({"recipe": "tiny_attn", "S": 16, "B": 1, "step_ms": 1.0}, {"step": [1.0]})
    assert run.points and _run_row(st, run.run_id)[0] == "finished"


def test_a_point_missing_at_finish_fails_the_run(tmp_path):
    st = Store(tmp_path)
    with pytest.raises(StoreError, match="missing"), st.run("profile", "fsc profile", {}) as run:
        point = run.add_point({"recipe": "tiny_attn", "S": 16, "B": 1, "step_ms": 1.0},
                              {"step": [1.0]})
        st.query(f"DELETE FROM samples WHERE point_id = {point};"
                 f" DELETE FROM profile_points WHERE point_id = {point}", write=True)
    status, error, _ = _run_row(st, run.run_id)
    assert status == "failed" and str(point) in error


def test_a_signal_during_a_held_write_waits_for_it(tmp_path):
    """With `held` set, a stop signal that comes while a row is written raises once it is
    stored and counted; the run is marked interrupted with that row."""
    st = Store(tmp_path)
    with pytest.raises(Interrupted), StopSignals() as stops, st.run("eval", "fsc eval", {}) as run:
        run.held = stops.held
        run.interrupt_note = lambda name: f"interrupted ({name}) after {run.rows} cells"
        real = st.add_rows

        def signalled(*args):
            signal.raise_signal(signal.SIGTERM)  # arrives mid-write
            real(*args)

        st.add_rows = signalled
        run.add_rows("eval_cells", [{"task": "niah", "length": 16, "accuracy": 1.0}])
    assert run.rows == 1
    assert _run_row(st, run.run_id)[:2] == ("interrupted", "interrupted (SIGTERM) after 1 cells")
    assert st.query("SELECT count(*) FROM eval_cells")[1][0][0] == 1
