import pytest

from fsc.errors import UsageError
from fsc.tokenizer import ByteTokenizer, load_tokenizer


def test_byte_tokenizer_round_trip():
    t = ByteTokenizer()
    ids = t.encode("héllo")
    assert all(0 <= i < 256 for i in ids) and t.decode(ids + [t.eos_id]) == "héllo"
    assert {t.bos_id, t.eos_id, t.mask_id, t.pad_id} == {256, 257, 258, 259}


def test_local_hugging_face_tokenizer_dir(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "[MASK]": 1, "</s>": 2, "hello": 3, "world": 4}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    t = load_tokenizer(tmp_path)
    assert t.encode("hello world") == [3, 4] and t.mask_id == 1 and t.eos_id == 2
    assert t.vocab_size == 5 and "hello" in t.decode([3, 4])


def test_tokenizer_without_mask_or_file_is_refused(tmp_path):
    with pytest.raises(UsageError, match=r"no tokenizer\.json"):
        load_tokenizer(tmp_path)
    from tokenizers import Tokenizer, models

    Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]")).save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(UsageError, match="no mask token"):
        load_tokenizer(tmp_path)


def test_decoding_with_a_local_tokenizer_stays_in_its_vocabulary(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    from fsc.decode import DecodeConfig, generate
    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe

    vocab = {"[UNK]": 0, "[MASK]": 1, "</s>": 2, "hello": 3, "world": 4, "again": 5}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    t = load_tokenizer(tmp_path)
    m = build_model(load_recipe("tiny_attn"), seed=2).eval()
    res = generate(m, t, t.encode("hello world"), DecodeConfig(length=8, G=4, steps=2, temperature=1.5))
    assert res.token_ids and all(i in (0, 2, 3, 4, 5) for i in res.token_ids)
