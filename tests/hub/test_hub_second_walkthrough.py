"""push, pull and artifacts as a new researcher meets them, second pass: names the Hub refuses,
--private on a public repository, a store that cannot be written, a new branch that holds the
checkpoint already, the repository owner's other files, a model card its owner edits, the card's sizes."""

from __future__ import annotations

import json

import pytest
from fsc_run import in_process
from hub_helpers import assert_one_line_error


def _checkpoint_files(d) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir()}


@pytest.mark.parametrize("name", ["alice/x--y", "alice/x.", "alice/x-", "alice/x.git",
                                  "alice/" + "a" * 97])
def test_names_the_hub_refuses_are_refused_before_anything(name, tmp_path):
    """The Hub client's own rules (no '--', no trailing '.', 96 characters, ...): a usage error,
    exit 2, before the checkpoint is read or the Hub asked."""
    for args in (("push", tmp_path / "nowhere", "--repo", name), ("pull", name)):
        r = in_process(*args, "--store", tmp_path / "store")
        assert r.returncode == 2, r.stderr
        assert "is not a Hub repository id" in " ".join(r.stderr.split()), r.stderr
    assert not (tmp_path / "store").exists()


@pytest.mark.slow  # a push through the client: a process that imports torch
def test_private_push_to_a_public_repository_is_refused(save_tiny, fsc, hub, tmp_path):
    """--private never publishes: a repository that exists and is public is left as it was."""
    hub.put_repo("alice/pub", {"README.md": b"# public\n"})
    before = hub.files("alice/pub")
    line = assert_one_line_error(fsc("push", save_tiny(), "--repo", "alice/pub", "--private"))
    assert "alice/pub exists and is public" in line and "--private" in line, line
    assert hub.files("alice/pub") == before and list(hub.repos["alice/pub"].branches) == ["main"]
    assert not (tmp_path / "store").exists()


def test_a_store_that_cannot_be_written_fails_before_push_and_pull(fsc, hub, tmp_path):
    """Never a commit, or a pulled folder, that the store then fails to record."""
    (tmp_path / "afile").write_text("x")
    for args in (("push", tmp_path / "ckpt", "--repo", "alice/t"),
                 ("pull", "alice/t", "--dir", tmp_path / "pulled")):
        line = assert_one_line_error(fsc(*args, "--store", tmp_path / "afile"))
        assert "store" in line and "not a directory" in line, line
    assert hub.requests == [] and not (tmp_path / "pulled").exists()
    r = in_process("artifacts", "--store", tmp_path / "afile")
    assert r.returncode == 2 and "not a directory" in r.stderr, r.stdout + r.stderr


@pytest.mark.slow  # two pushes and a listing, each a process of its own
def test_a_new_branch_that_holds_the_checkpoint_already_is_recorded(save_tiny, fsc, hub):
    """--revision exp makes the branch from main; main holds these files already, so no commit
    is made, but the branch is new: said so, and `fsc artifacts` shows the push to exp."""
    ckpt = save_tiny()
    assert fsc("push", ckpt, "--repo", "alice/tiny").returncode == 0
    r = fsc("push", ckpt, "--repo", "alice/tiny", "--revision", "exp")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("made branch alice/tiny@exp from main, which holds tiny_hybrid "
                               "already"), r.stdout
    assert hub.repos["alice/tiny"].branches["exp"] == hub.repos["alice/tiny"].branches["main"]
    rows = json.loads(fsc("artifacts", "--json").stdout)
    assert [(a["action"], a["revision"]) for a in rows] == [("pushed", "main"), ("pushed", "exp")]


@pytest.mark.slow  # a push through the client: a process that imports torch
def test_push_replaces_the_old_checkpoint_and_leaves_the_owners_folders(save_tiny, fsc, hub):
    """Stale top-level weights, index and tokenizer go in the same commit; a weight file in a
    folder of the repository, and any other file, stay."""
    hub.put_repo("alice/tiny", {"model-00001-of-00009.safetensors": b"x",
                                "model.safetensors.index.json": b"{}",
                                "tokenizer.json": b"{}", "notes.txt": b"mine",
                                "onnx/model.safetensors": b"y"})
    ckpt = save_tiny()
    r = fsc("push", ckpt, "--repo", "alice/tiny")
    assert r.returncode == 0, r.stderr
    files = hub.files("alice/tiny")
    assert files["onnx/model.safetensors"] == b"y" and files["notes.txt"] == b"mine"
    assert set(files) == {*_checkpoint_files(ckpt), "notes.txt", "onnx/model.safetensors"}


@pytest.mark.slow  # a push and two pulls through the client, each a process of its own
def test_the_model_card_is_its_owners_to_edit(save_tiny, fsc, hub, tmp_path):
    """The card asks for the real license: a card edited here is pushed as it is, and one
    edited on the Hub (its editor asks for a license too) is pulled as it is. Both failed
    verification: the card was checksummed like the weights. The weights still are."""
    ckpt = save_tiny()
    card = ckpt / "README.md"
    card.write_text(card.read_text().replace("license: other", "license: apache-2.0"))
    assert fsc("push", ckpt, "--repo", "alice/tiny").returncode == 0
    files = hub.files("alice/tiny")
    assert b"license: apache-2.0" in files["README.md"]
    assert b"README.md" not in files["checksums.sha256"]
    hub.put_repo("alice/tiny", {**files, "README.md": b"---\nlicense: mit\n---\n# tiny\n"})
    r = fsc("pull", "alice/tiny", "--dir", tmp_path / "pulled")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "pulled" / "README.md").read_bytes() == b"---\nlicense: mit\n---\n# tiny\n"
    hub.put_repo("alice/tiny", {**files, "config.json": files["config.json"] + b" "})
    r = fsc("pull", "alice/tiny", "--dir", tmp_path / "again")
    assert r.returncode != 0 and "config.json" in r.stderr and not (tmp_path / "again").exists()


def test_the_cards_cache_table_shows_small_sizes(save_tiny):
    """tiny_hybrid at S = 4,096: KV 4,096 x 256 bytes = 1 MiB, state 17,472 bytes; never
    '0.001 GiB'."""
    card = (save_tiny() / "README.md").read_text()
    assert ("| 4,096 | 1,048,576 (1.00 MiB) | 17,472 (17.1 KiB) | 1,066,048 (1.02 MiB) |"
            in card), card
    assert "GiB" not in card


def test_a_failed_pull_leaves_none_of_the_folders_it_made(fsc, hub, tmp_path):
    """--dir a/b/c of a repository that is not there: neither c nor a/b nor a is left behind."""
    line = assert_one_line_error(fsc("pull", "alice/nothing", "--dir", tmp_path / "a" / "b" / "c"))
    assert "repository alice/nothing not found" in line
    assert not (tmp_path / "a").exists()


def test_repo_given_twice_is_refused(tmp_path):
    """Where the weights go is never decided by which --repo came last."""
    r = in_process("push", tmp_path / "ckpt", "--repo", "alice/private-one", "--repo",
                   "alice/public-one", "--store", tmp_path / "store")
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and "--repo given 2 times" in said, said
