"""fsc eval's defaults and messages: the task a mix of training tasks is scored by, the
options --mode ar names as dropped, the device a GPU user gets, the split a loss haystack
reads."""

import inspect
import json

import pytest

from fsc.errors import UsageError
from fsc.eval.request import EvalRequest, default_task


@pytest.mark.parametrize(("data", "task"), [
    ("passkey:1,vt:1", "ruler"), ("niah_multikey:1,passkey:2", "ruler"), ("mqar:3", "mqar"),
    ("passkey:2", "niah"), ("mqar:0,passkey:1", "niah"), ("vt:1,cwe:0", "vt"),
    ("copy:2", "copy")])
def test_a_mix_is_scored_by_the_task_its_parts_share(data, task):
    assert default_task(EvalRequest("ck"), data) == task


@pytest.mark.parametrize(("data", "says"), [
    ("passkey:1,mqar:1", "give --task mqar or --task niah or --task loss"),
    ("copy:1,passkey:1", "give --task copy or --task niah or --task loss")])
def test_a_mix_no_one_task_measures_is_told_which_do(data, says):
    """The ruler suite scores neither mqar nor copy: such a mix is not scored by it."""
    with pytest.raises(UsageError, match="a mix no one eval task measures") as e:
        default_task(EvalRequest("ck"), data)
    assert says in str(e.value)


def test_ar_mode_names_only_what_was_given_to_drop(cli, tmp_path):
    r = cli("eval", "tiny_hybrid", "--mode", "ar", "--steps", "2", "--store", tmp_path / "st")
    said = " ".join(r.err.split())
    assert r.code == 2 and said.endswith("drop --steps 2") and "--G" not in said


def test_eval_train_and_verify_use_cuda_when_present_as_decode_and_profile_do():
    from fsc.cli.decode import decode
    from fsc.cli.evaluate import evaluate
    from fsc.cli.profile import profile
    from fsc.cli.train import train
    from fsc.cli.verify import verify

    for command in (decode, evaluate, profile, train, verify):
        assert inspect.signature(command).parameters["device"].default == "auto", command


def test_a_loss_haystack_reads_the_validation_text():
    """--task loss on vt with --haystack shakespeare reads the corpus's val split, as the
    retrieval tasks do; training reads its train split."""
    from fsc import corpora
    from fsc.data.sources import DataOptions, open_data
    from fsc.tokenizer import ByteTokenizer

    tok = ByteTokenizer()
    options = DataOptions(suite={"haystack": "shakespeare"})
    for split in ("val", "train"):
        data = open_data("vt", tok, 256, 4, 0, options, split=split)
        assert data.task.hay.tokens == tok.encode(corpora.read("shakespeare", split))
        mixed = open_data("vt:1,passkey:1", tok, 256, 4, 0, options, split=split)
        assert mixed.sample(0) is not None


def test_export_says_a_command_that_runs_as_printed_and_json_too(cli, tmp_path):
    """The next command is quoted (a folder with a space), one task is 'task', and --json
    prints the tasks, the group and that command."""
    import json
    import shlex

    folder = tmp_path / "sp ace" / "ex"
    folder.parent.mkdir()
    r = cli("eval", "tiny_hybrid", "--task", "vt", "--lengths", "256", "--samples", "2",
            "--export", folder)
    said = " ".join(r.err.split())
    assert r.code == 0 and "wrote 1 lm-evaluation-harness task and their group fsc_vt" in said
    command = shlex.split(r.err.splitlines()[-1])
    assert command[command.index("--include-path") + 1] == str(folder)
    r = cli("eval", "tiny_hybrid", "--task", "vt", "--lengths", "256", "--samples", "2",
            "--export", folder, "--json")
    doc = json.loads(r.out)
    assert r.code == 0 and doc["group"] == "fsc_vt" and doc["tasks"] == ["fsc_vt_256"]
    assert shlex.split(doc["command"]) == command
    assert sorted(p.name for p in folder.iterdir()) == ["fsc_vt.yaml", "fsc_vt_256.jsonl",
                                                       "fsc_vt_256.yaml", "utils.py"]


@pytest.mark.parametrize("data", ["niah_multikey", "niah_multikey:3", "passkey:0,niah_multikey:1"])
def test_a_checkpoint_trained_on_one_niah_variant_is_scored_on_it(data):
    from fsc.eval.request import checked

    request = checked(EvalRequest("ck"), {"data": data})
    assert (request.task, request.variant) == ("niah", "multikey")


