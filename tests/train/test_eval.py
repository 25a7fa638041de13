"""`fsc eval`: answers come from the cached decoder, random weights score ≈ 0, a row per cell
in the store, the table and --json."""

import json

import pytest
import torch

from fsc.data.tasks import MQAR, Passkey
from fsc.decode import DecodeConfig, generate
from fsc.eval.grid import EvalSettings
from fsc.eval.retrieval import decode_answers
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.store import Store
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


def _scaled(name, seed=3):
    m = build_model(load_recipe(name), seed=seed).eval()
    with torch.no_grad():  # confident, varied predictions: decoding choices matter
        for p in m.parameters():
            if p.ndim == 2:
                p.mul_(8.0)
    return m


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_mamba", "tiny_hybrid"])
@pytest.mark.parametrize("K", [1, 2, 4])
def test_batched_answers_are_what_generate_decodes(name, K):
    """Each row of the batched decoder gives generate()'s greedy answer for its prompt (the
    prompt ends at a block boundary, the answer fills whole blocks)."""
    m = _scaled(name)
    task = Passkey(TOK, 128, 4, 3)
    samples = [task.sample(i) for i in range(3)]
    tokens = torch.tensor([s.ids for s in samples])
    target = torch.tensor(samples[0].target)
    first = samples[0].target.index(True)
    got = decode_answers(m, TOK, tokens, target, "diffusion", K)
    for b, s in enumerate(samples):
        # one block at a time, as evaluation folds the true answer blocks (teacher forcing)
        for start in range(first, len(s.ids), 4):
            cfg = DecodeConfig(length=4, G=4, steps=K)
            want = generate(m, TOK, s.ids[:start], cfg).token_ids
            assert got[b, start : start + 4].tolist() == want
    assert not torch.equal(got, tokens)  # random weights: wrong answers, but decoded


def test_ar_answers_are_what_generate_decodes():
    m = _scaled("tiny_attn")
    m.recipe = m.recipe.model_copy(update={"block_size": 1})
    task = MQAR(TOK, 64, 1, 3)
    s = task.sample(0)
    tokens, target = torch.tensor([s.ids]), torch.tensor(s.target)
    got = decode_answers(m, TOK, tokens, target, "ar", 0)
    for i in [i for i, t in enumerate(s.target) if t]:
        want = generate(m, TOK, s.ids[:i], DecodeConfig(length=1, G=1, steps=1, mode="ar"))
        assert got[0, i].item() == want.token_ids[0]


def test_random_weights_score_zero_and_rows_are_stored(fsc_main, tmp_path):
    store = tmp_path / "store"
    fsc_main("build", "tiny_attn", "--save", tmp_path / "ck", "--store", store, check=0)
    res = fsc_main("eval", tmp_path / "ck", "--lengths", "128,256", "--depths", "0,1",
                   "--samples", "8", "--store", store, "--json", check=0)
    doc = json.loads(res.stdout)
    assert [(r["length"], r["depth"]) for r in doc["rows"]] == [(128, 0), (128, 1), (256, 0), (256, 1)]
    assert all(r["accuracy"] == 0 and r["n"] == 8 for r in doc["rows"])
    assert all(0 <= r["token_accuracy"] < 0.5 for r in doc["rows"])  # digits right by chance
    st = Store(store)
    _, rows = st.query("select task, length, depth, n, correct, accuracy, mode, \"G\", \"K\","
                       " run_status from evaluation order by length, depth")
    assert rows[0] == ("niah", 128, 0.0, 8, 0, 0.0, "diffusion", 4, 4, "finished")
    res = fsc_main("eval", tmp_path / "ck", "--task", "mqar", "--lengths", "256",
                   "--pairs", "2,4", "--samples", "4", "--store", store, check=0)
    assert "mqar accuracy by pairs × length" in res.stdout
    _, [(n2, acc2), (n4, acc4)] = st.query("select n, accuracy from evaluation where task = "
                                           "'mqar' order by pairs")
    assert (n2, n4) == (8, 16) and acc2 < 0.3 and acc4 < 0.3  # queries, by chance 1 in 100


def test_a_trained_checkpoint_reports_length_ratios(fsc_main, tmp_path):
    store = tmp_path / "store"
    fsc_main("train", "tiny_attn", "--data", "copy", "--seq-len", "128", "--train-steps", "1",
             "--batch", "2", "--out", tmp_path / "run", "--store", store, check=0)
    res = fsc_main("eval", tmp_path / "run", "--task", "niah", "--lengths", "128,256", "--depths", "0.5",
                   "--samples", "2", "--store", store, check=0)
    assert "128 (1×)" in res.stdout and "256 (2×)" in res.stdout
    _, rows = Store(store).query("select length_ratio, train_length, checkpoint from evaluation")
    assert [r[0] for r in rows] == [1.0, 2.0] and rows[0][1] == 128
    assert rows[0][2].endswith("step-000001")


