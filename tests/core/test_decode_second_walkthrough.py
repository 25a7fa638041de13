"""A second first use of `fsc decode`: a prompt's option given twice is refused rather than
kept at its last value; a `.ndjson` file is JSON lines; `--prompts` writes each batch as it
ends, so a run stopped midway keeps what it finished; `--no-graphs` where nothing is replayed
is noted."""

import json

import pytest


def _refused(res, says: str) -> None:
    said = " ".join(res.stderr.split())
    assert res.returncode == 2 and says in said, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert res.stdout == ""


@pytest.mark.parametrize("option, values, says", [
    ("--prompts", ["a.txt", "b.txt"], "--prompts given 2 times: --prompts reads one file; put "
                                      "the prompts in one (e.g. cat A B > C)"),
    ("--prompt-file", ["a.txt", "b.txt"], "--prompt-file given 2 times: --prompt-file is one "
                                          "prompt; give several in a file, one a line, with "
                                          "--prompts FILE"),
    ("--prompt-ids", ["1,2", "3"], "--prompt-ids given 2 times: --prompt-ids is one prompt"),
])
def test_a_prompt_option_given_twice_is_refused(fsc_main, tmp_path, no_weights, option, values,
                                                says):
    """Click kept the last value and dropped the first unsaid: `--prompts a.txt --prompts
    b.txt` decoded b.txt alone."""
    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / "b.txt").write_text("two\n")
    args = [a for v in values for a in (option, v)]
    _refused(fsc_main("decode", "tiny_attn", *args), says)


def test_an_ndjson_file_is_read_as_json_lines(fsc_main, tmp_path):
    """`.ndjson`, JSON lines' other name, was read a prompt a line: each row's prompt was its
    object's JSON text."""
    (tmp_path / "p.ndjson").write_text('{"prompt": "hi", "id": 7}\n{"prompt": "yo", "id": 8}\n')
    res = fsc_main("decode", "tiny_attn", "--prompts", "p.ndjson", "--length", "2", check=0)
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(r["prompt"], r["id"]) for r in rows] == [("hi", 7), ("yo", 8)]
    (tmp_path / "bad.ndjson").write_text("hi\n")
    _refused(fsc_main("decode", "tiny_attn", "--prompts", "bad.ndjson"),
             "--prompts bad.ndjson: line 1 is not JSON")


def test_the_batches_that_finished_are_written_when_a_later_one_fails(fsc_main, tmp_path,
                                                                      monkeypatch):
    """Every result was written after the last batch: a run stopped in its last batch (Ctrl-C,
    a kill, an error) lost every batch it had finished."""
    from fsc.decode import engine

    rows = engine._rows
    calls = []

    def second_stops(*args, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return rows(*args, **kw)

    monkeypatch.setattr(engine, "_rows", second_stops)
    (tmp_path / "p.txt").write_text("Once\nHi there\nabc\n")
    res = fsc_main("decode", "tiny_attn", "--prompts", "p.txt", "--batch", "2", "--length", "4")
    assert res.returncode != 0 and len(calls) == 2
    written = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["prompt"] for r in written] == ["Once", "Hi there"]
    assert all(r["stats"]["batch_index"] == 0 and r["stats"]["tokens"] == 4 for r in written)


@pytest.mark.parametrize("more, says", [
    ((), "note: --no-graphs changes nothing on cpu: every step is issued from Python already"),
    (("--no-cache",), "note: --no-graphs changes nothing with --no-cache, which replays "
                      "nothing"),
])
def test_no_graphs_where_nothing_is_replayed_is_noted(fsc_main, more, says):
    """Only CUDA replays captured steps: elsewhere, and uncached, --no-graphs was silently a
    no-op."""
    res = fsc_main("decode", "tiny_attn", "--prompt", "hi", "--length", "2", "--device", "cpu",
                   "--no-graphs", *more, check=0)
    assert says in " ".join(res.stderr.split()), res.stderr
    res = fsc_main("decode", "tiny_attn", "--prompt", "hi", "--length", "2", "--device", "cpu",
                   *more, check=0)
    assert "--no-graphs" not in res.stderr


def test_a_batch_of_prompts_of_different_lengths_names_the_attention_it_ran(fsc_main, tmp_path):
    """Rows of different lengths attend through a masked path of attention's own (not
    fsc.ops.block_attention): each row's backends still name it."""
    (tmp_path / "p.txt").write_text("a\nabcdefghij\n")
    res = fsc_main("decode", "tiny_attn", "--prompts", tmp_path / "p.txt", "--length", "8",
                   check=0)
    for line in res.stdout.splitlines():
        assert json.loads(line)["stats"]["backends"] == {"block_attention": "torch"}
