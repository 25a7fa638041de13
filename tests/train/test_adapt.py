"""fsc train CKPT --G N: an autoregressive checkpoint (trained next-token, or imported) adapted
into a block-diffusion denoiser, its weights kept; the result decodes by block diffusion and
its cache is exact. Bad requests are one line, and write nothing."""

import json
import shutil
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).parents[1] / "imports"))

TEXT = ["--data", "shakespeare", "--seq-len", "32", "--batch", "4"]


@pytest.fixture(scope="module")
def ar_ckpt(tmp_path_factory):
    from fsc_run import in_process

    root = tmp_path_factory.mktemp("adapt")
    in_process("train", "quality_attn", "--objective", "ar", *TEXT, "--train-steps", "2",
               "--out", root / "ar", "--store", root / "st", check=0)
    return root / "ar"


@pytest.fixture(scope="module")
def adapted(ar_ckpt):
    """The AR checkpoint adapted at G 8 for two steps: its summary (--json)."""
    from fsc_run import in_process

    root = ar_ckpt.parent
    return json.loads(in_process(
        "train", ar_ckpt, "--G", "8", "--objective", "blocks", "--weighting", "masked", *TEXT,
        "--train-steps", "2", "--out", root / "ad", "--store", root / "st", "--json",
        check=0).stdout)


def _adapt(fsc_main, tmp_path, source, *extra, steps=8, check=0):
    return fsc_main("train", source, "--G", "8", "--objective", "blocks", "--weighting",
                    "masked", *TEXT, "--train-steps", str(steps), "--log-every", "1",
                    "--out", tmp_path / "ad", "--store", tmp_path / "st", "--json", *extra,
                    check=check)


def test_the_checkpoint_adapted_is_named_by_its_absolute_path(ar_ckpt, monkeypatch):
    """Given as a relative path, it is recorded whole, as `started_from` is: the card of a
    copy pushed or moved elsewhere would name a path that means nothing there."""
    from fsc.source import load_source_recipe
    from fsc.train.run import adapted

    monkeypatch.chdir(ar_ckpt)
    _, origin = adapted("step-000002", load_source_recipe("step-000002"), 8, None)
    assert origin["checkpoint"] == str(ar_ckpt.resolve() / "step-000002")


def test_an_ar_checkpoint_becomes_a_denoiser_with_its_weights(ar_ckpt, adapted):
    step = Path(adapted["checkpoint"])
    config = json.loads((step / "config.json").read_text())
    was = config["training"]["adapted_from"]
    assert config["training"]["weighting"] == "masked"
    assert was["G"] == 1 and was["checkpoint"].endswith("step-000002")
    assert "block_size: 8" in (step / "fsc_recipe.yaml").read_text()
    assert "Adapted from the autoregressive checkpoint" in (step / "README.md").read_text()
    # two steps at a small learning rate move the weights only a little: they were kept
    start = load_file(ar_ckpt / "step-000002" / "model.safetensors")
    now = load_file(step / "model.safetensors")
    diff = max(float((now[k] - start[k]).abs().max()) for k in start)
    assert 0 < diff < 0.05


def test_the_adapted_denoiser_decodes_exactly(fsc_main, adapted):
    step = adapted["checkpoint"]
    assert fsc_main("verify", step, "--blocks", "2").returncode == 0  # cached == uncached, G 8
    out = json.loads(fsc_main("decode", step, "--prompt", "ROMEO:", "--length", "16",
                              "--json", check=0).stdout)
    assert out["stats"]["mode"] == "diffusion" and out["stats"]["G"] == 8


