"""Reading results back at the command line: a missing store, JSON of a result whose columns
share a name, `fsc plot --metric` where it means nothing, and the median and figures' folder of
`fsc report`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsc.store import Store
from fsc.train.loop import TrainStep


def _train_run(store: Path, tokens_per_s: list[float]) -> str:
    """A train run of tiny_attn with one logged step per value of `tokens_per_s`."""
    st = Store(store)
    with st.run("train", "fsc train tiny_attn", {"recipe": "tiny_attn"}) as run:
        run.add_rows("train_steps", [
            TrainStep("tiny_attn", "h", "frontier", "passkey", 10 * (i + 1), 3.0 - 0.1 * i, 1e-3,
                      1.0, 256 * (i + 1), tps, float(i + 1), None).row()
            for i, tps in enumerate(tokens_per_s)])
        return run.run_id


@pytest.mark.parametrize("args", [
    ["query", "select 1"],
    ["runs"],
    ["export", "select 1", "--out", "x.csv"],
    ["plot", "latency"],
    ["report"],
])
def test_a_store_that_does_not_exist_is_a_usage_error(args, fsc_main, tmp_path):
    r = fsc_main(*args, "--store", tmp_path / "nowhere")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "no store at" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "nowhere").exists() and not (tmp_path / "x.csv").exists()


def test_json_keeps_every_column_when_two_share_a_name(fsc_main, tmp_path):
    store = tmp_path / "store"
    Store(store).migrate()
    sql = "select 1 as a, 2 as a, 3 as a_1"
    want = {"a": 1, "a_1": 2, "a_1_1": 3}
    r = fsc_main("query", sql, "--json", "--store", store, check=0)
    assert json.loads(r.stdout) == [want]
    fsc_main("export", sql, "--out", tmp_path / "r.json", "--store", store, check=0)
    assert json.loads((tmp_path / "r.json").read_text()) == [want]
    fsc_main("query", sql, "--out", tmp_path / "r.jsonl", "--store", store, check=0)
    assert json.loads((tmp_path / "r.jsonl").read_text()) == want


@pytest.mark.parametrize("kind", ["latency", "loss", "ruler", "quality"])
def test_plot_metric_where_the_figure_has_none_is_a_usage_error(kind, fsc_main, tmp_path):
    r = fsc_main("plot", kind, "--metric", "token_accuracy", "--store", tmp_path / "store")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--metric applies to niah and retrieval only" in r.stderr
    assert not (tmp_path / f"{kind}.png").exists()


def test_report_median_tokens_per_s_of_an_even_count_of_steps(fsc_main, tmp_path):
    store = tmp_path / "store"
    run = _train_run(store, [1000.0, 2000.0, 4000.0, 8000.0])
    out = tmp_path / "r.html"
    fsc_main("report", run, "--store", store, "--out", out, check=0)
    html = out.read_text()
    assert "<td>3,000</td>" in html and "<td>4,000</td>" not in html


def test_markdown_report_keeps_an_existing_figures_folder_unless_forced(fsc_main, tmp_path):
    store = tmp_path / "store"
    run = _train_run(store, [1000.0, 2000.0])
    out, folder = tmp_path / "notes.md", tmp_path / "notes_files"
    folder.mkdir()
    (folder / "01-loss.png").write_bytes(b"mine")
    (folder / "keep.txt").write_text("mine")
    r = fsc_main("report", run, "--store", store, "--out", out)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "notes_files (the figures' folder) exists; pass --force" in r.stderr
    assert (folder / "01-loss.png").read_bytes() == b"mine" and not out.exists()
    (folder / "00-latency.png").write_bytes(b"an earlier report's")
    fsc_main("report", run, "--store", store, "--out", out, "--force", check=0)
    assert sorted(p.name for p in folder.iterdir()) == ["01-loss.png", "keep.txt"]
    assert (folder / "01-loss.png").read_bytes().startswith(b"\x89PNG")  # the report's own
    assert "](notes_files/01-loss.png)" in out.read_text()


def test_a_decimal_is_a_json_number_where_one_holds_it_exactly(cli, tmp_path):
    from fsc.store import Store

    st = Store(tmp_path / "store")
    st.finish_run(st.start_run("profile", "fsc profile", None, {}))
    r = cli("query", "select 2.5 as d, 12345678901234567890.123::decimal(38,3) as big",
            "--json", "--store", tmp_path / "store")
    assert r.code == 0, r.err
    assert json.loads(r.out) == [{"d": 2.5, "big": "12345678901234567890.123"}]
