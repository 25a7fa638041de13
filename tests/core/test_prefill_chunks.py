"""A prompt folded a chunk at a time (fsc.decode.prefill) leaves the cache and the last logits
a single pass leaves, for every mixer (attention's keys and positions, a recurrent state
carried across chunks, a sliding window's ring); decoding after it gives the same tokens."""

import pytest
import torch
from model_checks import sharp_model as _model

from fsc.decode import DecodeConfig, chunk_tokens, generate, generate_batch, prefill
from fsc.errors import UsageError
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()
PROMPT = TOK.encode("Now is the winter of our discontent made glorious summer by this sun")


def test_chunks_are_whole_blocks():
    assert chunk_tokens(0, 4, 70) == 70 and chunk_tokens(100, 4, 70) == 70
    assert chunk_tokens(10, 4, 70) == 8 and chunk_tokens(3, 4, 70) == 4


@pytest.mark.parametrize("name", ["tiny_hybrid", "tiny_attn", "tiny_mamba", "tiny_gla",
                                  "tiny_gated_delta", "tiny_linear", "passkey_hybrid_swa"])
@pytest.mark.parametrize("G", [1, 4])
def test_a_chunked_prompt_folds_as_one_pass(name, G):
    m = _model(name)
    ids = torch.tensor([PROMPT])
    one = m.empty_cache(1, 80, "cpu", block_size=G)
    chunked = m.empty_cache(1, 80, "cpu", block_size=G)
    with torch.no_grad():
        want, n1 = prefill(m, ids, one, 0)
        got, n = prefill(m, ids, chunked, 10)  # 8 tokens a pass (whole blocks at G 4)
        assert (n1, n) == (1, -(-len(PROMPT) // (10 if G == 1 else 8)))
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-5)
        block = torch.tensor([TOK.encode("abcd"[:G])])
        torch.testing.assert_close(m(block, chunked), m(block, one), atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["diffusion", "ar"])
def test_decoding_after_a_chunked_prefill_gives_the_same_tokens(mode):
    m = _model("tiny_hybrid")
    base = DecodeConfig(length=12, G=4, steps=2, mode=mode, prefill_chunk=0)
    chunked = DecodeConfig(**{**base.__dict__, "prefill_chunk": 8})
    want, got = generate(m, TOK, PROMPT, base), generate(m, TOK, PROMPT, chunked)
    assert got.token_ids == want.token_ids
    assert (want.stats["prompt_passes"], got.stats["prompt_passes"]) == (1, 9)
    rows = generate_batch(m, TOK, [PROMPT, PROMPT[:20]], chunked, batch=2)
    assert rows[0].token_ids == want.token_ids
    assert rows[0].stats["prompt_passes"] == 9 and rows[1].stats["prompt_passes"] == 3
    assert rows[0].stats["batch_prompt_passes"] == 9 + 3  # the rows' prompts folded alone
    assert rows[1].stats["forward_passes"] == generate(m, TOK, PROMPT[:20],
                                                       chunked).stats["forward_passes"]


def test_a_negative_chunk_is_refused():
    with pytest.raises(UsageError, match="--prefill-chunk -1 must be >= 0"):
        DecodeConfig(length=1, G=4, steps=4, prefill_chunk=-1).check()
