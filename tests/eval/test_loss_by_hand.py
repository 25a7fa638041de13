"""`fsc eval --task loss` recomputed by hand: the AR NLL from the model's logits, and bits per
byte over the bytes of the text scored, where sequences begin and end inside characters."""

import json
import math
from pathlib import Path

import pytest
import torch

from fsc.eval.loss import scored_bytes
from fsc.tokenizer import HFTokenizer

# many characters of two and three bytes, which a tokenizer learned on ASCII keeps as byte tokens
WIDE = "日本語のテキストです。東京は大きな都市。Ça va très bien, merci. " * 4


@pytest.fixture
def byte_bpe(tmp_path) -> Path:
    """A byte-level BPE (GPT-2's kind) of 280 tokens learned from Shakespeare, with a mask."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from fsc.corpora import read

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=280, special_tokens=["<unk>", "<s>", "</s>", "<mask>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([read("shakespeare")[:20000]], trainer)
    folder = tmp_path / "bpe"
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
         "unk_token": "<unk>", "mask_token": "<mask>"}))
    return folder


def test_the_sequences_of_a_text_add_up_to_its_bytes_under_a_byte_level_bpe(byte_bpe):
    """A cut inside a character was counted as U+FFFD's three bytes (3.7 % too many at 64
    tokens on this text): the bits per byte of a non-ASCII text came out low."""
    tok = HFTokenizer(byte_bpe)
    ids = tok.encode(WIDE)
    L = 64
    cuts = [ids[k : k + L] for k in range(0, len(ids), L)]
    assert any(len(tok.decode(c).encode()) != scored_bytes(tok, c, False) for c in cuts)  # cut
    assert sum(scored_bytes(tok, c, False) for c in cuts) == len(WIDE.encode("utf-8"))
    # read autoregressively, the first token of each is given: overlapping by one, the scored
    # tokens tile all but the text's first ("日", three byte tokens: its first byte)
    overlapping = [ids[k : k + L] for k in range(0, len(ids) - 1, L - 1)]
    assert sum(scored_bytes(tok, c, True) for c in overlapping) == len(WIDE.encode("utf-8")) - 1
    assert scored_bytes(tok, [*ids[:3], 2], False) == 3  # a special token (EOS) has no bytes


@pytest.fixture(params=["legacy", "metaspace", "metaspace decoder"])
def sentencepiece_bpe(request, tmp_path) -> Path:
    """A sentencepiece BPE (Llama 2's kind: `▁` for a space, one put before a text, and bytes
    as `<0xE6>` pieces where the vocabulary lacks a character) of 300 pieces learned from
    Shakespeare, laid out as Llama 2's tokenizer.json, as transformers converts it without
    `legacy` (a Metaspace pre-tokenizer), or with a Metaspace decoder."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    from fsc.corpora import read

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    if request.param == "legacy":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                               normalizers.Replace(" ", "▁")])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    if request.param == "metaspace decoder":
        tok.decoder = decoders.Sequence([decoders.Metaspace(prepend_scheme="first"),
                                         decoders.ByteFallback(), decoders.Fuse()])
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>", "<mask>"],
                                  show_progress=False)
    tok.train_from_iterator([read("shakespeare")[:20000]], trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    vocab.update({f"<0x{b:02X}>": len(vocab) + b for b in range(256)})  # ordinary pieces
    folder = tmp_path / "sp"
    folder.mkdir()
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "LlamaTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
         "unk_token": "<unk>", "mask_token": "<mask>"}))
    return folder


def test_the_sequences_of_a_text_add_up_to_its_bytes_under_a_sentencepiece_bpe(sentencepiece_bpe):
    """Llama 2's kind: the text a cut decodes to has U+FFFD for each byte piece of a character
    it cuts, and no first space (the decoder strips it), so bits per byte were off at every
    cut. Each piece's own bytes are counted: the space sentencepiece puts before the text's
    first word is its one extra byte."""
    tok = HFTokenizer(sentencepiece_bpe)
    text = WIDE + "To be, or not to be, that is the question. " * 4
    ids = tok.encode(text)
    assert tok.decode(ids) == text and any(tok.tok.id_to_token(i) == "<0xE6>" for i in ids)
    L = 48
    cuts = [ids[k : k + L] for k in range(0, len(ids), L)]
    assert any(len(tok.decode(c).encode()) != scored_bytes(tok, c, False) for c in cuts)
    assert sum(scored_bytes(tok, c, False) for c in cuts) == len(text.encode("utf-8")) + 1
    overlapping = [ids[k : k + L] for k in range(0, len(ids) - 1, L - 1)]
    first = len(tok.tok.id_to_token(ids[0]).replace("▁", " ").encode())
    assert sum(scored_bytes(tok, c, True) for c in overlapping) == \
        len(text.encode("utf-8")) + 1 - first
    assert scored_bytes(tok, [*ids[:3], tok.eos_id], False) == scored_bytes(tok, ids[:3], False)


