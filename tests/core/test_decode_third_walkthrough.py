"""A third first use of `fsc decode` with many prompts and long ones: a prompt file's final
line end is no part of its prompt; each JSON line says which row and line of the file it
answers; a prompt too long for the memory or fsc's bound names the line that holds it; a run
stopped by Ctrl-C or SIGTERM keeps whole lines and says where it stopped."""

import json
import signal

import pytest

from fsc.loading import decode_bytes
from fsc.recipe import load_recipe


def _said(res) -> str:
    return " ".join(res.stderr.split())


def _refused(res, says: str) -> None:
    assert res.returncode == 2 and says in _said(res), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert res.stdout == ""


@pytest.mark.parametrize("data, prompt", [(b"Once upon\n", "Once upon"),
                                          (b"\xef\xbb\xbfOnce upon\r\n", "Once upon"),
                                          (b"Once\nupon\n\n", "Once\nupon\n")])
def test_a_prompt_files_final_line_end_is_no_part_of_the_prompt(fsc_main, tmp_path, data,
                                                                 prompt):
    """The file's final newline, which every editor writes, was decoded as the prompt's last
    token: `echo "Once upon" > p.txt` was not `--prompt "Once upon"`; nor was a file Notepad
    saves, its byte order mark the prompt's first three tokens (a --prompts file drops it)."""
    (tmp_path / "p.txt").write_bytes(data)
    run = ("decode", "tiny_attn", "--length", "4", "--json")
    a = json.loads(fsc_main(*run, "--prompt-file", "p.txt", check=0).stdout)
    b = json.loads(fsc_main(*run, "--prompt", prompt, check=0).stdout)
    assert a["prompt"] == prompt and a["prompt_ids"] == b["prompt_ids"]
    assert a["token_ids"] == b["token_ids"]


def test_each_result_names_its_row_and_the_line_it_was_read_from(fsc_main, tmp_path):
    """Blank lines are skipped, and no result said which line it answered: a reader of a text
    file's results could not tell which prompt each was."""
    (tmp_path / "p.txt").write_text("\nhi\n\n  \nyo\nab\n")
    res = fsc_main("decode", "tiny_attn", "--prompts", "p.txt", "--batch", "2", "--length", "2",
                   check=0)
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(r["prompt"], r["stats"]["row"], r["stats"]["line"]) for r in rows] == [
        ("hi", 0, 2), ("yo", 1, 5), ("ab", 2, 6)]
    (tmp_path / "p.json").write_text('["hi", {"prompt": "yo"}]')
    res = fsc_main("decode", "tiny_attn", "--prompts", "p.json", "--length", "2", check=0)
    rows = [json.loads(line)["stats"] for line in res.stdout.splitlines()]
    assert [(s["row"], s["line"]) for s in rows] == [(0, None), (1, None)]


@pytest.mark.parametrize("limit, says", [
    ("memory", "--prompts p.txt, line 3: the longest prompt's 300 tokens at --batch 2 and "
               "--length 8 need"),
    ("context", "--prompts p.txt, line 3: the prompt's 300 tokens and --length 8 make "
                "308 tokens of context, past fsc's limit of 200"),
])
def test_a_prompt_too_long_names_its_line(fsc_main, tmp_path, monkeypatch, no_weights, limit,
                                          says):
    """The message named the longest prompt's length but not which of the file's prompts it
    was."""
    recipe = load_recipe("tiny_attn")
    if limit == "memory":
        budget = decode_bytes(recipe, 100, 8, recipe.block_size, B=2, chunk=4096, mixed=True)[0]
        monkeypatch.setattr("fsc.loading.free_bytes", lambda device: budget)
    else:
        monkeypatch.setattr("fsc.loading.MAX_S", 200)
    (tmp_path / "p.txt").write_text("short\n\n" + "x" * 300 + "\nab\n")
    _refused(fsc_main("decode", "tiny_attn", "--prompts", "p.txt", "--batch", "2",
                      "--length", "8"), says)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stopped_run_keeps_whole_lines_and_says_where_it_stopped(fsc_main, tmp_path,
                                                                   monkeypatch, signum, code):
    """A stop signal while a batch's lines were written cut the batch short (Ctrl-C) or killed
    the process unsaid (SIGTERM), and Ctrl-C ended with exit 130 and no word of what was
    written."""
    from fsc.cli import decode_prompts

    real = decode_prompts.print_plain
    sent = []

    def stopped_while_writing(text: str) -> None:
        if not sent:
            sent.append(signum)
            if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                raise AssertionError("no handler: SIGTERM would end the process unsaid")
            signal.raise_signal(signum)
        real(text)

    monkeypatch.setattr(decode_prompts, "print_plain", stopped_while_writing)
    (tmp_path / "p.txt").write_text("Once\n\nHi there\nabc\n")
    res = fsc_main("decode", "tiny_attn", "--prompts", "p.txt", "--batch", "2", "--length", "4")
    assert res.returncode == code and sent == [signum], res.stderr
    written = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["prompt"] for r in written] == ["Once", "Hi there"]
    assert res.stdout.endswith("\n")
    assert ("interrupted: the first 2 of 3 prompts written; the rest, from line 4 on, were not"
            in _said(res))


def test_a_stop_before_any_prompt_is_written_says_so_once(fsc_main, tmp_path, monkeypatch):
    """"none of the 3 prompts written; the rest, from line 1 on, were not": the rest of
    none."""
    from fsc import decode

    def stopped(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(decode, "generate_batch", stopped)
    (tmp_path / "p.txt").write_text("Once\n\nHi there\nabc\n")
    res = fsc_main("decode", "tiny_attn", "--prompts", "p.txt", "--length", "4")
    assert res.returncode == 130 and res.stdout == ""
    assert res.stderr.strip().splitlines()[-1] == "interrupted: none of the 3 prompts written"
    assert res.stderr.count("interrupted:") == 1