def test_cpu_0_is_the_cpu_and_cpu_1_is_refused(cli, save_tiny, tmp_path):
    """--device cpu:0 reads a checkpoint (safetensors knows no cpu:0); cpu:1 is one line."""
    ck = save_tiny()
    r = cli("decode", ck, "--prompt", "hi", "--length", "4", "--device", "cpu:0", "--json")
    assert r.code == 0, r.err
    r = cli("decode", ck, "--prompt", "hi", "--length", "4", "--device", "cpu:1")
    assert r.code == 2 and "the CPU is one device" in r.err


def test_export_of_prompts_past_the_harness_default_length_says_the_length_to_read(cli,
                                                                                 tmp_path):
    """Prompts longer than the 2,048 tokens the harness reads an fsc model with by default:
    the command it suggests reads them whole (a BOS too), not cut from the left."""
    import json
    import shlex

    r = cli("eval", "tiny_hybrid", "--task", "niah", "--lengths", "3k", "--depths", "0.5",
            "--samples", "1", "--export", tmp_path / "big", "--json")
    words = shlex.split(json.loads(r.out)["command"])
    assert words[words.index("--max-length") + 1] == "3073"
    r = cli("eval", "tiny_hybrid", "--task", "niah", "--lengths", "1k", "--depths", "0.5",
            "--samples", "1", "--export", tmp_path / "small", "--json")
    assert "--max-length" not in json.loads(r.out)["command"]


@pytest.mark.parametrize("data", ["passkey,passkey", "vt:1,passkey:2,vt:3"])
def test_a_task_given_twice_in_a_mix_is_refused(cli, tmp_path, data):
    r = cli("train", "tiny_attn", "--data", data, "--seq-len", "256", "--batch", "2",
            "--train-steps", "1", "--out", tmp_path / "out", "--store", tmp_path / "st")
    assert r.code == 2 and "is given twice; give it once, with the weight of both" in r.err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args", [("profile", "-r", "tiny_attn", "--S", "1k,1024", "--dry-run"),
                                  ("profile", "-r", "tiny_attn", "--S", "1k", "--S", "1024",
                                   "--dry-run"),
                                  ("eval", "tiny_attn", "--lengths", "128,128")])
def test_a_size_given_twice_is_refused(cli, tmp_path, args):
    """A size twice in a list was measured twice."""
    r = cli(*args, "--store", tmp_path / "st")
    assert r.code == 2 and "is given twice" in r.err


@pytest.mark.slow  # a training: seconds (make test-slow)
def test_a_checkpoint_trained_on_a_mix_with_mqar_is_told_at_the_command_line(fsc_main,
                                                                            tmp_path):
    """Where a user meets it: `fsc eval CKPT` of a passkey:1,mqar:1 checkpoint is one line,
    exit 2, naming the tasks that score it, and stores nothing (it ran ruler)."""
    fsc_main("train", "tiny_attn", "--data", "passkey:1,mqar:1", "--seq-len", "256",
             "--train-steps", "1", "--batch", "2", "--out", tmp_path / "ck", "--store",
             tmp_path / "st", check=0)
    res = fsc_main("eval", tmp_path / "ck", "--store", tmp_path / "st", check=2)
    said = " ".join(res.stderr.split())
    assert "a mix no one eval task measures: give --task mqar or --task niah or --task loss" in said
    runs = fsc_main("runs", "--kind", "eval", "--json", "--store", tmp_path / "st", check=0)
    assert json.loads(runs.stdout) == []


@pytest.mark.parametrize(("option", "values"), [
    ("--data", ("shakespeare", "notes.txt")), ("--scorer", ("a", "b")),
    ("--baseline", ("a", "b")), ("--tokenizer", ("t1", "t2")), ("--resume", ("r1", "r2")),
    ("--include-path", ("d1", "d2")), ("--output-path", ("o1", "o2"))])
def test_an_option_naming_one_input_refuses_a_second(cli, tmp_path, option, values):
    """`fsc eval CK --task loss --data shakespeare --data notes.txt` scored notes.txt alone,
    where `fsc train --data` and `fsc decode --prompt-file` refuse a second value."""
    r = cli("eval", "tiny_attn", "--task", "loss", option, values[0], option, values[1],
            "--store", tmp_path / "st")
    said = " ".join(r.err.split())
    assert r.code == 2 and r.err.count("\n") == 1, r.err
    assert f"'{option}': given 2 times ('{values[0]}', '{values[1]}'); it names one input" in said
    assert not (tmp_path / "st").exists()


def test_a_checkpoint_and_resume_together_are_said_to_be_both(cli, tmp_path):
    """Both given were told to give one of the two, as if neither had been."""
    r = cli("eval", "tiny_attn", "--resume", "latest", "--store", tmp_path / "st")
    assert r.code == 2 and "not both" in r.err and r.err.count("\n") == 1
    r = cli("eval", "--store", tmp_path / "st")
    assert r.code == 2 and "not both" not in r.err
