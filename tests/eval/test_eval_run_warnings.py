"""An eval run's warnings belong to its grid, whatever the task: said once as it starts, kept
in its config and said again when it resumes (genppl's alone were); genppl decoding at a G
the checkpoint was not trained at is one of them, as `fsc decode` notes it. Loss on the
suite's data takes the knobs its tasks read, as fsc train does, and its cells record them;
--retries is refused where nothing runs outside the process."""

import json

import pytest
from stops import stop_at_second_length

from fsc.checkpoint.io import save_checkpoint
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.scale import ExecutorSettings
from fsc.store import Store

AR_SAID = "is autoregressive (G 1), never trained to denoise: --mode diffusion scores its"


def _said(res) -> str:
    return " ".join(res.stderr.split())


def _trained(tmp_path, recipe, name: str, objective: str, **record):
    """A checkpoint of `recipe`'s weights with the training record `fsc train` writes."""
    save_checkpoint(build_model(load_recipe(recipe), seed=0), tmp_path / name, training={
        "objective": objective, "steps": 1, "data": "shakespeare", "seq_len": 16,
        "final_loss": 5.0, **record})
    return tmp_path / name


def _warnings(st, run_id: str) -> list[str]:
    _, [(config,)] = Store(st).query(f"select config from runs where run_id = '{run_id}'")
    return json.loads(config)["warnings"]


@pytest.mark.slow  # seconds: a run stopped, then resumed
def test_a_loss_runs_warning_is_kept_and_said_again_on_resume(fsc_main, tmp_path, ar_recipe,
                                                              monkeypatch):
    """A checkpoint trained autoregressively, its bound read by --mode diffusion: the warning
    was printed and lost (the run's config held none, and --resume said nothing)."""
    from fsc.eval import loss

    ar = _trained(tmp_path, ar_recipe, "ar", "ar")
    st = tmp_path / "st"
    real = stop_at_second_length(monkeypatch)
    res = fsc_main("eval", ar, "--task", "loss", "--mode", "diffusion", "--lengths", "8,128",
                   "--samples", "2", "--store", st)
    assert res.returncode == 143, res.stderr
    assert _said(res).count(f"warning: {ar} {AR_SAID}") == 1
    run = res.stderr.split(" of run ")[1].split()[0]
    [kept] = _warnings(st, run)
    assert kept.startswith(f"{ar} {AR_SAID}")
    monkeypatch.setattr(loss, "heldout_loss", real)
    again = fsc_main("eval", "--resume", run, "--store", st, check=0)
    assert _said(again).count("warning: ") == 1
    assert f"warning: {' '.join(kept.split())}" in _said(again)


def test_a_retrieval_runs_warning_is_kept_once(fsc_main, tmp_path, ar_recipe):
    ar = _trained(tmp_path, ar_recipe, "ar", "ar")
    st = tmp_path / "st"
    res = fsc_main("eval", ar, "--task", "niah", "--mode", "diffusion", "--lengths", "128",
                   "--depths", "0.5", "--samples", "1", "--json", "--store", st, check=0)
    [line] = [w for w in res.stderr.splitlines() if w.startswith("warning: ")]
    doc = json.loads(res.stdout)
    assert _warnings(st, doc["run_id"]) == doc["warnings"] == [line.removeprefix("warning: ")]
    assert "decodes its answers by block diffusion" in line
    res = fsc_main("eval", ar, "--task", "niah", "--lengths", "128", "--depths", "0.5",
                   "--samples", "1", "--json", "--store", st, check=0)  # as trained: none
    assert "warning" not in res.stderr
    assert _warnings(st, json.loads(res.stdout)["run_id"]) == []


