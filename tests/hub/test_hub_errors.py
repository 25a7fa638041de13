"""Failures of push and pull: one line, a non-zero exit, nothing half-written, no token shown."""

from __future__ import annotations

import socket

import pytest
from hub_helpers import assert_one_line_error, digest


def _checkpoint_files(d) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir()}


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_push_without_a_token_fails_before_any_network_call(save_tiny, fsc, hf_env, hub):
    original = save_tiny()
    env = {k: v for k, v in hf_env.items() if k != "HF_TOKEN"}  # HF_HOME holds no saved login
    r = fsc("push", original, "--repo", "alice/tiny", env=env)
    line = assert_one_line_error(r)
    assert "no Hugging Face token" in line and "HF_TOKEN" in line
    assert hub.requests == []


@pytest.mark.slow  # two new interpreters, 4 s: make test-slow (CI runs it)
def test_push_of_a_path_that_does_not_exist_is_bad_input(fsc, hf_env, hub, tmp_path):
    """Exit 2, as fsc verify and fsc decode give for the path, with or without a token."""
    env = {k: v for k, v in hf_env.items() if k != "HF_TOKEN"}
    for how in (env, hf_env):
        r = fsc("push", tmp_path / "nosuch", "--repo", "alice/tiny", env=how)
        assert r.returncode == 2
        assert assert_one_line_error(r) == f"error: {tmp_path / 'nosuch'}: no such checkpoint directory"
    assert hub.requests == []


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_push_of_a_folder_that_is_no_checkpoint_is_bad_input(fsc, hf_env, hub, tmp_path):
    """It failed with "checksums.sha256: missing", exit 1, where fsc verify says what it is."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("a")
    r = fsc("push", tmp_path / "notes", "--repo", "alice/tiny", env=hf_env)  # token and all
    assert r.returncode == 2
    assert assert_one_line_error(r).startswith(
        f"error: {tmp_path / 'notes'}: is no checkpoint (no fsc_recipe.yaml in it)")
    assert hub.requests == []


@pytest.mark.parametrize(("failure", "message"), [
    pytest.param("commit 500", "the Hub answered HTTP 500 for alice/tiny@main",
                 marks=pytest.mark.slow),  # the refusal path again, by another answer
    ("wrong token", "the Hub refused the token (HTTP 401)"),
])
@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_push_refused_by_the_server_leaves_the_checkpoint_and_store_alone(
        save_tiny, fsc, hf_env, hub, token, tmp_path, failure, message):
    original = save_tiny()
    before = digest(original)
    env = dict(hf_env)
    if failure == "commit 500":
        hub.fail["commit"] = 500
    else:
        env["HF_TOKEN"] = "hf_wrong_" + token[::-1]
    r = fsc("push", original, "--repo", "alice/tiny", env=env)
    assert message in assert_one_line_error(r, token, env["HF_TOKEN"])
    assert digest(original) == before
    assert not (tmp_path / "store").exists()  # nothing recorded for a push that did not happen


@pytest.mark.slow  # a process of its own; make test keeps the push refused without a token
def test_push_of_a_damaged_checkpoint_is_refused_before_any_network_call(save_tiny, fsc, hub):
    original = save_tiny()
    (original / "config.json").write_text("{}")
    line = assert_one_line_error(fsc("push", original, "--repo", "alice/tiny"))
    assert "config.json: sha256" in line
    assert hub.requests == []


def test_pull_of_an_unknown_repo(fsc, hub, token, tmp_path):
    r = fsc("pull", "alice/nothing", "--dir", tmp_path / "out" / "c")
    line = assert_one_line_error(r, token)
    assert "repository alice/nothing not found" in line
    assert not (tmp_path / "out").exists()  # not even the parent it would have made


def test_pull_of_an_unknown_revision_leaves_the_existing_checkpoint_untouched(
        save_tiny, fsc, hub, tmp_path):
    hub.put_repo("alice/tiny", _checkpoint_files(save_tiny("remote")))
    local = save_tiny("local", seed=7)
    before = digest(local)
    r = fsc("pull", "alice/tiny@no-such-branch", "--dir", local, "--force")
    assert "revision 'no-such-branch' not found" in assert_one_line_error(r)
    assert digest(local) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_pull_into_an_existing_checkpoint_needs_force(save_tiny, fsc, hub, tmp_path):
    local = save_tiny("local")
    before = digest(local)
    line = assert_one_line_error(fsc("pull", "alice/tiny", "--dir", local))
    assert "already exists" in line and "--force" in line
    assert hub.requests == [] and digest(local) == before


def test_pull_with_force_replaces_only_after_verification(save_tiny, fsc, hub):
    remote = save_tiny("remote", seed=3)
    hub.put_repo("alice/tiny", _checkpoint_files(remote))
    local = save_tiny("local", seed=4)
    r = fsc("pull", "alice/tiny", "--dir", local, "--force")
    assert r.returncode == 0, r.stderr
    assert digest(local) == digest(remote)


def test_pull_of_a_corrupted_file_is_caught_and_nothing_is_written(save_tiny, fsc, hub, tmp_path):
    files = _checkpoint_files(save_tiny("remote"))
    weights = bytearray(files["model.safetensors"])
    weights[len(weights) // 2] ^= 0x01
    hub.put_repo("alice/tiny", {**files, "model.safetensors": bytes(weights)})
    line = assert_one_line_error(fsc("pull", "alice/tiny", "--dir", tmp_path / "pulled"))
    assert "failed verification" in line and "model.safetensors: sha256" in line
    assert not (tmp_path / "pulled").exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_pull_of_a_repo_that_is_not_a_checkpoint(fsc, hub, tmp_path):
    hub.put_repo("alice/other", {"README.md": b"# hello\n"})
    line = assert_one_line_error(fsc("pull", "alice/other", "--dir", tmp_path / "c"))
    assert "not an fsc checkpoint" in line
    assert not (tmp_path / "c").exists()


def test_pull_when_the_server_fails(save_tiny, fsc, hub, tmp_path):
    hub.put_repo("alice/tiny", _checkpoint_files(save_tiny("remote")))
    hub.fail["info"] = 500
    line = assert_one_line_error(fsc("pull", "alice/tiny", "--dir", tmp_path / "c"))
    assert "HTTP 500" in line
    assert not (tmp_path / "c").exists()


def test_pull_when_the_hub_cannot_be_reached(fsc, hf_env, tmp_path):
    with socket.socket() as s:  # a port that nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**hf_env, "HF_ENDPOINT": f"http://127.0.0.1:{port}"}
    line = assert_one_line_error(fsc("pull", "alice/tiny", "--dir", tmp_path / "c", env=env))
    assert "cannot reach the Hub" in line
    assert not (tmp_path / "c").exists()


def test_pull_in_offline_mode(fsc, hf_env, hub, tmp_path):
    env = {**hf_env, "HF_HUB_OFFLINE": "1"}
    line = assert_one_line_error(fsc("pull", "alice/tiny", "--dir", tmp_path / "c", env=env))
    assert "HF_HUB_OFFLINE is set" in line
    assert hub.requests == []


def test_bad_repo_ids_are_refused(fsc_main, hub, tmp_path):
    """Refused before the Hub's client is asked anything (in this process: a new one a repo id
    costs seconds and checks nothing more)."""
    for ref in ("no-owner", "a/b/c", "alice/tiny@", "../x"):
        r = fsc_main("pull", ref, "--dir", tmp_path / "c")
        assert r.returncode == 2  # a usage error
        assert "OWNER/NAME" in assert_one_line_error(r) or "empty revision" in r.stderr
    assert hub.requests == []
    assert not (tmp_path / "c").exists()


def test_artifacts_of_an_empty_store(fsc, tmp_path):
    r = fsc("artifacts")
    assert r.returncode == 0 and "no checkpoints recorded" in r.stdout
    r = fsc("artifacts", "--json")
    assert r.returncode == 0 and r.stdout.strip() == "[]"


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_artifacts_keep_the_path_whole_at_80_columns(tmp_path, run_fsc):
    """The path is the column a reader needs: at 80 columns others leave, it is never cut;
    --wide keeps every column."""
    import os

    from fsc.cli.main import main

    deep = tmp_path / ("a-rather-long-folder-name-" * 2) / "checkpoint-of-tiny-attention"
    assert main(["build", "tiny_attn", "--save", str(deep), "--store", str(tmp_path / "st")]) == 0
    env = {**os.environ, "COLUMNS": "80"}
    res = run_fsc("artifacts", "--store", tmp_path / "st", env=env, check=0)
    assert "…" not in res.stdout and max(len(line) for line in res.stdout.splitlines()) <= 80
    cells = "".join(line.split("│")[1].strip() for line in res.stdout.splitlines()
                    if line.count("│") >= 2)  # the path column, its folded lines joined
    assert str(deep) in cells
    wide = run_fsc("artifacts", "--store", tmp_path / "st", "--wide", env=env, check=0).stdout
    assert "commit" in wide and "when (UTC)" in wide and str(deep) in wide
