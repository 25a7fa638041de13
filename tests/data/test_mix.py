"""`--data` names the RULER-style tasks and weighted mixes of tasks: each sample's task drawn
with its weight from the seed and the index, and bad weights refused in one line."""

from collections import Counter

import pytest

from fsc.data.mix import RULER, parse_mix
from fsc.data.sources import SYNTHETIC, DataOptions, open_data
from fsc.errors import UsageError
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


def test_mixes_are_parsed_and_everything_else_is_not_a_mix():
    assert parse_mix("ruler", SYNTHETIC) == [(t, 1.0) for t in RULER]
    assert parse_mix("passkey:2,vt:1, cwe", SYNTHETIC) == [("passkey", 2.0), ("vt", 1.0),
                                                           ("cwe", 1.0)]
    for spec in ("passkey", "shakespeare:train", "hf:roneneldan/TinyStories", "a,b.txt"):
        assert parse_mix(spec, SYNTHETIC) is None


@pytest.mark.parametrize("spec, line", [
    ("passkey:-1,vt:1", "the weight of passkey is -1; a weight is a finite number >= 0"),
    ("passkey:0,vt:0", "the weights sum to zero"),
    ("vt:nan,cwe:1", "the weight of vt is nan"),
    ("vt:two", "the weight of vt, 'two', is not a number"),
])
def test_bad_weights_are_one_line(spec, line):
    with pytest.raises(UsageError) as e:
        open_data(spec, TOK, 256, 4, 0)
    assert str(e.value).startswith(f"--data {spec}: ") and line in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["niah_multikey", "niah_multivalue", "niah_multiquery", "vt",
                                  "cwe", "fwe"])
def test_each_suite_task_is_training_data(name):
    data = open_data(name, TOK, 256, 4, 0)
    s = data.sample(3)
    assert data.supervises == "answer" and len(s.ids) == 256 and s.answers
    assert s == open_data(name, TOK, 256, 4, 0).sample(3) and s != data.sample(4)


def test_a_mix_draws_each_task_with_its_weight_and_the_same_sample_each_time():
    data = open_data("passkey:3,vt:1", TOK, 256, 4, 7)
    kinds = Counter("vt" if data.sample(i).answers else "passkey" for i in range(400))
    assert 0.65 < kinds["passkey"] / 400 < 0.85
    assert data.sample(11) == open_data("passkey:3,vt:1", TOK, 256, 4, 7).sample(11)
    ruler = open_data("ruler", TOK, 256, 4, 0)
    assert len({type(t).__name__ for t in ruler.tasks}) == 5 and len(ruler.tasks) == 7


def test_a_length_too_short_for_one_task_of_the_mix_names_it():
    with pytest.raises(UsageError, match="--seq-len 128 is shorter than a fwe prompt"):
        open_data("passkey,fwe", TOK, 128, 4, 0)


def test_the_suites_knobs_reach_its_tasks_and_a_knob_no_task_reads_is_refused():
    vt = open_data("passkey,vt", TOK, 192, 4, 0, DataOptions(suite={"hops": 2}))
    answers = {len(s.answers) for s in map(vt.sample, range(20)) if s.answers}
    assert answers == {3}  # the value's variable and two hops
    words = open_data("cwe", TOK, 192, 4, 0, DataOptions(suite={"words": 2}))
    assert len(words.sample(0).answers) == 2
    with pytest.raises(UsageError, match=r"^--hops: for --data vt, ruler or a mix holding one "
                       r"\(this is passkey:2,cwe:1\)$"):
        open_data("passkey:2,cwe:1", TOK, 192, 4, 0, DataOptions(suite={"hops": 2}))
