"""`fsc train --seq-len 16,32`: training at several lengths. Each micro-batch is drawn at one
length with its weight, from the seed and the batch's index (so a resumed run draws the same);
the longest is the run's training length, which `fsc eval` scores against; bad lengths are one
line, exit 2, before anything is written."""

import json
from collections import Counter

import pytest
import torch
from safetensors.torch import load_file

from fsc.data.mix import LengthMix
from fsc.data.sources import open_data, open_lengths
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


def test_each_batch_is_at_one_length_drawn_with_its_weight():
    data = open_lengths("copy", TOK, [[16, 1.0], [32, 3.0]], 4, 7, per_batch=4)
    assert isinstance(data, LengthMix) and data.supervises == "answer"
    sizes = [[len(data.sample(b * 4 + j).ids) for j in range(4)] for b in range(200)]
    assert all(len(set(batch)) == 1 for batch in sizes)  # never two lengths in one batch
    drawn = Counter(batch[0] for batch in sizes)
    assert set(drawn) == {16, 32} and 0.65 < drawn[32] / 200 < 0.85
    # the n-th sample is its length's own n-th sample, the same for a fresh source (a resume)
    again = open_lengths("copy", TOK, [[16, 1.0], [32, 3.0]], 4, 7, per_batch=4)
    alone = {L: open_data("copy", TOK, L, 4, 7) for L in (16, 32)}
    for i in (0, 5, 77, 401):
        assert data.sample(i) == again.sample(i) == alone[len(data.sample(i).ids)].sample(i)
    assert data.tasks == [data.sources[32].task]  # what the in-loop eval reads: the longest's
    # one length is that length's source itself
    assert not isinstance(open_lengths("copy", TOK, [[32, 1.0]], 4, 7, per_batch=4), LengthMix)


def test_a_run_at_two_lengths_records_the_longest_and_resumes_bit_exact(cli, tmp_path):
    common = ["--data", "copy", "--seq-len", "16,32:1", "--batch", "2", "--train-steps", "4",
              "--seed", "1", "--store", tmp_path / "store"]
    drawn = open_lengths("copy", TOK, [[16, 1.0], [32, 1.0]], 4, 1, per_batch=2)
    assert [drawn.length(b) for b in range(4)] == [16, 32, 32, 16]  # both, before and after 2
    r = cli("train", "tiny_attn", *common, "--out", tmp_path / "whole", "--json")
    assert r.code == 0, r.err
    trained = json.loads((tmp_path / "whole" / "step-000004" / "config.json").read_text())
    assert trained["training"]["seq_len"] == 32
    assert trained["training"]["lengths"] == [[16, 1.0], [32, 1.0]]
    card = (tmp_path / "whole" / "step-000004" / "README.md").read_text()
    assert ("sequence lengths 16 (weight 1), 32 (weight 1), each batch at one; training length "
            "32)") in card
    r = cli("train", "tiny_attn", *common, "--out", tmp_path / "split", "--stop-after", "2")
    assert r.code == 0, r.err
    r = cli("train", "--resume", tmp_path / "split", "--store", tmp_path / "store")
    assert r.code == 0, r.err
    a = load_file(tmp_path / "whole" / "step-000004" / "model.safetensors")
    b = load_file(tmp_path / "split" / "step-000004" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("lengths, line", [
    ("16:-1,32", "the weight of 16 is -1; a weight is a finite number >= 0"),
    ("16:0,32:0", "the weights sum to zero"),
    ("16,32,16", "16 is given twice; give it once, with the weight of both"),
    ("1k,1024", "a length given twice"),
    ("16,x", "'x' is not an integer"),
    ("16,30", "--seq-len 30 is not a multiple of the block size G = 4"),
    ("16,0", "0 is below 1"),
])
def test_bad_lengths_are_one_line_and_write_nothing(cli, tmp_path, lengths, line):
    r = cli("train", "tiny_attn", "--data", "copy", "--seq-len", lengths, "--batch", "2",
            "--train-steps", "2", "--out", tmp_path / "out", "--store", tmp_path / "store")
    assert r.code == 2 and line in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not (tmp_path / "out").exists() and not (tmp_path / "store").exists()
