"""`fsc import`, second walkthrough: sliding windows and biases read as each architecture's
transformers code reads them; weights in sharded pytorch_model bins, or an index whose shards
are missing, never decoded or written as seeded weights or a bare recipe; `--out` and `--name`
as a user gives them (., a folder ending in /, a recipe file name for a checkpoint, a name
with a slash); an hf: import pinned to the commit it read, offline from the local cache."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

transformers = pytest.importorskip("transformers")


def _one_line(res, code: int = 2) -> str:
    assert res.returncode == code, res.stdout + res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    return " ".join(res.stderr.split())


def _changed(published, tmp_path, family: str, folder: str = "src", **changes):
    """A config-only folder of `family`, its config.json changed (None removes a key)."""
    data = json.loads((published(family) / "config.json").read_text())
    data.update(changes)
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "config.json").write_text(
        json.dumps({k: v for k, v in data.items() if v is not None}))
    return tmp_path / folder


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_a_qwen_config_without_use_sliding_window_attends_to_the_whole_prefix(
        published, fsc_main, tmp_path, family):
    """transformers' Qwen configs default use_sliding_window to false, and then drop the
    window: every layer attends to the whole prefix (fsc read a window of 7)."""
    src = _changed(published, tmp_path, family, use_sliding_window=None, layer_types=None,
                   max_window_layers=0, sliding_window=8)
    assert set(transformers.AutoConfig.from_pretrained(src).layer_types) == {"full_attention"}
    res = fsc_main("import", src)
    assert res.returncode == 0 and "window" not in res.stdout, res.stderr + res.stdout


def test_a_mistral_window_slides_whatever_use_sliding_window_says(published, fsc_main,
                                                                  tmp_path):
    """Mistral reads no use_sliding_window: its window holds (fsc dropped it)."""
    src = _changed(published, tmp_path, "mistral_window", use_sliding_window=False)
    res = fsc_main("import", src)
    assert res.returncode == 0 and "  window: 7\n" in res.stdout, res.stderr + res.stdout


def test_a_llama_window_is_refused_either_way(published, fsc_main, tmp_path):
    """transformers' Llama masks no window but its cache keeps one: refused, whether the
    config names the sliding layers or not (layer_types made fsc import a window)."""
    src = _changed(published, tmp_path, "llama", sliding_window=8,
                   layer_types=["sliding_attention"] * 2)
    assert "sliding_window 8 is not supported" in _one_line(fsc_main("import", src))


def test_biases_only_where_the_architecture_reads_them(published, fsc_main, tmp_path):
    """Mistral's projections never have biases, whatever attention_bias says (fsc read
    qkvo); a Qwen's MLP reads no mlp_bias (fsc refused it); Llama's does (refused)."""
    src = _changed(published, tmp_path, "mistral", "m", attention_bias=True)
    res = fsc_main("import", src)
    assert res.returncode == 0 and "  bias:" not in res.stdout, res.stderr + res.stdout
    src = _changed(published, tmp_path, "qwen3", "q", mlp_bias=True)
    assert fsc_main("import", src).returncode == 0
    src = _changed(published, tmp_path, "llama", "l", mlp_bias=True)
    assert "mlp_bias is not supported" in _one_line(fsc_main("import", src))


def _sharded_bins(src, dst, index_only=False):
    """`src`'s weights as two pytorch_model-0000N-of-00002.bin shards and their index."""
    dst.mkdir()
    shutil.copy(src / "config.json", dst)
    state = load_file(src / "model.safetensors")
    names = sorted(state)
    weight_map = {}
    for i, part in enumerate((names[: len(names) // 2], names[len(names) // 2:])):
        shard = f"pytorch_model-0000{i + 1}-of-00002.bin"
        weight_map |= dict.fromkeys(part, shard)
        if not index_only:
            torch.save({k: state[k] for k in part}, dst / shard)
    (dst / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return dst


def test_sharded_pytorch_bins_import_as_a_checkpoint(published, fsc_main, tmp_path):
    """They wrote a bare recipe at --out, and decode ran seeded random weights."""
    src = _sharded_bins(published("llama"), tmp_path / "bins")
    res = fsc_main("import", "bins", "--out", "ck", "--store", "st", "--json")
    assert res.returncode == 0 and "checkpoint" in json.loads(res.stdout), res.stderr
    ours = load_file(tmp_path / "ck" / "model.safetensors")
    theirs = load_file(published("llama") / "model.safetensors")
    assert torch.equal(ours["layers.1.ffn.up.weight"],
                       theirs["model.layers.1.mlp.up_proj.weight"])
    res = fsc_main("decode", src, "--prompt-ids", "1,2", "--length", "2", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["stats"]["weights"] == f"published weights of {src}"


@pytest.mark.parametrize("kind", ["bin", "safetensors"])
def test_an_index_whose_shards_are_missing_is_refused(published, fsc_main, tmp_path, kind):
    """An index with no shard beside it was read as no weights at all."""
    if kind == "bin":
        _sharded_bins(published("llama"), tmp_path / "src", index_only=True)
        shard = "pytorch_model-00001-of-00002.bin"
    else:
        (tmp_path / "src").mkdir()
        shutil.copy(published("llama") / "config.json", tmp_path / "src")
        shard = "model-00001-of-00002.safetensors"
        (tmp_path / "src" / "model.safetensors.index.json").write_text(
            json.dumps({"weight_map": {"model.embed_tokens.weight": shard}}))
    for args in (("import", "src", "--out", "ck", "--store", "st"),
                 ("decode", "src", "--prompt-ids", "1,2", "--length", "2")):
        res = fsc_main(*args)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert f"error: src: {shard}, named by its index, is missing" in res.stderr
    assert not (tmp_path / "ck").exists()


def test_the_recipe_of_dot_is_named_after_the_folder(published, fsc_main, tmp_path,
                                                     monkeypatch):
    """`fsc import .` named the recipe '.', and --out DIR wrote DIR/..yaml."""
    folder = tmp_path / "tiny-qwen"
    shutil.copytree(published("qwen3"), folder)
    (tmp_path / "out").mkdir()
    monkeypatch.chdir(folder)
    res = fsc_main("import", ".", "--out", tmp_path / "out", "--recipe-only")
    assert res.returncode == 0, res.stderr
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["tiny-qwen.yaml"]
    assert "\nname: tiny-qwen\n" in (tmp_path / "out" / "tiny-qwen.yaml").read_text()


def test_out_as_a_user_gives_it(published, fsc_main, tmp_path):
    """A path ending in / is a folder, made as --save makes one (it was written as a file of
    that name); a file's folder must exist, as every command's --out file's; a .yaml name for
    weights is refused (it became a checkpoint directory of that name); a file in the way is
    named."""
    _changed(published, tmp_path, "llama", "cfg")
    res = fsc_main("import", "cfg", "--out", "new/")
    assert res.returncode == 0 and (tmp_path / "new" / "cfg.yaml").is_file(), res.stderr
    msg = _one_line(fsc_main("import", "cfg", "--out", "a/b/r.yaml"))
    assert "--out a/b/r.yaml: folder a/b does not exist" in msg and not (tmp_path / "a").exists()
    res = fsc_main("import", "cfg", "--out", "a/b/")
    assert res.returncode == 0 and (tmp_path / "a" / "b" / "cfg.yaml").is_file(), res.stderr
    msg = _one_line(fsc_main("import", "cfg", "--out", "a/b/cfg.yaml/x.yaml"))
    assert "a/b/cfg.yaml is a file, not a folder" in msg
    msg = _one_line(fsc_main("import", published("llama"), "--out", "ck.yaml"))
    assert "a recipe file's name" in msg and "--recipe-only" in msg
    assert not (tmp_path / "ck.yaml").exists()
    res = fsc_main("import", published("llama"), "--out", "ck.yaml", "--recipe-only")
    assert res.returncode == 0 and (tmp_path / "ck.yaml").is_file(), res.stderr


def test_name_is_checked_as_name_and_stays_in_its_folder(published, fsc_main, tmp_path):
    """--name ../x wrote outside the --out folder, x/y failed to write; a name too long was
    blamed on the config."""
    _changed(published, tmp_path, "llama", "cfg")
    (tmp_path / "out").mkdir()
    for name, file in (("../x", "_x.yaml"), ("x/y", "x_y.yaml")):
        res = fsc_main("import", "cfg", "--out", "out", "--name", name)
        assert res.returncode == 0 and (tmp_path / "out" / file).is_file(), res.stderr
        assert f"\nname: {name}\n" in (tmp_path / "out" / file).read_text()
    assert not (tmp_path / "x.yaml").exists()
    msg = _one_line(fsc_main("import", "cfg", "--name", "a" * 129))
    assert msg.startswith("error: --name: 129 characters") and "config" not in msg
    assert "SOURCE is empty" in _one_line(fsc_main("import", ""))


@pytest.mark.parametrize(("changes", "words"), [
    ({"architectures": "LlamaForCausalLM"}, "architectures must be a list of names"),
    ({"num_hidden_layers": None}, "LlamaForCausalLM needs 'num_hidden_layers'"),
])
def test_a_malformed_config_says_what_is_wrong(published, fsc_main, tmp_path, changes, words):
    """A string of architectures read as its first letter ('architecture L'); a missing key
    as `must be an integer (got None)`."""
    _changed(published, tmp_path, "llama", **changes)
    assert words in _one_line(fsc_main("import", "src"))


def _cache(root, repo: str, commit: str, folder) -> None:
    """`folder` as the Hugging Face cache holds repo's main at `commit`."""
    entry = root / f"models--{repo.replace('/', '--')}"
    (entry / "refs").mkdir(parents=True)
    (entry / "refs" / "main").write_text(commit)
    shutil.copytree(folder, entry / "snapshots" / commit)


def test_an_hf_import_records_the_commit_it_read(published, fsc_main, tmp_path, monkeypatch):
    """Offline, from the local cache: the checkpoint names the commit (it named the branch,
    which a later `fsc verify --against transformers` reads wherever main moved); a repo not
    in the cache says so."""
    from huggingface_hub import constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    _cache(tmp_path / "hub", "acme/tiny", commit, published("llama"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    for ref, out in (("hf:acme/tiny", "ck"), ("hf:acme/tiny@main", "ck2")):
        res = fsc_main("import", ref, "--out", out, "--store", "st")
        assert res.returncode == 0, res.stderr
        config = json.loads((tmp_path / out / "config.json").read_text())
        assert config["imported_from"] == f"hf:acme/tiny@{commit} (LlamaForCausalLM)"
    msg = _one_line(fsc_main("import", "hf:acme/other@v2"), code=1)
    assert "hf:acme/other@v2: not in the local Hugging Face cache" in msg
