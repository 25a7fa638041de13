"""One researcher's day, command to command: import a published model, train from it (adapt it
to block diffusion, or go on training it), and hand the result on. Each test checks a seam, that
the next command reads what the previous one wrote: the tokenizer a run starts from, the
published model's generation settings, where the weights came from."""

import json
import os
import shutil

import pytest
from fsc_run import in_process, new_process
from published import save_llama_with_bos, save_published

from fsc.source import Source
from tests.hub.fakehub import FakeHub

pytest.importorskip("transformers")
# transformers saves a model and fsc imports and adapts it, in each worker: make test-slow
pytestmark = pytest.mark.slow

TEXT = ("--data", "shakespeare", "--seq-len", "16", "--batch", "1")
EOS = [2, 7]  # the generation config's EOS ids: more than the tokenizer's own (</s>, 2)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """(root, published Llama folder with a BOS tokenizer, its `fsc import`); its
    generation_config.json lists two EOS ids, as Llama 3's and Qwen3's do."""
    root = tmp_path_factory.mktemp("flow")
    folder = save_llama_with_bos(root / "pub")
    generation = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**generation, "eos_token_id": EOS}))
    in_process("import", folder, "--out", root / "ck", "--store", root / "st", check=0)
    return root, folder, root / "ck"


@pytest.fixture(scope="module")
def adapted(imported):
    """The import adapted to G 4 for two steps: its newest step checkpoint."""
    root, _, ck = imported
    res = in_process("train", ck, "--G", "4", *TEXT, "--train-steps", "2", "--out",
                     root / "adapt", "--store", root / "st", "--json", check=0)
    return json.loads(res.stdout)["checkpoint"]


def _prompt_ids(ref, *extra) -> list[int]:
    res = in_process("decode", ref, "--prompt", "To be", "--length", "2", "--json", *extra,
                     check=0)
    return json.loads(res.stdout)["prompt_ids"]


def test_training_on_from_an_import_reads_text_with_its_tokenizer(fsc_main, imported, tmp_path):
    """`fsc train CKPT` without --G (going on at G 1) read the data with fsc's bytes, so the
    published model's ids were trained as other text and the checkpoint decoded bytes."""
    _, _, ck = imported
    res = fsc_main("train", ck, *TEXT, "--train-steps", "1", "--out", tmp_path / "ft",
                   "--store", tmp_path / "st", "--json", check=0)
    step = json.loads(res.stdout)["checkpoint"]
    training = json.loads((tmp_path / step / "config.json").read_text())["training"]
    assert training["tokenizer"] == str(ck.resolve())
    # its sequences begin as fsc trains them, without BOS; the text's tokens are the import's
    assert _prompt_ids(tmp_path / step) == _prompt_ids(ck)[1:]
    assert "tokenizer.json" in (tmp_path / step / "checksums.sha256").read_text()


def test_training_on_from_a_copied_denoiser_reads_text_with_its_tokenizer(fsc_main, adapted,
                                                                          tmp_path):
    """A pulled (copied) adapted checkpoint trains on with the tokenizer it carries, its mask
    token included, not fsc's bytes."""
    copy = tmp_path / "pulled"
    shutil.copytree(adapted, copy, ignore=shutil.ignore_patterns("training_state*"))
    res = fsc_main("train", copy, *TEXT, "--train-steps", "1", "--out", tmp_path / "more",
                   "--store", tmp_path / "st", "--json", check=0)
    step = tmp_path / json.loads(res.stdout)["checkpoint"]
    assert json.loads((step / "config.json").read_text())["training"]["tokenizer"] == str(
        copy.resolve())
    assert _prompt_ids(step) == _prompt_ids(copy)


def test_an_import_without_a_tokenizer_is_refused_for_training(fsc_main, tmp_path):
    """It reads token ids alone: training it on text read it with fsc's bytes (refused only
    where its vocabulary was under 260, by a message about vocab sizes)."""
    folder = save_published("mamba2", tmp_path / "pub")
    fsc_main("import", folder, "--out", tmp_path / "ck", "--store", tmp_path / "st", check=0)
    for extra in (("--G", "4"), ()):
        res = fsc_main("train", tmp_path / "ck", *extra, *TEXT, "--train-steps", "1",
                       "--out", tmp_path / "out", "--store", tmp_path / "st", check=2)
        assert res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1
        assert "without a tokenizer" in res.stderr and "--tokenizer DIR" in res.stderr
        assert not (tmp_path / "out").exists()


