"""save → push → pull through the real huggingface_hub client against the fake Hub."""

from __future__ import annotations

import json

import pytest
from hub_helpers import digest

from fsc.checkpoint.registry import list_artifacts, register_checkpoint


def _decode(path) -> list[int]:
    """`fsc decode PATH ... --json` in this process (decoding never touches the Hub client)."""
    from typer.testing import CliRunner

    from fsc.cli.main import app

    args = ["decode", str(path), "--prompt", "hi", "--length", "8", "--temperature", "0", "--json"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["token_ids"]


@pytest.mark.slow  # a save, push, pull and two decodes: ~11 s: make test-slow (CI runs it)
def test_save_push_pull_gives_identical_files_and_tokens(save_tiny, fsc, hub, token, tmp_path):
    # The repository exists, with a stale shard on main: push makes branch `exp` from main,
    # commits the checkpoint there and deletes the stale weights; main does not move.
    hub.put_repo("alice/tiny", {"README.md": b"# old\n", "model-00001-of-00009.safetensors": b"x"})
    main_before = hub.files("alice/tiny", "main")
    original = save_tiny(max_shard_bytes=400_000)  # several LFS files and an index
    store = tmp_path / "store"
    pushed = fsc("push", original, "--repo", "alice/tiny", "--revision", "exp",
                 "--message", "first", "--json")
    assert pushed.returncode == 0, pushed.stderr
    push = json.loads(pushed.stdout)
    assert (push["repo"], push["revision"]) == ("alice/tiny", "exp")
    repo = hub.repos["alice/tiny"]
    assert push["commit_id"] == repo.branches["exp"] != repo.branches["main"]
    assert repo.commits[push["commit_id"]].message == "first"
    assert hub.files("alice/tiny", "main") == main_before
    assert "model-00001-of-00009.safetensors" not in hub.files("alice/tiny", "exp")

    pulled = fsc("pull", "alice/tiny@exp", "--json")  # default destination under the cwd
    assert pulled.returncode == 0, pulled.stderr
    pull = json.loads(pulled.stdout)
    pulled_dir = tmp_path / "checkpoints" / "alice__tiny@exp"
    assert pull["commit_id"] == push["commit_id"] and pull["path"] == str(pulled_dir.resolve())
    assert digest(pulled_dir) == digest(original)  # every file, byte for byte, nothing more
    assert [p.name for p in pulled_dir.parent.iterdir()] == [pulled_dir.name]  # no temporary
    assert _decode(pulled_dir) == _decode(original) != []

    listed = fsc("artifacts", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["action"]: r for r in json.loads(listed.stdout)}
    assert set(rows) == {"pushed", "pulled"}
    assert rows["pushed"]["path"] == str(original.resolve()) and rows["pulled"]["present"]
    for row in rows.values():
        assert (row["repo"], row["revision"], row["commit_id"]) == ("alice/tiny", "exp",
                                                                      push["commit_id"])
        assert row["files_sha256"] == push["files"] and row["recipe_hash"] == push["recipe_hash"]

    for f in store.iterdir():  # the .duckdb file and any WAL beside it
        assert token.encode() not in f.read_bytes(), f
    for r in (pushed, pulled, listed):
        assert token not in r.stdout + r.stderr
    assert hub.unhandled == []


def test_register_checkpoint_records_a_saved_checkpoint(save_tiny, tmp_path):
    from fsc.checkpoint.io import verify_checkpoint

    info = verify_checkpoint(save_tiny())
    register_checkpoint(tmp_path / "store", info, "saved")
    (row,) = list_artifacts(tmp_path / "store")
    assert (row["action"], row["repo"], row["commit_id"]) == ("saved", None, None)
    assert row["path"] == info.path and row["files_sha256"] == info.files
    assert row["present"]


def test_commands_have_help():
    from typer.testing import CliRunner

    from fsc.cli.main import app

    for command, option in (("push", "--repo"), ("pull", "--force"), ("artifacts", "--json")):
        r = CliRunner().invoke(app, [command, "--help"])
        assert r.exit_code == 0 and option in r.stdout, r.output


@pytest.mark.slow  # a training run first (push and pull themselves: the test above)
def test_a_trained_checkpoint_pushes_without_its_training_state(fsc, hub, tmp_path):
    """`fsc train` writes an ordinary checkpoint: push takes the checksummed files and leaves
    the optimizer state behind; the pulled card says what was trained."""
    from fsc_run import in_process

    in_process("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "2",
               "--batch", "2", "--out", tmp_path / "run", "--store", tmp_path / "store", check=0)
    step = tmp_path / "run" / "step-000002"
    pushed = fsc("push", step, "--repo", "alice/trained", "--json")
    assert pushed.returncode == 0, pushed.stderr
    files = hub.files("alice/trained", "main")
    assert not any(name.startswith("training_state") for name in files)
    assert {"model.safetensors", "README.md", "config.json", "fsc_recipe.yaml"} <= set(files)
    assert b"trained by `fsc train` for 2 steps on `copy`" in files["README.md"]


@pytest.mark.slow  # two pushes: make test-slow
def test_a_training_directory_pushes_its_newest_step(save_tiny, fsc, hub, token, tmp_path):
    """`fsc push` takes a training directory, or its `latest`, as decode and verify do: its
    newest step is what is pushed."""
    step = save_tiny("run/step-000002")
    (tmp_path / "run" / "latest").write_text("step-000002\n")
    for given in (tmp_path / "run", tmp_path / "run" / "latest"):
        pushed = fsc("push", given, "--repo", "alice/tiny", "--json")
        assert pushed.returncode == 0, pushed.stderr
        assert json.loads(pushed.stdout)["path"] == str(step.resolve())