@pytest.mark.slow  # transformers builds each model: seconds apiece (make test-slow)
@pytest.mark.parametrize("family", ["llama", "qwen3", "mamba2"])
def test_imported_models_adapt_and_learn(fsc_main, tmp_path, family):
    pytest.importorskip("transformers")
    from published import save_bpe_tokenizer, save_published

    # with its tokenizer: an import without one reads ids alone and cannot read text to train
    src = save_bpe_tokenizer(save_published(family, tmp_path / "pub", vocab_size=300), 290)
    fsc_main("import", src, "--out", tmp_path / "ck", "--store", tmp_path / "st", check=0)
    doc = json.loads(_adapt(fsc_main, tmp_path, tmp_path / "ck", "--lr", "3e-3",
                            steps=12).stdout)
    assert doc["final_loss"] < doc["first_loss"]
    assert fsc_main("verify", doc["checkpoint"]).returncode == 0  # cached == uncached


def test_bad_adaptations_are_one_line_and_write_nothing(fsc_main, tmp_path, ar_ckpt, adapted):
    for source, extra, says in (
            (adapted["checkpoint"], ["--G", "4"], "already a block-diffusion checkpoint at G = 8"),
            (ar_ckpt, ["--objective", "ar"], "--objective ar trains at G 1"),
            (ar_ckpt, ["--G", "1"], "--G"),
    ):
        out = tmp_path / "again"
        args = ["train", source, "--G", "8", "--objective", "blocks", *TEXT, "--train-steps",
                "1", "--out", out, "--store", tmp_path / "st2", *extra]
        res = fsc_main(*args)
        assert res.returncode == 2 and says in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
        assert not out.exists() and not (tmp_path / "st2").exists()


def _char_tokenizer(folder, n: int):
    """A tokenizer of the first `n` byte values as characters, with no mask token."""
    from tokenizers import Tokenizer, decoders, models

    folder.mkdir()
    vocab = {chr(i): i for i in range(n - 1)} | {"[UNK]": n - 1}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    tok.decoder = decoders.Fuse()
    tok.save(str(folder / "tokenizer.json"))
    return folder


def test_a_full_vocabulary_without_a_mask_token_is_named(fsc_main, tmp_path, ar_ckpt):
    folder = _char_tokenizer(tmp_path / "tok", 288)  # quality_attn's vocab_size: no free row
    res = fsc_main("train", ar_ckpt, "--G", "8", "--objective", "blocks", *TEXT,
                   "--train-steps", "1", "--tokenizer", folder, "--out", tmp_path / "x",
                   "--store", tmp_path / "st")
    assert res.returncode == 2 and "no mask token" in res.stderr and "no row" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "x").exists()


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_mask_token_is_added_where_the_vocabulary_has_room(fsc_main, tmp_path, ar_ckpt):
    """A tokenizer without a mask token (as a published causal LM's): the token is added at
    the first free row, its embedding starts at the mean of the vocabulary's, the training
    directory holds the tokenizer with it, and the denoiser decodes and resumes with it."""
    from safetensors.torch import load_file as load

    folder = _char_tokenizer(tmp_path / "tok", 200)
    doc = json.loads(_adapt(fsc_main, tmp_path, ar_ckpt, "--tokenizer", folder,
                            steps=2).stdout)
    saved = Path(doc["checkpoint"])
    config = json.loads((saved / "config.json").read_text())["training"]
    tok_dir = Path(config["tokenizer"])
    assert tok_dir == (tmp_path / "ad" / "tokenizer").resolve()
    assert json.loads((tok_dir / "tokenizer.json").read_text())["added_tokens"][-1][
        "content"] == "<|mdm_mask|>"
    from fsc.tokenizer import load_tokenizer

    assert load_tokenizer(tok_dir).mask_id == 200
    start = load(next(ar_ckpt.glob("step-*")) / "model.safetensors")["embed.weight"]
    now = load(saved / "model.safetensors")["embed.weight"]
    mean = start[:200].mean(0)  # two small steps later, row 200 is still near where it began
    assert (now[200] - mean).norm() < 0.2 * (start[200] - mean).norm()
    res = fsc_main("decode", saved, "--prompt", "To bé", "--length", "8", "--json", check=0)
    doc = json.loads(res.stdout)
    assert doc["stats"]["prompt_tokens"] == 5  # the adapted tokenizer's (bytes would read 6)
    assert doc["token_ids"] and max(doc["token_ids"]) < 200  # its mask is never written
    more = fsc_main("train", "--resume", tmp_path / "ad", "--train-steps", "3",
                    "--store", tmp_path / "st", "--json", check=0)
    assert json.loads(more.stdout)["step"] == 3
    # each step carries the tokenizer, checksummed: a copy decodes with the run's folder gone
    assert "tokenizer.json" in (saved / "checksums.sha256").read_text()
    shutil.copytree(saved, tmp_path / "moved")
    shutil.rmtree(tmp_path / "ad")
    again = fsc_main("decode", tmp_path / "moved", "--prompt", "To bé", "--length", "8",
                     "--json", check=0)
    assert json.loads(again.stdout)["token_ids"] == doc["token_ids"]


