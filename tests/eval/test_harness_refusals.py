"""Input `fsc eval --task harness` refuses once the harness reads its tasks: one line, exit 2,
and no run left in the store; the line says the Hub is out of reach only where the failure is
the Hub's."""

import json

import pytest

pytest.importorskip("lm_eval")

from harness_tasks import YAML, write_tasks

HUB = "(the Hub is out of reach: HF_HUB_OFFLINE is set; only datasets in the local cache can be read)"


@pytest.fixture
def tasks(tmp_path):
    """The local tasks, fsc_missing (a Hub dataset) among them, and two more: nofile (a JSON
    lines file that is not there) and badfield (a template naming a field no document has)."""
    folder = write_tasks(tmp_path / "tasks", missing=True)
    (folder / "nofile.yaml").write_text(
        YAML["fsc_choice"].replace("task: fsc_choice", "task: nofile")
        .format(data=tmp_path / "nope.jsonl"))
    (folder / "badfield.yaml").write_text(
        YAML["fsc_gen"].replace("task: fsc_gen", "task: badfield")
        .replace("{{{{question}}}}", "{{{{nosuch}}}}").format(data=folder / "fsc_gen.jsonl"))
    return folder


@pytest.mark.parametrize(("task", "says", "hub"), [
    ("nofile", "FileNotFoundError: Unable to find ", False),
    ("badfield", "UndefinedError: 'nosuch' is undefined", False),
    ("fsc_missing", "ConnectionError: Couldn't reach 'fsc-nobody/no-such-dataset'", True),
], ids=["nofile", "badfield", "fsc_missing"])
def test_a_task_the_harness_cannot_read_is_one_line_and_leaves_no_run(
        fsc_main, ar_recipe, tasks, tmp_path, monkeypatch, task, says, hub):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    res = fsc_main("eval", ar_recipe, "--task", "harness", "--tasks", task, "--include-path",
                   tasks, "--store", tmp_path / "st", check=2)
    [line] = res.stderr.splitlines()
    assert line.startswith(f"error: the harness could not run {task}: {says}"), line
    assert line.endswith(HUB) == hub, line
    runs = fsc_main("runs", "--store", tmp_path / "st", "--json", check=0)
    assert json.loads(runs.stdout) == []


def test_a_stopped_harness_run_says_what_it_kept(fsc_main, ar_recipe, tasks, tmp_path,
                                                 monkeypatch):
    """Ctrl-C inside the harness: exit 130, one line saying the run stored nothing and is run
    again (--resume has nothing to continue), the run left interrupted."""
    from fsc.harness import run

    def stop(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "run_harness", stop)
    res = fsc_main("eval", ar_recipe, "--task", "harness", "--tasks", "fsc_choice",
                   "--include-path", tasks, "--store", tmp_path / "st", check=130)
    [line] = res.stderr.splitlines()
    assert line.startswith("interrupted: run ") and line.endswith(
        "stored nothing (a harness run is scored whole); run it again"), line
    [row] = json.loads(fsc_main("runs", "--store", tmp_path / "st", "--json").stdout)
    assert row["status"] == "interrupted"


def test_the_command_a_stopped_harness_run_is_run_again_with_keeps_its_options(
        fsc_main, ar_recipe, tasks, tmp_path, monkeypatch):
    """`fsc eval --resume` of a harness run names the command that runs it again: with every
    option it was given, so that it scores the same thing."""
    import shlex

    from fsc.harness import run

    def stop(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "run_harness", stop)
    given = {"--limit": "2", "--num-fewshot": "1", "--max-length": "64", "--seed": "3",
             "--batch": "4", "--device": "cpu", "--output-path": str(tmp_path / "o u t")}
    fsc_main("eval", ar_recipe, "--task", "harness", "--tasks", "fsc_choice", "--include-path",
             tasks, *[w for pair in given.items() for w in pair], "--log-samples",
             "--store", tmp_path / "st", check=130)
    [row] = json.loads(fsc_main("runs", "--store", tmp_path / "st", "--json").stdout)
    res = fsc_main("eval", "--resume", row["run_id"], "--store", tmp_path / "st", check=2)
    words = shlex.split(" ".join(res.stderr.split()).split("`")[1])
    assert words[:9] == ["fsc", "eval", str(ar_recipe), "--task", "harness", "--tasks",
                         "fsc_choice", "--include-path", str(tasks)]
    assert {w: words[i + 1] for i, w in enumerate(words) if w in given} == given
    assert words[-1] == "--log-samples" and "--mc-samples" not in words


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_model_named_relatively_has_its_results_written_beside_not_into_it(
        fsc_main, ar_recipe, tasks, tmp_path):
    """--output-path . with the model named by a relative path: the harness writes under
    OUT/<model's path>/, which was the recipe's own name (a file: nothing could be written) or
    a checkpoint's own folder; the model is named by its absolute path, as the run records it."""
    res = fsc_main("eval", ar_recipe.name, "--task", "harness", "--tasks", "fsc_gen",
                   "--include-path", tasks.name, "--output-path", ".", "--limit", "1",
                   "--store", tmp_path / "st", check=0)
    [written] = list(tmp_path.glob("*/results_*.json"))
    assert written.parent.name.endswith("tiny_ar.yaml") and written.parent != ar_recipe
    [row] = json.loads(fsc_main("runs", "--store", tmp_path / "st", "--json").stdout)
    assert row["status"] == "finished", res.stderr


def test_a_task_named_by_its_yaml_file_is_told_how_to_name_it(fsc_main, ar_recipe, tasks,
                                                             tmp_path):
    res = fsc_main("eval", ar_recipe, "--task", "harness", "--tasks", tasks / "fsc_choice.yaml",
                   "--store", tmp_path / "st", check=2)
    said = " ".join(res.stderr.split())
    assert "a task is named by its YAML's `task:` field" in said
    assert "the YAML's folder as --include-path" in said