def test_genppl_at_a_block_size_not_trained_at_is_warned_of_and_kept(fsc_main, tmp_path,
                                                                    ar_recipe):
    """--G 2,8 of a checkpoint trained at G 4 decoded outside what it learned without a word,
    while fsc decode --G 8 notes it."""
    dn = _trained(tmp_path, "tiny_attn", "dn", "frontier")
    scorer = _trained(tmp_path, ar_recipe, "ar", "ar")
    st = tmp_path / "st"
    args = ("eval", dn, "--task", "genppl", "--scorer", scorer, "--data", "shakespeare",
            "--samples", "1", "--lengths", "8", "--prompt-length", "4", "--steps", "2",
            "--json", "--store", st)
    res = fsc_main(*args, "--G", "2,4,8", check=0)
    said = f"{dn} was trained at G 4; decoding at G 2 and 8 is outside what it learned"
    assert [w for w in res.stderr.splitlines() if w.startswith("warning: ")] == [
        f"warning: {said}"]
    assert _warnings(st, json.loads(res.stdout)["run_id"]) == [said]
    res = fsc_main(*args, check=0)  # at the G trained at: none
    assert "warning" not in res.stderr


def test_loss_on_suite_data_takes_the_knobs_its_tasks_read(fsc_main, tmp_path):
    """Trained on vt with --hops 2: --task loss refused --hops, --chains, ... although it read
    the recorded ones; now it scores with the value given and its cell records it."""
    ck = _trained(tmp_path, "tiny_hybrid", "vt", "frontier", data="vt", seq_len=128,
                  suite={"hops": 2})
    st = tmp_path / "st"

    def cell(*extra):
        res = fsc_main("eval", ck, "--task", "loss", "--samples", "2", "--json",
                       "--store", st, *extra)
        assert res.returncode == 0, res.stderr
        [row] = json.loads(res.stdout)["rows"]
        return row

    trained, one = cell(), cell("--hops", "1", "--haystack", "shakespeare")
    assert (trained["hops"], trained["chains"], trained["haystack"]) == (2, 1, "filler")
    assert (one["hops"], one["chains"], one["haystack"]) == (1, 1, "shakespeare")
    assert trained["words"] is None and trained["needles"] is None
    assert one["loss"] != trained["loss"]  # other sequences were scored
    _, rows = Store(st).query("select hops from evaluation where task = 'loss' order by hops")
    assert rows == [(1,), (2,)]


@pytest.mark.parametrize("args, says", [
    (["--words", "2"], "--words: for --data cwe, fwe, ruler or a mix holding one (this is vt)"),
    (["--variant", "multikey"], "--variant: for --task niah only (this is loss)"),
    (["--data", "shakespeare", "--hops", "2"],
     "--hops: for --data vt, ruler or a mix holding one (this is shakespeare)"),
    (["--data", "passkey", "--distractors", "0"],
     "--distractors: for --data niah_multikey, niah_multivalue, niah_multiquery, ruler or a "
     "mix holding one (this is passkey)"),
])
def test_loss_refuses_a_knob_no_task_of_its_data_reads(fsc_main, tmp_path, args, says):
    ck = _trained(tmp_path, "tiny_hybrid", "vt", "frontier", data="vt", seq_len=128)
    res = fsc_main("eval", ck, "--task", "loss", *args, "--store", tmp_path / "st")
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [f"error: {says}"]


def test_a_knob_given_to_another_task_names_loss_too(fsc_main, tmp_path):
    res = fsc_main("eval", "tiny_attn", "--task", "niah", "--hops", "2", "--store", tmp_path)
    assert res.returncode == 2
    assert _said(res) == ("error: --hops: for --task vt or ruler only (this is niah), or "
                          "--task loss on vt data")


@pytest.mark.parametrize("command", [
    ("eval", "tiny_attn", "--lengths", "128", "--samples", "1"),
    ("profile", "-r", "tiny_attn", "--S", "16", "--B", "1"),
])
def test_retries_with_nothing_outside_the_process_are_refused(fsc_main, tmp_path, command):
    """--retries 3 with the local executor's one worker (the default) ran in the process,
    where nothing is ever run again, and was taken without a word."""
    res = fsc_main(*command, "--retries", "3", "--store", tmp_path / "st")
    assert res.returncode == 2
    assert _said(res) == ("error: --retries 3: --executor local with one worker runs every "
                          "group in this process, with no worker to die and run again; give "
                          "--workers N (N > 1), --executor ray or slurm, or drop --retries")
    assert not (tmp_path / "st").exists()
    assert ExecutorSettings(workers=2, retries=3).check(["--retries", "--workers"]).retries == 3


