"""fsc eval --resume RUN: after a stop, only the missing cells are scored, into the same run;
a finished run resumed is a no-op (exit 0, nothing recorded), as a retry loop needs."""

import json

import pytest
from stops import stop_at_second_length as _stop_at_second_length
from stops import stop_genppl_at_k4

from fsc.store import Store


def test_a_stopped_eval_resumes_with_the_cells_it_lacks(fsc_main, tmp_path, monkeypatch):
    from fsc.eval import loss

    store = tmp_path / "store"
    args = ["tiny_attn", "--task", "loss", "--data", "shakespeare", "--lengths", "64,128",
            "--samples", "2", "--store", store]
    real = _stop_at_second_length(monkeypatch)
    res = fsc_main("eval", *args)
    assert res.returncode == 143
    run = res.stderr.split(" of run ")[1].split()[0]
    assert f"fsc eval --resume {run} --store {store}" in res.stderr
    monkeypatch.setattr(loss, "heldout_loss", real)
    again = fsc_main("eval", "--resume", run, "--store", store, check=0)
    # only the missing cell scored; the table holds the run's every cell, as stored
    assert f"run {run} held 1 cell; 1 scored now" in again.stderr
    assert f"(run {run})" in again.stdout
    table = [line.split("│")[1].strip() for line in again.stdout.splitlines()
             if line.startswith("│")]
    assert table == ["64", "128"], again.stdout
    _, [(held,)] = Store(store).query(f"select loss from eval_cells where run_id = '{run}' "
                                      "and length = 64")
    assert f"{held:.4f}" in again.stdout
    _, rows = Store(store).query(f"select length from eval_cells where run_id = '{run}' "
                                 "order by length")
    assert rows == [(64,), (128,)]
    _, [(status,)] = Store(store).query(f"select status from runs where run_id = '{run}'")
    assert status == "finished"
    # a finished run resumed: said, exit 0, nothing recorded
    done = fsc_main("eval", "--resume", run, "--store", store)
    assert done.returncode == 0 and "finished; every cell of it is stored" in done.stderr
    done = fsc_main("eval", "--resume", run, "--store", store, "--json")
    doc = json.loads(done.stdout)  # a reader of stdout gets a document
    assert done.returncode == 0 and (doc["run_id"], doc["status"]) == (run, "finished")
    _, [(n,)] = Store(store).query("select count(*) from eval_cells")
    assert n == 2


def _training_dir_at(folder, step: int) -> None:
    """A training directory whose `latest` names step `step` (seeded tiny_attn weights)."""
    from fsc.checkpoint.io import save_checkpoint
    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe

    save_checkpoint(build_model(load_recipe("tiny_attn"), seed=step), folder / f"step-{step:06d}",
                    seed=step)
    (folder / "latest").write_text(f"step-{step:06d}")


def test_a_resume_scores_the_step_its_run_began_with(fsc_main, tmp_path, monkeypatch):
    """Training went on after the stop: the resumed run still scores the step it recorded
    (never two checkpoints in one run), and refuses in one line when that step is gone."""
    from fsc.eval import loss

    store = tmp_path / "store"
    _training_dir_at(tmp_path / "train", 1)
    real = _stop_at_second_length(monkeypatch)
    res = fsc_main("eval", "train", "--task", "loss", "--data", "shakespeare", "--lengths",
                   "64,128", "--samples", "2", "--store", store)
    assert res.returncode == 143, res.stderr
    run = res.stderr.split(" of run ")[1].split()[0]
    monkeypatch.setattr(loss, "heldout_loss", real)
    _training_dir_at(tmp_path / "train", 2)
    (tmp_path / "train" / "step-000001").rename(tmp_path / "aside")
    gone = fsc_main("eval", "--resume", run, "--store", store)
    assert gone.returncode == 2 and gone.stderr.count("\n") == 1, gone.stderr
    train = tmp_path / "train"  # as the run recorded it: by its absolute path
    assert f"scored {train} as {train}/step-000001, which is gone" in gone.stderr
    (tmp_path / "aside").rename(tmp_path / "train" / "step-000001")
    fsc_main("eval", "--resume", run, "--store", store, check=0)
    _, rows = Store(store).query(f"select length, checkpoint from eval_cells where run_id = "
                                 f"'{run}' order by length")
    assert rows == [(64, f"{train}/step-000001"), (128, f"{train}/step-000001")]


def test_resume_takes_the_runs_own_grid(fsc_main, tmp_path):
    res = fsc_main("eval", "--resume", "r1", "--lengths", "64", "--store", tmp_path / "st")
    assert res.returncode == 2 and "drop --lengths" in res.stderr
    res = fsc_main("eval", "--store", tmp_path / "st")
    assert res.returncode == 2 and "--resume RUN_ID" in res.stderr


@pytest.mark.slow  # a genppl run stopped and resumed: seconds (make test-slow)
def test_a_genppl_run_resumes_with_the_decodings_it_lacks(fsc_main, tmp_path, monkeypatch):
    text = "name: ar\nd_model: 32\nn_layers: 1\nvocab_size: 288\nblock_size: 1\n" \
           "dtype: fp32\nlayers: {default: attention}\nattention: {n_heads: 2, head_dim: 16}\n"
    (tmp_path / "ar.yaml").write_text(text)
    store = tmp_path / "store"
    seen = stop_genppl_at_k4(monkeypatch)
    res = fsc_main("eval", "tiny_attn", "--task", "genppl", "--data", "shakespeare",
                   "--samples", "2", "--lengths", "8", "--prompt-length", "4", "--scorer",
                   tmp_path / "ar.yaml", "--store", store)
    assert res.returncode == 143, res.stderr
    run = res.stderr.split(" of run ")[1].split()[0]
    again = fsc_main("eval", "--resume", run, "--store", store, "--json", check=0)
    assert seen[-1:] == [4] and seen.count(1) == 1 and seen.count(2) == 1
    assert [(r["mode"], r["K"]) for r in json.loads(again.stdout)["rows"]] == [("diffusion", 4)]
    _, rows = Store(store).query(f"select mode, K from eval_cells where run_id = '{run}'")
    assert sorted(rows, key=str) == sorted([("reference", None), ("diffusion", 1),
                                            ("diffusion", 2), ("diffusion", 4)], key=str)


def test_a_harness_run_is_not_resumed_but_named_to_run_again(fsc_main, tmp_path):
    """A harness run stores its rows when every task is done, so a stopped one has nothing to
    continue: --resume says so on one line with the command that runs it again."""
    from fsc.harness.run import HarnessRequest
    from fsc.store import Store

    st = Store(tmp_path / "st")
    request = HarnessRequest(source="ck", tasks=("my_mc", "my_gen"), include_path="tasks")
    run = st.start_run("eval", "fsc eval ck --task harness", None,
                       {"request": {**request.__dict__, "tasks": list(request.tasks)},
                        "task": "harness"})
    st.finish_run(run, "failed", error="interrupted")
    res = fsc_main("eval", "--resume", run, "--store", tmp_path / "st")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert ("harness run" in res.stderr and
            "fsc eval ck --task harness --tasks my_mc,my_gen --include-path tasks" in res.stderr)
