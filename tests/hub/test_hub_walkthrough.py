"""push and pull as a researcher meets them: a server that fails one route, a download cut
short, a destination that is not a checkpoint. One line, nothing half-written."""

from __future__ import annotations

import hashlib

import fakehub
import pytest
from hub_helpers import assert_one_line_error, digest


def _checkpoint_files(d) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir()}


def _no_temporaries(directory) -> bool:
    return not [p for p in directory.iterdir() if p.name.startswith(".")]


def test_pull_force_replaces_only_a_checkpoint(save_tiny, fsc, hub, tmp_path):
    """--force replaces a checkpoint; a folder of other files is refused before any request."""
    hub.put_repo("alice/tiny", _checkpoint_files(save_tiny("remote")))
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.txt").write_text("mine\n")
    line = assert_one_line_error(fsc("pull", "alice/tiny", "--dir", data, "--force"))
    assert "not a checkpoint directory" in line and "--dir" in line
    assert (data / "notes.txt").read_text() == "mine\n" and len(list(data.iterdir())) == 1
    assert hub.requests == [] and _no_temporaries(tmp_path)
    assert not (tmp_path / "store").exists()


def test_pull_when_the_file_listing_fails_says_so(save_tiny, fsc, hub, tmp_path):
    """A failed listing of the repository is the Hub's answer, not a file the repository lacks
    (the client would otherwise hand back its half-filled download directory)."""
    hub.put_repo("alice/tiny", _checkpoint_files(save_tiny("remote")))
    hub.fail["tree"] = 400
    line = assert_one_line_error(fsc("pull", "alice/tiny", "--dir", tmp_path / "c"))
    assert "HTTP 400" in line and "injected failure of tree" in line, line
    assert "lacks" not in line
    assert not (tmp_path / "c").exists() and _no_temporaries(tmp_path)
    assert not (tmp_path / "store").exists()


def test_pull_of_an_answer_without_a_message_names_the_status(save_tiny, fsc, hub, tmp_path):
    hub.put_repo("alice/tiny", _checkpoint_files(save_tiny("remote")))
    hub.fail["resolve"] = 404  # no X-Error-Code, and HEAD has no body
    line = assert_one_line_error(fsc("pull", "alice/tiny", "--dir", tmp_path / "c"))
    assert "HTTP 404 for alice/tiny@main" in line and "None" not in line, line
    assert not (tmp_path / "c").exists() and _no_temporaries(tmp_path)


@pytest.mark.slow  # the client's own 1 s back-off; the no-op push below keeps its log quiet
def test_a_retried_server_error_is_not_shown(save_tiny, fsc, hub, monkeypatch):
    """The client retries a 5xx; a push that then succeeds prints its result and nothing of the
    client's retry log."""
    failed = []
    preupload = fakehub._Handler.preupload

    def once(self, *args, **kw):
        if not failed:
            failed.append(1)
            raise fakehub.HubError(503, "try again")
        return preupload(self, *args, **kw)

    monkeypatch.setattr(fakehub._Handler, "preupload", once)
    r = fsc("push", save_tiny(), "--repo", "alice/tiny")
    assert r.returncode == 0, r.stderr
    assert failed and r.stderr == "", r.stderr
    assert r.stdout.startswith("pushed tiny_hybrid ")


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_pushing_the_same_checkpoint_again_prints_no_client_warning(save_tiny, fsc, hub):
    ckpt = save_tiny()
    hub.put_repo("alice/tiny", {**_checkpoint_files(ckpt), ".gitattributes": b""})
    r = fsc("push", ckpt, "--repo", "alice/tiny")
    assert r.returncode == 0 and r.stderr == "", r.stderr


@pytest.mark.slow  # the client's resume attempts
def test_an_interrupted_download_is_one_line_and_leaves_nothing(save_tiny, fsc, hub, tmp_path,
                                                                monkeypatch):
    """The server closes the connection half-way through the weights, every time: the client's
    resume attempts stay quiet, the line says the transfer broke off, nothing is left."""
    hub.put_repo("alice/tiny", _checkpoint_files(save_tiny("remote")))
    resolve = fakehub._Handler.resolve

    def cut(self, repo_id, revision, *path, query):
        name = "/".join(path)
        if self.command != "GET" or name != "model.safetensors":
            return resolve(self, repo_id, revision, *path, query=query)
        repo, sha = self.hub.head(repo_id, revision, self._authed())
        data = repo.commits[sha].files[name]
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.send_header("X-Repo-Commit", sha)
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self.close_connection = True

    monkeypatch.setattr(fakehub._Handler, "resolve", cut)
    local = save_tiny("local", seed=5)
    before = digest(local)
    line = assert_one_line_error(fsc("pull", "alice/tiny", "--dir", local, "--force"))
    assert "broke off" in line, line
    assert digest(local) == before and _no_temporaries(tmp_path)
    assert not (tmp_path / "store").exists()


@pytest.mark.slow  # a training run, two pushes and a pull
def test_a_trained_run_is_shared_and_pulled_back_verified(fsc, hub, tmp_path):
    """train → push the run directory → push a new revision → pull each revision elsewhere:
    the same checksummed files, no training state, and the store shows every step."""
    import json

    from fsc_run import in_process

    in_process("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "2",
               "--batch", "2", "--out", tmp_path / "run", "--store", tmp_path / "store", check=0)
    step = tmp_path / "run" / "step-000002"
    first = json.loads(fsc("push", tmp_path / "run", "--repo", "alice/t", "--json").stdout)
    in_process("build", "tiny_attn", "--save", tmp_path / "b", "--seed", "3",
               "--store", tmp_path / "store", check=0)
    second = json.loads(fsc("push", tmp_path / "b", "--repo", "alice/t", "--revision", "v2",
                            "--json").stdout)
    assert first["path"] == str(step.resolve()) and second["revision"] == "v2"
    for ref, src, push in (("alice/t", step, first), ("alice/t@v2", tmp_path / "b", second)):
        r = fsc("pull", ref, "--dir", tmp_path / "pulled" / ref.replace("/", "_"), "--json")
        assert r.returncode == 0, r.stderr
        pulled = json.loads(r.stdout)
        assert pulled["commit_id"] == push["commit_id"]
        got = digest(tmp_path / "pulled" / ref.replace("/", "_"))
        assert got == {k: v for k, v in digest(src).items() if not k.startswith("training_")}
    rows = json.loads(fsc("artifacts", "--json").stdout)
    assert [r["action"] for r in rows] == ["saved", "pushed", "saved", "pushed", "pulled",
                                           "pulled"]


@pytest.mark.slow  # a push, a branch and a pull against the local Hub: ~20 s: make test-slow (CI runs it)
def test_pushing_what_the_branch_holds_says_so_and_records_nothing(save_tiny, fsc, hub,
                                                                   tmp_path):
    """A second push of the same files makes no commit: said in one line, no second row."""
    import json

    ckpt = save_tiny()
    first = fsc("push", ckpt, "--repo", "alice/tiny", "--store", tmp_path / "store")
    assert first.returncode == 0 and first.stdout.startswith("pushed "), first.stderr
    again = fsc("push", ckpt, "--repo", "alice/tiny", "--store", tmp_path / "store", "--json")
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["unchanged"] is True and "artifact_id" not in doc
    shown = fsc("push", ckpt, "--repo", "alice/tiny", "--store", tmp_path / "store")
    assert shown.stdout.startswith("nothing new to push: alice/tiny@main holds"), shown.stdout
    actions = json.loads(fsc("artifacts", "--store", tmp_path / "store", "--json").stdout)
    assert [a["action"] for a in actions] == ["pushed"], actions