@pytest.mark.parametrize(("recorded", "given", "warned"), [
    ("shakespeare", "shakespeare:train", True),  # the split fsc train reads of a bare name
    ("shakespeare", "shakespeare", False),  # fsc eval reads its val split
    ("shakespeare:val", "shakespeare:val", True),
    ("FILE", "FILE", True),  # a text file, by any path to it
    ("hf:DIR", "hf:DIR::train", True),
    ("hf:DIR", "hf:DIR", False),  # eval reads its held-out split
])
def test_loss_on_the_text_trained_on_is_said_not_held_out(fsc_main, tmp_path, monkeypatch,
                                                          recorded, given, warned):
    """`fsc eval --task loss --data X`, X the text (or the split) training read, printed a
    "held-out" loss with no word."""
    pytest.importorskip("datasets")
    (tmp_path / "a.txt").write_text("To be, or not to be, that is the question. " * 30)
    hf = tmp_path / "hf"
    hf.mkdir()
    for split in ("train", "validation"):
        (hf / f"{split}.jsonl").write_text('{"text": "What light through yonder window."}\n' * 40)
    place = {"FILE": str(tmp_path / "a.txt"), "DIR": str(hf)}
    recorded = place.get(recorded, recorded.replace("DIR", str(hf)))
    monkeypatch.chdir(tmp_path)
    given = {"FILE": "a.txt"}.get(given, given.replace("DIR", "hf"))
    ckpt = _trained(tmp_path, "tiny_attn", "ck", "blocks", data=recorded)
    res = fsc_main("eval", ckpt, "--task", "loss", "--data", given, "--lengths", "16",
                   "--samples", "1", "--json", "--store", tmp_path / "st", check=0)
    notes = json.loads(res.stdout)["warnings"]
    said = [w for w in notes if "not held out" in w]
    assert bool(said) == warned, notes
    if warned:  # the data named as the run records it, from any directory
        named = given.replace("a.txt", str(tmp_path / "a.txt")).replace("hf:hf", f"hf:{hf}")
        assert said == [f"--data {named} is text {ckpt} was trained on: its loss is not held out"]


def test_a_checkpoint_trained_on_an_hf_dataset_is_scored_on_its_held_out_split(fsc_main,
                                                                               tmp_path):
    """`fsc eval CK` after training on hf:DIR said no task measures that data and suggested
    --task loss --data hf:DIR, though --help calls loss the default after text."""
    pytest.importorskip("datasets")
    hf = tmp_path / "hf"
    hf.mkdir()
    for split in ("train", "validation"):
        (hf / f"{split}.jsonl").write_text('{"text": "What light through yonder window."}\n' * 40)
    ckpt = _trained(tmp_path, "tiny_attn", "ck", "blocks", data=f"hf:{hf}")
    res = fsc_main("eval", ckpt, "--lengths", "16", "--samples", "1", "--json",
                   "--store", tmp_path / "st", check=0)
    doc = json.loads(res.stdout)
    assert doc["task"] == "loss" and doc["rows"][0]["data"] == f"hf:{hf}"
    assert not [w for w in doc["warnings"] if "not held out" in w]
    named = _trained(tmp_path, "tiny_attn", "ck2", "blocks", data=f"hf:{hf}::train")
    res = fsc_main("eval", named, "--lengths", "16", "--samples", "1", "--store", tmp_path / "st")
    assert res.returncode == 2 and "whose loss is not held out" in res.stderr


def test_loss_after_training_on_a_corpus_val_split_reads_its_train_split(fsc_main, tmp_path):
    """A checkpoint trained on shakespeare:val was scored by default on shakespeare:val."""
    ckpt = _trained(tmp_path, "tiny_attn", "ck", "blocks", data="shakespeare:val")
    res = fsc_main("eval", ckpt, "--task", "loss", "--lengths", "16", "--samples", "1",
                   "--json", "--store", tmp_path / "st", check=0)
    doc = json.loads(res.stdout)
    _, [(config,)] = Store(tmp_path / "st").query("select config from runs")
    assert json.loads(config)["data"] == "shakespeare:train" and doc["warnings"] == []