def test_a_published_folder_with_weights_is_refused_as_a_training_source(fsc_main, imported,
                                                                         tmp_path):
    """`fsc decode FOLDER` and `fsc verify FOLDER` read the folder's weights; `fsc train
    FOLDER` trained its recipe from seeded weights on bytes, under the published name."""
    _, folder, _ = imported
    res = fsc_main("train", folder, "--G", "4", *TEXT, "--train-steps", "1", "--out",
                   tmp_path / "out", "--store", tmp_path / "st", check=2)
    assert res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1
    assert f"fsc import {folder} --out CKPT" in res.stderr and "--recipe-only" in res.stderr
    assert not (tmp_path / "out").exists()


def test_the_adapted_model_stops_where_the_published_one_does(adapted, imported):
    """The published generation_config.json (its EOS ids) goes into the run's tokenizer and
    every step, checksummed: the adapted model and its copies stop at every EOS it lists."""
    root, _, ck = imported
    assert Source.read(ck).tokenizer(need_mask=False).stops == tuple(EOS)
    assert Source.read(adapted).tokenizer().stops == tuple(EOS)
    assert "generation_config.json" in (root / adapted / "checksums.sha256").read_text()
    assert (root / "adapt" / "tokenizer" / "generation_config.json").is_file()


def test_the_adapted_card_names_the_published_model(adapted, imported):
    """`adapted_from` names the checkpoint by its absolute path; a pushed copy's card and
    config also name the published model the import read."""
    root, folder, ck = imported
    published = json.loads((ck / "config.json").read_text())["imported_from"]
    was = json.loads((root / adapted / "config.json").read_text())["training"]["adapted_from"]
    assert was["imported_from"] == published == f"{folder.resolve()} (LlamaForCausalLM)"
    assert f"the published weights of `{published}`" in (root / adapted / "README.md").read_text()


def test_an_fsc_checkpoint_is_not_imported_as_a_published_model(fsc_main, imported, tmp_path):
    """What `fsc push` sent reads, through hf:, as a published config with no architecture
    ('architecture unknown is not supported'): it is named as an fsc checkpoint, and `fsc pull`
    as the way to fetch it; a local one without its recipe says what it lacks."""
    _, _, ck = imported
    with FakeHub("hf_fsctest_flow") as hub:
        hub.put_repo("alice/imp", {"config.json": (ck / "config.json").read_bytes()})
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("HF_", "FSC_"))}
        env.update(HF_ENDPOINT=hub.url, HF_HUB_DISABLE_XET="1", HF_HOME=str(tmp_path / "hf"),
                   NO_PROXY="127.0.0.1,localhost", FSC_STORE=str(tmp_path / "st"))
        res = new_process("import", "hf:alice/imp@main", "--out", "x", env=env, cwd=tmp_path,
                          timeout=120)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "an fsc checkpoint" in res.stderr and "fsc pull alice/imp@main" in res.stderr
    (tmp_path / "bare").mkdir()
    shutil.copyfile(ck / "config.json", tmp_path / "bare" / "config.json")
    res = fsc_main("import", tmp_path / "bare", check=2)
    assert "an fsc checkpoint" in res.stderr and "without its fsc_recipe.yaml" in res.stderr


def test_the_adapted_model_is_compared_with_the_import_it_came_from(fsc_main, imported, adapted,
                                                                   tmp_path):
    """genppl of the adapted denoiser with the import as --baseline (the AR row beside it):
    its tokenizer is the import's plus a mask token, which no text encodes to; it was refused
    as another tokenizer."""
    _, _, ck = imported
    res = fsc_main("eval", adapted, "--task", "genppl", "--data", "shakespeare", "--scorer",
                   ck, "--baseline", ck, "--samples", "1", "--lengths", "4", "--prompt-length",
                   "4", "--steps", "4", "--store", tmp_path / "st", "--json", check=0)
    modes = [r["mode"] for r in json.loads(res.stdout)["rows"]]
    assert modes.count("ar") == 1 and modes.count("diffusion") == 1


def test_a_blank_recipe_name_is_refused(fsc_main, imported, tmp_path):
    """`fsc import --name ''` took the folder's name without a word, and `--name '  '` named the
    recipe with spaces; a recipe file's blank name is refused too."""
    _, folder, _ = imported
    for name in ("", "  "):
        res = fsc_main("import", folder, "--out", tmp_path / "n.yaml", "--recipe-only",
                       "--name", name, check=2)
        assert res.stderr.startswith("error: --name is empty")
    (tmp_path / "blank.yaml").write_text('name: "  "\nd_model: 8\nn_layers: 1\nvocab_size: 16\n'
                                         "layers: {default: attention}\n")
    res = fsc_main("build", tmp_path / "blank.yaml", check=2)
    assert "name: is blank" in res.stderr
