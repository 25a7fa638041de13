"""What a model is actually shown: training and evaluation read apart (a corpus's splits, an
hf: dataset's held-out split), a stream is read once however the lengths vary, data with no
text is refused rather than read as EOS, and a task's supervision covers its answer alone."""

import json
import re

import pytest
from fsc_run import in_process

from fsc import corpora
from fsc.data.sources import DataOptions, open_data, open_lengths
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


def _said(res) -> str:
    """The one error line of a refused command, its whitespace joined."""
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    return " ".join(res.stderr.split())


def _folder(tmp_path, **splits) -> str:
    """A local dataset folder, one .jsonl a split (train=[rows], validation=[rows])."""
    folder = tmp_path / "my hub"
    folder.mkdir()
    for split, rows in splits.items():
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(folder)


def _train(tmp_path, data, *extra):
    return in_process("train", "tiny_attn", "--data", data, "--seq-len", "32", "--train-steps",
                      "1", "--batch", "2", "--out", tmp_path / "run", "--store", tmp_path / "st",
                      *extra)


def test_evaluation_reads_an_hf_datasets_held_out_split_not_the_rows_trained_on(tmp_path):
    folder = _folder(tmp_path, train=[{"text": f"seen {i} " * 8} for i in range(4)],
                     validation=[{"text": f"held {i} " * 8} for i in range(4)])
    trained = TOK.decode(open_data(f"hf:{folder}", TOK, 32, 4, 0).sample(0).ids)
    scored = TOK.decode(open_data(f"hf:{folder}", TOK, 32, 4, 0, split="val").sample(0).ids)
    named = open_data(f"hf:{folder}::train", TOK, 32, 4, 0, split="val").sample(0).ids
    assert trained.startswith("seen 0") and scored.startswith("held 0")
    assert TOK.decode(named) == trained  # a split named is read as named


def test_an_hf_dataset_with_no_held_out_split_is_refused_for_evaluation(tmp_path, save_tiny):
    folder = _folder(tmp_path, train=[{"text": "seen " * 40}])
    res = in_process("eval", save_tiny(), "--task", "loss", "--data", f"hf:{folder}",
                     "--lengths", "32", "--samples", "1", "--store", tmp_path / "st")
    assert (f"--data hf:{folder}: no held-out split (validation, valid, val, test) to evaluate "
            f"on; its splits: train; name the one to read (hf:{folder}::train)") in _said(res)


def test_hf_rows_that_hold_no_text_are_refused_not_trained_on_as_eos(tmp_path):
    folder = _folder(tmp_path, train=[{"text": ""}] * 3)
    assert f"--data hf:{folder}: holds no text" in _said(_train(tmp_path, f"hf:{folder}"))


@pytest.mark.parametrize("data", ["hf:", "hf: ", "hf:{}::train:extra"])
def test_an_hf_spec_without_a_name_or_with_a_part_too_many_is_refused(tmp_path, data):
    """`hf:` alone read the current directory as a dataset; a fourth part was dropped."""
    data = data.format(_folder(tmp_path, train=[{"text": "seen " * 40}]))
    assert "not hf:NAME[:CONFIG][:SPLIT]" in _said(_train(tmp_path, data))
    assert not (tmp_path / "run").exists()


def test_several_lengths_read_one_hf_stream_in_order(tmp_path):
    """Each length's own stream showed some rows twice and skipped others."""
    folder = _folder(tmp_path, train=[{"text": f"row {i:03d}. "} for i in range(200)])
    data = open_lengths(f"hf:{folder}", TOK, [[16, 1], [32, 1]], 4, 0, per_batch=2)
    samples = [data.sample(i).ids for i in range(40)]
    assert {len(s) for s in samples} == {16, 32}
    read = TOK.decode([t for s in samples for t in s if t != TOK.eos_id])
    rows = [int(n) for n in re.findall(r"row (\d{3})\.", read)]
    assert rows == list(range(len(rows))) and len(rows) > 40  # each row once, in order
    again = open_lengths(f"hf:{folder}", TOK, [[16, 1], [32, 1]], 4, 0, per_batch=2)
    assert again.sample(17).ids == samples[17]  # a resumed run reads on where it stopped


@pytest.mark.parametrize("data", [",passkey", "passkey,,vt", "passkey,:2"])
def test_an_empty_entry_in_a_mix_is_named_as_such(tmp_path, data):
    assert (f"--data '{data}': an empty entry in a mix (a comma too many, or a weight with "
            "nothing before its colon)") in _said(_train(tmp_path, data))


