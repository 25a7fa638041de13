"""A run resumes from any directory: `fsc eval` and `fsc profile` record the checkpoint, recipe
file, scorer and data they read by their absolute paths (they kept them as typed, so a resume
from another directory could not find `ck` or `my.yaml`)."""

import duckdb
from stops import stop_at_second_length

from fsc.store import Store


def test_an_eval_of_a_relative_checkpoint_resumes_from_another_directory(
        fsc_main, tmp_path, monkeypatch, save_tiny):
    from fsc.eval import loss

    (tmp_path / "work").mkdir()
    save_tiny("work/ck")
    monkeypatch.chdir(tmp_path / "work")
    store = tmp_path / "store"
    real = stop_at_second_length(monkeypatch)
    res = fsc_main("eval", "ck", "--task", "loss", "--data", "shakespeare", "--lengths",
                   "64,128", "--samples", "2", "--store", store)
    assert res.returncode == 143
    run = res.stderr.split(" of run ")[1].split()[0]
    _, [(ck, source)] = Store(store).query(
        "select config->>'checkpoint', config->'request'->>'source' from runs")
    assert ck == source == str(tmp_path / "work" / "ck")
    monkeypatch.setattr(loss, "heldout_loss", real)
    monkeypatch.chdir(tmp_path)  # elsewhere: `ck` is no longer here
    again = fsc_main("eval", "--resume", run, "--store", store, check=0)
    assert f"run {run} held 1 cell; 1 scored now" in again.stderr


def test_a_profile_of_a_recipe_file_resumes_from_another_directory(fsc_main, tmp_path,
                                                                   monkeypatch):
    from fsc.recipe import load_recipe

    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "my.yaml").write_text(load_recipe("tiny_attn").to_yaml())
    monkeypatch.chdir(tmp_path / "work")
    store = tmp_path / "store"
    fsc_main("profile", "-r", "my.yaml", "--S", "16,32", "--B", "1", "--repeats", "1",
             "--warmup", "0", "--store", store, check=0)
    with duckdb.connect(str(Store(store).file)) as con:  # as a run stopped after one point
        con.execute("update runs set status = 'interrupted'")
        con.execute("delete from profile_points where S = 32")
    monkeypatch.chdir(tmp_path)
    again = fsc_main("profile", "--resume", "latest", "--store", store, check=0)
    assert "1 point measured now" in " ".join((again.stdout + again.stderr).split())
