"""A stored row has one record and one encoder: a profile point (PointResult.columns) and an
eval cell (EvalCell.columns) cross a worker's JSON-lines file and the store unchanged."""

import json
from datetime import UTC, datetime

from fsc.eval.columns import LOSS
from fsc.eval.grid import EvalCell
from fsc.scale import work
from fsc.store import Store
from fsc.sweep_results import PointResult

T0 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def _point() -> PointResult:
    return PointResult("tiny_hybrid", "0123abcd", ["mamba", "attention"], 16, 1, 4, 4, "fp32",
                       "auto", "cpu", step_ms=1.5, fold_ms=2.5, tokens_per_s=9.0,
                       mixer_backends={"mamba": "torch", "attention": "torch"},
                       started_at=T0, ended_at=T0, samples={"step": [1.5], "fold": [2.5]})


def test_a_point_crosses_a_json_lines_file_whole():
    r = _point()
    line = json.dumps(work.to_row(r), default=str)  # what a Slurm task appends
    assert PointResult.from_columns(json.loads(line)) == r


def test_a_stored_point_reads_back_as_the_same_record(tmp_path):
    r = _point()
    st = Store(tmp_path)
    with st.run("profile", "fsc profile", {}) as run:
        run.add_point(r.columns(), r.samples)
    cols, [values] = st.query("SELECT * FROM profile_points")
    back = PointResult.from_columns(dict(zip(cols, values, strict=True)))
    assert back.mixer_backends == r.mixer_backends and back.key() == r.key()
    assert back.started_at == T0.replace(tzinfo=None)  # stored as naive UTC


def test_a_cell_row_holds_the_loss_columns_only_in_a_loss_cell(tmp_path):
    facts = dict(checkpoint="ckpt", recipe="tiny_attn", recipe_hash="0123abcd",
                 mode="diffusion", G=4, K=4, train_length=64)
    niah = EvalCell(**facts, task="niah", length=128, depth=0.5, length_ratio=2.0, n=2,
                    correct=1, accuracy=0.5, token_accuracy=0.75, seconds=0.1)
    loss = EvalCell(**facts, task="loss", length=64, length_ratio=1.0, n=4, loss=5.5,
                    own={"loss_se": 0.1, "distinct_sequences": 6})
    own = {c.name for c in LOSS}
    assert not own & set(niah.columns())
    assert {"loss_se", "distinct_sequences"} <= set(loss.columns()) <= set(niah.columns()) | own
    assert loss.get("loss_se") == 0.1 and niah.get("loss_se") is None and niah.get("depth") == 0.5
    for cell in (niah, loss):  # what a worker sends is read back as the same cell
        assert EvalCell.from_row(json.loads(json.dumps(cell.columns()))) == cell
    st = Store(tmp_path)
    with st.run("eval", "fsc eval", {}) as run:
        run.add_rows("eval_cells", [niah.columns(), loss.columns()], LOSS)
    _, rows = st.query("SELECT task, depth, accuracy, loss, loss_se FROM eval_cells ORDER BY task")
    assert rows == [("loss", None, None, 5.5, 0.1), ("niah", 0.5, 0.5, None, None)]