def test_a_task_of_weight_zero_is_not_in_the_in_loop_eval():
    """It is never trained on: averaging its chance score into the eval misreports learning."""
    mix = open_data("passkey:1,mqar:0", TOK, 128, 4, 0, DataOptions())
    assert [t.name for t in mix.tasks] == ["passkey"]
    assert {mix.sample(i).pairs for i in range(50)} == {None}  # and mqar is never drawn


def test_a_corpus_trains_and_evaluates_on_disjoint_text():
    """Every training window lies in the first 90 %, every validation window in the rest, and
    no window runs past its split."""
    train, val = corpora.read("shakespeare", "train"), corpora.read("shakespeare", "val")
    assert train + val == corpora.read("shakespeare:train") + corpora.read("shakespeare:val")
    L = 4096
    for split, text in (("train", train), ("val", val)):
        data = open_data("shakespeare", TOK, L, 4, 0, split=split)
        assert data.n == (len(text) + 1) // L  # (+ EOS)
        for i in (0, 1, data.n - 1):
            window = bytes(t for t in data.sample(i).ids if t < 256).decode()
            assert len(data.sample(i).ids) == L and window in text


@pytest.mark.parametrize("spec", ["passkey", "niah_multikey", "niah_multivalue", "vt"])
def test_supervision_covers_the_answer_and_the_needles_repeat_alone(spec):
    """The answer blocks are the prompt's own value(s); with --supervise-needle the positions
    trained on in the prompt are exactly the repeats of the values (vt: of the names)."""
    data = open_data(spec, TOK, 256, 4, 0, DataOptions(supervise_needle=True,
                                                       suite={"needles": 2} if "niah" in spec
                                                       else {}))
    for i in range(20):
        s = data.sample(i)
        start = s.score.index(True)
        prompt, answer = TOK.decode(s.ids[:start]), TOK.decode(s.ids[start:])
        assert all(s.target[start:]) and start % 4 == 0
        repeats = TOK.decode([t for t, on in zip(s.ids[:start], s.target, strict=False) if on])
        if spec == "vt":
            links = re.findall(r"VAR [A-Z]{3} = VAR ([A-Z]{3})\.", prompt)
            assert repeats == "".join(links) and len(links) == 4
            continue
        said = re.findall(r"pass key(?: of ([a-z]{4}))? is (\d+)(?:\. Remember it\. |, )(\d+)",
                          prompt)
        assert said and all(v == again for _, v, again in said)
        assert repeats == "".join(again for *_, again in said)
        asked = re.search(r"(?:pass keys? of ([a-z]{4})\?|The pass key is) ?(?:Answer: )?$",
                          prompt).group(1)
        assert answer.split() == [v for key, v, _ in said if key == (asked or "")]


@pytest.mark.parametrize("name", ["niah_multikey", "vt"])
@pytest.mark.parametrize("needle", [False, True])
def test_the_in_loop_eval_reads_a_corpus_haystack_from_its_held_out_split(name, needle):
    """A task trained with --haystack shakespeare (its train split) was evaluated in the loop
    on haystacks of the training text; evaluation's layout reads the val split, as fsc eval
    does. With the filler haystack (every benchmark's), the samples are the same."""
    from fsc.corpora import read
    from fsc.data.sources import DataOptions, _task
    from fsc.tokenizer import ByteTokenizer

    tok = ByteTokenizer()
    options = DataOptions(supervise_needle=needle, suite={"haystack": "shakespeare"})
    train = _task(name, tok, 256, 4, options, "--seq-len", "train")
    held_out = train.evaluated()
    assert held_out.split == "val"
    val, training = read("shakespeare", "val"), read("shakespeare", "train")

    def found(task) -> tuple[int, int]:
        """Of the 20-character windows of three samples' text, (how many are in the val text,
        in the train text): the haystack's pieces between the needles."""
        text = "".join(tok.decode(task.sample(i).ids) for i in range(3))
        windows = [text[i : i + 20] for i in range(0, len(text) - 20, 4)]
        return sum(w in val for w in windows), sum(w in training for w in windows)

    in_val, in_train = found(held_out)
    assert in_val > 3 * in_train, (in_val, in_train)
    in_val, in_train = found(train)  # (the layout training reads: its own split)
    assert in_train > 3 * in_val, (in_val, in_train)
    filler = _task(name, tok, 256, 4, DataOptions(), "--seq-len", "train")
    assert filler.evaluated().sample(3).ids == filler.sample(3).ids