def test_the_anneal_grows_the_block_size_by_powers_of_two_dividing_G():
    from fsc.train.loop import block_at, block_sizes

    assert block_sizes(8) == [1, 2, 4, 8] and block_sizes(12) == [1, 2, 4, 12]
    assert block_sizes(5) == [1, 5] and block_sizes(2) == [1, 2]
    assert [block_at(6, 8, s) for s in range(8)] == [1, 1, 2, 2, 4, 4, 8, 8]
    assert [block_at(300, 8, s) for s in (0, 99, 100, 199, 200, 299, 300, 1199)] == [
        1, 1, 2, 2, 4, 4, 8, 8]
    assert [block_at(0, 8, s) for s in range(3)] == [8, 8, 8]
    assert {block_at(7, 12, s) for s in range(7)} == {1, 2, 4}  # every one divides G


def test_an_annealed_step_is_the_objective_at_that_block_size(tmp_path):
    """Each step's loss is the objective drawn at block_at's size (1, then 2, then G = 4):
    the same loss `loss_of` computes there on the step's batch and mask draw."""
    import copy

    import torch

    from fsc.model.lm import build_model
    from fsc.objective import Batch, loss_of
    from fsc.recipe import load_recipe
    from fsc.seeds import derive
    from fsc.tokenizer import ByteTokenizer
    from fsc.train.loop import TrainConfig, Trainer

    recipe = load_recipe("tiny_attn")
    cfg = TrainConfig(source="tiny_attn", data="copy", seq_len=32, steps=6, out=str(tmp_path),
                      batch=4, warmup=1, objective="blocks", anneal=4, save_minutes=0)
    trainer = Trainer(cfg, recipe, build_model(recipe, seed=0), ByteTokenizer())
    for step, G in enumerate([1, 1, 2, 2, 4, 4]):
        assert trainer.block_size() == G
        batch = Batch.of([trainer.data.sample(step * 4 + j) for j in range(4)], "cpu")
        gen = torch.Generator().manual_seed(derive(cfg.seed, step, 0, 3))
        want, _ = loss_of(copy.deepcopy(trainer.model), "blocks", batch, G, trainer.tok.mask_id,
                          gen)
        got, _, _ = trainer.train_step()
        assert got == pytest.approx(want.item(), rel=1e-5)


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_the_options_are_recorded_and_the_shifted_denoiser_decodes_exactly(fsc_main, tmp_path,
                                                                            ar_ckpt):
    """--logit-shift --anneal: the recipe holds the shift (its hash changes), the run's config
    and the checkpoint the anneal; the cache is exact; a resume keeps both and refuses them."""
    doc = json.loads(_adapt(fsc_main, tmp_path, ar_ckpt, "--logit-shift", "--anneal", "2",
                            steps=3).stdout)
    step = Path(doc["checkpoint"])
    assert "logit_shift: true" in (step / "fsc_recipe.yaml").read_text()
    config = json.loads((step / "config.json").read_text())
    assert config["training"]["anneal"] == 2
    state = json.loads((step / "training_state.json").read_text())["config"]
    assert state["anneal"] == 2 and "logit_shift: true" in state["recipe_yaml"]
    assert fsc_main("verify", step, "--blocks", "2").returncode == 0  # cached == uncached
    out = json.loads(fsc_main("decode", step, "--prompt", "ROMEO:", "--length", "16",
                              "--json", check=0).stdout)
    assert out["stats"]["G"] == 8
    ar = json.loads(fsc_main("decode", step, "--prompt", "ROMEO:", "--length", "4", "--mode",
                             "ar", "--json", check=0).stdout)
    assert ar["stats"]["mode"] == "ar" and len(ar["token_ids"]) == 4
    res = fsc_main("train", "--resume", tmp_path / "ad", "--train-steps", "4", "--anneal", "3",
                   "--store", tmp_path / "st")
    assert res.returncode == 2 and "drop --anneal" in res.stderr
    more = fsc_main("train", "--resume", tmp_path / "ad", "--train-steps", "4",
                    "--store", tmp_path / "st", "--json", check=0)
    assert json.loads(more.stdout)["step"] == 4