def test_heldout_loss(fsc_main, tmp_path):
    (tmp_path / "t.txt").write_text(" ".join(f"w{i}" for i in range(400)))
    store = tmp_path / "store"
    res = fsc_main("eval", "tiny_attn", "--task", "loss", "--data", tmp_path / "t.txt",
                   "--lengths", "64", "--samples", "4", "--store", store, "--json", check=0)
    [row] = json.loads(res.stdout)["rows"]
    assert 4 < row["loss"] < 8  # about ln 288 = 5.66 for untrained weights (a 4-draw estimate)
    again = fsc_main("eval", "tiny_attn", "--task", "loss", "--data", tmp_path / "t.txt",
                     "--lengths", "64", "--samples", "4", "--store", store, "--json", check=0)
    assert json.loads(again.stdout)["rows"][0]["loss"] == row["loss"]  # seeded


def test_token_accuracy_gives_partial_credit(monkeypatch):
    """A decoder that gets every answer but its first digit right: no exact match, 3 of 4
    digits."""
    import fsc.eval.retrieval as ev

    task = Passkey(TOK, 128, 4, 4)
    samples = [task.sample(i) for i in range(3)]
    first = samples[0].score.index(True)

    def first_digit_wrong(model, tokenizer, tokens, target, mode, steps):
        out = tokens.clone()
        out[:, first] = (out[:, first] + 1) % 256
        return out

    monkeypatch.setattr(ev, "decode_answers", first_digit_wrong)
    cell = ev._cell(None, TOK, samples, EvalSettings("diffusion", 4, 3, 3, 0, 128), "cpu")
    assert cell["accuracy"] == 0 and cell["token_accuracy"] == pytest.approx(3 / 4)


def test_sigterm_keeps_the_cells_scored_and_marks_the_run_interrupted(fsc_main, tmp_path,
                                                                     monkeypatch):
    import os
    import signal

    from fsc.eval import loss

    real = loss.heldout_loss

    def stopped_at_the_second_length(model, tok, grid, n, device):
        if n == 128:
            os.kill(os.getpid(), signal.SIGTERM)  # what `timeout` sends
        return real(model, tok, grid, n, device)

    monkeypatch.setattr(loss, "heldout_loss", stopped_at_the_second_length)
    (tmp_path / "t.txt").write_text(" ".join(f"w{i}" for i in range(400)))
    store = tmp_path / "store"
    res = fsc_main("eval", "tiny_attn", "--task", "loss", "--data", tmp_path / "t.txt",
                   "--lengths", "64,128", "--samples", "2", "--store", store)
    assert res.returncode == 143, res.stderr
    assert "interrupted: 1 cell of run" in res.stderr and "Traceback" not in res.stderr
    _, [(status, error)] = Store(store).query("select status, error from runs")
    assert status == "interrupted" and error == "interrupted (SIGTERM) after 1 cell"
    _, [(length,)] = Store(store).query("select length from evaluation")
    assert length == 64


def test_heldout_loss_gives_its_spread_and_says_when_a_short_file_is_reused(fsc_main, tmp_path):
    (tmp_path / "t.txt").write_text(" ".join(f"w{i}" for i in range(100)))  # ~490 tokens
    store = tmp_path / "store"
    res = fsc_main("eval", "tiny_attn", "--task", "loss", "--data", tmp_path / "t.txt",
                   "--lengths", "64", "--samples", "12", "--store", store, check=0)
    assert "loss (nats/token)" in res.stdout and "± s.e." in res.stdout
    assert "the data holds 6 distinct sequences; the 12 scored reuse them" in res.stderr
    _, [(n, distinct, loss, se)] = Store(store).query(
        "select n, distinct_sequences, loss, loss_se from evaluation")
    assert (n, distinct) == (12, 6) and 0 < se < loss


def test_a_length_too_short_names_lengths(cli, tmp_path):
    r = cli("eval", "tiny_attn", "--lengths", "8", "--store", tmp_path / "store")
    assert r.code == 2 and "--lengths 8 is shorter than a passkey prompt" in r.err
    assert "--seq-len" not in r.err


def test_an_mqar_length_counts_its_queries_too(cli, tmp_path):
    """8 pairs' head fits 64 tokens, their queries do not: refused in one line, by eval and
    by train (it was an internal error), and the exact fit (112) is scored."""
    store = ["--store", tmp_path / "store"]
    r = cli("eval", "tiny_attn", "--task", "mqar", "--lengths", "64,112", *store)
    assert r.code == 2 and r.err.strip() == ("error: --lengths 64 is shorter than an mqar "
                                             "sample with 8 pairs (112 tokens at G = 4)"), r.err
    r = cli("train", "tiny_attn", "--data", "mqar", "--seq-len", "64", "--train-steps", "1",
            "--out", tmp_path / "o", *store)
    assert r.code == 2 and r.err.strip().startswith("error: --seq-len 64 is shorter than an "
                                                    "mqar sample with 8 pairs"), r.err
    assert not (tmp_path / "o").exists()
    r = cli("eval", "tiny_attn", "--task", "mqar", "--lengths", "112", "--samples", "2", *store)
    assert r.code == 0, r.err
