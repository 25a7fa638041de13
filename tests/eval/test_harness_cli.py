"""What a user of `python -m fsc.harness` (and of `fsc eval --task harness`) gets for bad input:
one line, exit 2, never a traceback; no CUDA under the harness's default `cuda:0` runs on the
CPU with a note; a task YAML that does not parse is named with its error."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("lm_eval")

from harness_tasks import write_tasks

BAD_YAML = "task: bad\ndataset_path: json\n  bad_indent: [1, 2\noutput_type: multiple_choice\n"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(the local tasks, a folder whose task YAML does not parse, an AR recipe)."""
    from fsc.recipe import load_recipe

    root = tmp_path_factory.mktemp("harness_cli")
    tasks = write_tasks(root / "tasks")
    broken = root / "broken"
    broken.mkdir()
    (broken / "bad.yaml").write_text(BAD_YAML)
    ar = root / "tiny_ar.yaml"
    ar.write_text(load_recipe("tiny_attn").to_yaml().replace("name: tiny_attn", "name: tiny_ar")
                  .replace("block_size: 4", "block_size: 1"))
    return tasks, broken, ar


def _error(err: str) -> str:
    assert "Traceback" not in err, err
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    return line


@pytest.mark.parametrize(("model_args", "says"), [
    ([], "error: model_args: pretrained=CKPT is required (a checkpoint or training directory, "
         "or a recipe)"),
    (["--model_args", "pretrained=AR,mc_samples=abc"],
     "error: model_args mc_samples=abc: expected an integer of at least 1"),
    # an autoregressive model's likelihoods are exact: no draws to set (fsc eval refuses it too)
    (["--model_args", "pretrained=AR,mc_samples=64"], "error: model_args mc_samples=64: "),
    (["--model_args", "pretrained=AR,mc_sample=1"],
     "error: model_args mc_sample: not an argument of the model fsc (pretrained, mc_samples, "
     "seed, max_length, steps, cached, max_gen_toks)"),
    (["--model_args", "pretrained=AR,max_length=1"],
     "error: model_args max_length=1: expected an integer of at least 2"),
    (["--model_args", "pretrained=runs/nope"], "error: runs/nope: "),
    # a Hub model is read for its config alone: not scored as seeded weights under its name
    (["--model_args", "pretrained=hf:acme/x"], "error: model_args pretrained: the harness would "
     "score seeded random weights: hf:acme/x is read for its config alone"),
    # the harness's other spelling: key=value words apart, merged
    (["--model_args", "mc_samples=2", "pretrained=runs/nope"], "error: runs/nope: "),
    (["--model_args", "pretrained=AR", "--batch_size", "0"],
     "error: --batch_size=0: expected an integer of at least 1"),
])
def test_bad_model_args_are_one_line(harness_cli, made, model_args, says, monkeypatch):
    """... and said before the harness indexes its tasks (half a minute of a real run)."""
    import lm_eval.tasks

    def indexed(*a, **k):
        raise AssertionError("the harness indexed its tasks before the model's arguments "
                             "were checked")

    monkeypatch.setattr(lm_eval.tasks, "TaskManager", indexed)
    tasks, _, ar = made
    code, _, err = harness_cli("--model", "fsc", *[a.replace("AR", str(ar)) for a in model_args],
                               "--tasks", "fsc_choice", "--include_path", tasks,
                               "--device", "cpu")
    assert code == 2 and _error(err).startswith(says), err
    if "mc_samples=64" in says:
        assert _error(err).endswith(f"{ar} is autoregressive (G 1): its likelihoods are exact, "
                                    "drawn by no Monte Carlo")


@pytest.mark.parametrize("shadow", [False, True])
def test_a_task_yaml_that_does_not_parse_is_named(harness_cli, made, fsc_main, tmp_path, shadow):
    """The same line from both command lines; `shadow`: with an empty folder of the task's name
    in the working directory, which the harness reads as a folder of task YAMLs."""
    _, broken, ar = made
    if shadow:
        (tmp_path / "bad").mkdir()  # fsc_main works in tmp_path
    res = fsc_main("eval", ar, "--task", "harness", "--tasks", "bad", "--include-path", broken,
                   "--store", tmp_path / "st")
    assert res.returncode == 2 and _error(res.stderr) == (
        f"error: --tasks: no harness task 'bad': {broken / 'bad.yaml'} does not parse: mapping "
        "values are not allowed here (line 3)")
    code, _, err = harness_cli("--model", "fsc", "--model_args", f"pretrained={ar}",
                               "--tasks", "bad", "--include_path", broken, "--device", "cpu")
    assert code == 2 and _error(err) == _error(res.stderr)


@pytest.mark.parametrize(("recipe", "steps", "says"), [
    ("tiny_attn", "8", "error: {option}8 must be between 1 and G = 4 (each step reveals at least "
                       "one of the block's G positions)"),
    ("ar", "2", "error: {option}2: {source} is autoregressive (G 1): it generates with no "
                "denoising steps"),
], ids=["steps-above-G", "steps-on-ar"])
def test_steps_the_model_cannot_take_are_refused_as_fsc_eval_refuses_them(
        harness_cli, made, fsc_main, tmp_path, recipe, steps, says):
    tasks, _, ar = made
    source = str(ar) if recipe == "ar" else recipe
    code, _, err = harness_cli("--model", "fsc", "--model_args", f"pretrained={source},steps={steps}",
                               "--tasks", "fsc_gen", "--include_path", tasks, "--device", "cpu")
    assert code == 2 and _error(err) == says.format(source=source, option="model_args steps="), err
    res = fsc_main("eval", source, "--task", "harness", "--tasks", "fsc_gen", "--include-path",
                   tasks, "--steps", steps, "--store", tmp_path / "st")  # each named as given
    assert res.returncode == 2 and _error(res.stderr) == says.format(source=source,
                                                                     option="--steps ")


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_the_harness_default_cuda_runs_on_the_cpu_with_a_note(harness_cli, made, fsc_main,
                                                              tmp_path):
    tasks, _, ar = made
    code, out, err = harness_cli("--model", "fsc", "--model_args", f"pretrained={ar}",
                                 "--tasks", "fsc_choice", "--include_path", tasks, "--limit", "2",
                                 "--batch_size", "2")  # no --device: the harness says cuda:0
    assert code == 0 and "fsc_choice" in out, err
    assert ("note: --device cuda:0: no CUDA device is available; running on the CPU (as the "
            "harness's hf model does)") in err
    # fsc's own command keeps its rule: a device asked for that is not there is refused
    res = fsc_main("eval", ar, "--task", "harness", "--tasks", "fsc_choice", "--include-path",
                   tasks, "--device", "cuda", "--store", tmp_path / "st")
    assert res.returncode == 2 and _error(res.stderr) == (
        "error: --device cuda: no CUDA device is available")


@pytest.mark.slow  # a new interpreter imports the harness, which indexes its thousands of tasks
def test_python_m_fsc_harness_says_bad_model_args_in_one_line(made):
    tasks, _, ar = made
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    res = subprocess.run([sys.executable, "-m", "fsc.harness", "--model", "fsc", "--model_args",
                          f"pretrained={ar},mc_samples=abc", "--tasks", "fsc_choice",
                          "--include_path", str(tasks), "--device", "cpu"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 2
    assert _error(res.stderr) == "error: model_args mc_samples=abc: expected an integer of at least 1"
