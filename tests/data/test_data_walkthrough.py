"""What a researcher hands `fsc train --data`, as real files come: text that is not as asked
(bytes that are not UTF-8, a field that is not a string, a null, a column of numbers, a
directory, a mistyped mix, a Hugging Face row without the field) is one line, exit 2, never
read as something else and never a traceback. A byte-order mark is not text."""

import json
import subprocess
import sys

import pytest
from fsc_run import in_process

from fsc.data.sources import open_data
from fsc.tokenizer import ByteTokenizer

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 4


def _train(tmp_path, data, *extra):
    return in_process("train", "tiny_attn", "--data", data, "--seq-len", "32", "--train-steps",
                      "1", "--batch", "2", "--out", tmp_path / "run", "--store", tmp_path / "st",
                      *extra)


def _one_line(res) -> str:
    assert res.returncode == 2, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in res.stderr, res.stderr
    return " ".join(res.stderr.split())


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _parquet(path, columns):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table(columns), path)
    return path


@pytest.mark.parametrize("name, line", [
    ("latin1.jsonl", "latin1.jsonl:2: not UTF-8 text (invalid continuation byte at byte 13)"),
    ("number.jsonl", "number.jsonl:2: field 'text' is a number, not a string"),
    ("null.jsonl", "null.jsonl:2: field 'text' is null, not a string"),
    ("numbers.parquet", "numbers.parquet: column 'text' is BIGINT, not text (VARCHAR); choose "
                        "a text column with --text-field"),
    ("nulls.parquet", "nulls.parquet: 1 of 3 rows have no 'text' (null; the first is row 2)"),
    ("folder", "folder: a directory; give one .txt/.jsonl/.parquet file in it"),
    ("notes.txt", "notes.txt: a directory; give one .txt/.jsonl/.parquet file in it"),
])
def test_a_file_that_is_not_text_as_asked_is_one_line(tmp_path, name, line):
    path = tmp_path / name
    good = {"text": TEXT}
    if name == "latin1.jsonl":
        path.write_bytes(json.dumps(good).encode() + b"\n" + '{"text": "café"}\n'.encode("latin-1"))
    elif name == "number.jsonl":
        _jsonl(path, [good, {"text": 12345}])
    elif name == "null.jsonl":
        _jsonl(path, [good, {"text": None}])
    elif name == "numbers.parquet":
        _parquet(path, {"text": [1, 2, 3]})
    elif name == "nulls.parquet":
        _parquet(path, {"text": [TEXT, None, TEXT]})
    else:
        path.mkdir()
        (path / "a.txt").write_text(TEXT)
    assert line in _one_line(_train(tmp_path, path))


def test_a_mistyped_task_in_a_mix_is_named(tmp_path):
    msg = _one_line(_train(tmp_path, "pasky:1,vt:1"))
    assert "error: --data 'pasky:1,vt:1': 'pasky' in a mix, which holds the tasks passkey" in msg
    msg = _one_line(_train(tmp_path, "passkey:2,shakespeare:1"))
    assert "'shakespeare' in a mix, which holds the tasks" in msg


@pytest.mark.parametrize("suffix", [".txt", ".jsonl"])
def test_a_byte_order_mark_is_not_text(tmp_path, suffix):
    """Windows editors begin UTF-8 files with EF BB BF; the text begins after it (a .jsonl's
    first line is its first object, not an unreadable line)."""
    path = tmp_path / f"bom{suffix}"
    body = TEXT if suffix == ".txt" else json.dumps({"text": TEXT}) + "\n"
    path.write_bytes(b"\xef\xbb\xbf" + body.encode())
    data = open_data(str(path), ByteTokenizer(), 32, 4, 0)
    ids = [i for n in range(data.n) for i in data.sample(n).ids]
    assert 0xEF not in ids
    assert bytes(sorted(set(ids) - {ByteTokenizer.eos_id})) == bytes(sorted(set(TEXT.encode())))


def _hub_folder(tmp_path, rows):
    pytest.importorskip("datasets")
    folder = tmp_path / "hub"
    folder.mkdir()
    _jsonl(folder / "part.jsonl", rows)
    return folder


@pytest.mark.parametrize("rows, line", [
    ([{"body": TEXT}] * 3, "--data hf:{}: row 1: no text field 'text' (its fields: body; "
                           "choose it with --text-field)"),
    ([{"text": "A"}, {"text": None}, {"text": TEXT}], "--data hf:{}: row 2: field 'text' is "
                                                      "null, not a string"),
    ([{"text": "A"}, {"text": 7}, {"text": TEXT}], "--data hf:{}: row 2: field 'text' is a "
                                                   "number, not a string"),  # as a .jsonl's
])
def test_a_hub_row_without_its_text_is_one_line(tmp_path, rows, line):
    """A local folder read through datasets, as `hf:` reads a Hub dataset."""
    folder = _hub_folder(tmp_path, rows)
    assert line.format(folder) in _one_line(_train(tmp_path, f"hf:{folder}"))


@pytest.mark.slow  # a new process, with a timeout (the old code looped)
def test_a_hub_dataset_with_no_text_ends_in_one_line(tmp_path):
    """Rows of empty text and a tokenizer with no EOS add no token: a pass over the dataset
    that adds none ends the source, never loops for ever."""
    folder = _hub_folder(tmp_path, [{"text": ""}] * 3)
    code = f"""
from fsc.data.sources import DataOptions, open_data
from fsc.errors import UsageError
class NoEos:
    def encode(self, text): return list(text.encode())
try:
    open_data("hf:{folder}", NoEos(), 8, 4, 0, DataOptions()).sample(0)
except UsageError as e:
    print(e)
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=30, check=True)
    assert f"--data hf:{folder}: holds no text" in res.stdout