def test_bad_options_are_one_line_and_write_nothing(fsc_main, tmp_path, ar_ckpt):
    for source, extra, says in (
            (ar_ckpt, ["--objective", "ar", "--anneal", "2"], "--anneal 2 grows the block size"),
            ("tiny_attn", ["--objective", "ar", "--logit-shift"], "go with --G N"),
            (ar_ckpt, ["--G", "8", "--anneal", "5"], "--anneal 5 is longer than --train-steps"),
    ):
        out = tmp_path / "x"
        res = fsc_main("train", source, *TEXT, "--train-steps", "4", "--out", out,
                       "--store", tmp_path / "st", *extra)
        assert res.returncode == 2 and says in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
        assert not out.exists() and not (tmp_path / "st").exists()


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_an_adaptation_anneals_over_a_quarter_of_its_steps_unless_told(fsc_main, tmp_path,
                                                                       ar_ckpt):
    """The default docs/benchmarks.md §15 chose: --anneal steps/4 when adapting; --anneal 0
    turns it off; a run that adapts nothing does not anneal."""
    def anneal(doc):
        step = Path(json.loads(doc.stdout)["checkpoint"])
        return json.loads((step / "training_state.json").read_text())["config"]["anneal"]

    assert anneal(_adapt(fsc_main, tmp_path / "a", ar_ckpt, steps=8)) == 2
    assert anneal(_adapt(fsc_main, tmp_path / "b", ar_ckpt, "--anneal", "0", steps=4)) == 0
    plain = fsc_main("train", "tiny_attn", *TEXT, "--train-steps", "4", "--out",
                     tmp_path / "c", "--store", tmp_path / "st", "--json", check=0)
    assert anneal(plain) == 0


def test_an_adaptation_says_so_trains_blocks_and_is_named_apart(fsc_main, tmp_path, ar_ckpt):
    """Without --objective an adaptation trains `blocks` (docs/training.md: text should); the
    summary names the checkpoint it came from, G and the anneal; the recipe is NAME-G8, so
    tables tell it from the autoregressive model it came from."""
    res = fsc_main("train", ar_ckpt, "--G", "8", *TEXT, "--train-steps", "4", "--out",
                   tmp_path / "ad", "--store", tmp_path / "st", check=0)
    line = " ".join(res.stdout.split())  # the summary as one line, however rich wrapped it
    assert "trained quality_attn-G8 (adapted from " in line and "(blocks)" in line
    assert "at G 8, annealed over 1 step)" in line
    step = next((tmp_path / "ad").glob("step-*"))
    assert "name: quality_attn-G8" in (step / "fsc_recipe.yaml").read_text()
    config = json.loads((step / "config.json").read_text())["training"]
    assert config["adapted_from"]["recipe"] == "quality_attn"