def test_bits_per_byte_of_a_wide_text_at_the_command_line(fsc_main, tmp_path, byte_bpe):
    """Every sequence of the text scored once: the bound's bits over the text's own bytes."""
    text = WIDE + "\n" + "To be, or not to be, that is the question. " * 4  # ends in ASCII
    (tmp_path / "wide.txt").write_text(text, encoding="utf-8")
    tok = HFTokenizer(byte_bpe)
    ids = tok.encode(text) + [tok.eos_id]
    L = 32
    n = len(ids) // L
    tail = tok.decode(ids[n * L :])
    assert tail.isascii() and text.endswith(tail)  # the sequences end at a character's end
    res = fsc_main("eval", "tiny_attn", "--task", "loss", "--data", tmp_path / "wide.txt",
                   "--tokenizer", byte_bpe, "--lengths", L, "--samples", n, "--batch", n,
                   "--store", tmp_path / "st", "--json", check=0)
    [row] = json.loads(res.stdout)["rows"]
    assert row["mode"] == "diffusion" and row["n"] == n == row["distinct_sequences"]
    nbytes = len(text.encode("utf-8")) - len(tail.encode("utf-8"))
    assert row["bits_per_byte"] == pytest.approx(row["loss"] * n * L / nbytes / math.log(2),
                                                 rel=1e-9)


def test_the_ar_loss_is_the_nll_of_the_logits_by_hand(fsc_main, tmp_path, ar_recipe):
    """nats/token: the mean over sequences of -log softmax(logits)[next token], float64, every
    position but the first; bits per byte that over the bytes of those tokens."""
    from fsc.data.sources import open_data
    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe
    from fsc.seeds import derive
    from fsc.tokenizer import ByteTokenizer

    L, n = 24, 3
    res = fsc_main("eval", ar_recipe, "--task", "loss", "--data", "shakespeare", "--lengths", L,
                   "--samples", n, "--store", tmp_path / "st", "--json", check=0)
    [row] = json.loads(res.stdout)["rows"]
    source = open_data("shakespeare", ByteTokenizer(), L, 1, derive(0, 7), split="val")
    x = torch.tensor([source.sample(i).ids for i in range(n)])
    model = build_model(load_recipe(ar_recipe), seed=0).eval()
    with torch.no_grad():
        logp = torch.log_softmax(model.forward_blockwise(x, [1] * L).double(), -1)
    nll = -logp[:, :-1].gather(-1, x[:, 1:, None])[..., 0]  # [n, L - 1]
    per_sequence = nll.mean(-1)
    assert row["loss"] == pytest.approx(float(per_sequence.mean()), rel=1e-5)
    assert row["loss_se"] == pytest.approx(float(per_sequence.std() / math.sqrt(n)), rel=1e-4)
    assert row["bits_per_byte"] == pytest.approx(float(nll.sum()) / (n * (L - 1)) / math.log(2),
                                                 rel=1e-5)


def test_one_distinct_sequence_is_said_in_the_singular(fsc_main, tmp_path):
    (tmp_path / "t.txt").write_text(" ".join(f"w{i}" for i in range(20)))  # one 64-token sequence
    res = fsc_main("eval", "tiny_attn", "--task", "loss", "--data", tmp_path / "t.txt",
                   "--lengths", "64", "--samples", "2", "--store", tmp_path / "st", check=0)
    said = " ".join(res.stderr.split())
    assert "the data holds 1 distinct sequence; the 2 scored reuse it, so" in said, said


@pytest.mark.parametrize(("data", "given", "readers"), [
    ("shakespeare", ["--pairs", "4"], "mqar"),
    ("passkey", ["--pairs", "4"], "mqar"),
    ("shakespeare", ["--needle-digits", "4"], "passkey, niah_multikey, niah_multivalue, "
                                               "niah_multiquery, ruler"),
])
def test_task_options_the_data_does_not_read_are_refused(fsc_main, tmp_path, data, given,
                                                         readers):
    """They size a task's samples: given with data that holds no such task (text, another
    task) they were taken and ignored; refused as fsc train refuses them."""
    res = fsc_main("eval", "tiny_attn", "--task", "loss", "--data", data, *given,
                   "--lengths", "128", "--samples", "2", "--store", tmp_path / "st")
    assert res.returncode == 2 and res.stderr == (
        f"error: {given[0]}: for --data {readers} or a mix holding one (this is {data})\n")
    assert not (tmp_path / "st").exists()
