"""README's promises checked as a newcomer meets them: every command has `--json`, and what it
prints is one JSON document on stdout."""

import json

import pytest
from fsc_run import in_process


@pytest.mark.slow  # a profile, then its report: seconds
def test_report_json_is_one_document(tmp_path):
    store = tmp_path / "store"
    in_process("profile", "-r", "tiny_mamba", "--S", "1k", "--B", "1", "--repeats", "1",
               "--store", store, check=0)
    page = tmp_path / "report.html"
    res = in_process("report", "--out", page, "--store", store, "--json", check=0)
    doc = json.loads(res.stdout)
    assert doc["path"] == str(page) and page.is_file()
    assert doc["format"] == "html"
    assert len(doc["runs"]) == 1 and doc["figures"] >= 1
    assert res.stderr == ""


def test_a_missing_folder_is_not_called_a_recipe_file(tmp_path):
    """`fsc decode runs/nope` said "no such recipe file (and no shipped recipe of that name)"
    of what a newcomer typed as a training directory."""
    for command in ("decode", "eval", "build"):
        res = in_process(command, tmp_path / "runs" / "nope", check=2)
        said = " ".join(res.stderr.split())
        assert "nope: no such checkpoint, training directory or recipe file" in said, said


def test_plain_lines_in_a_jsonl_file_are_told_the_suffix_decides(tmp_path):
    """A newcomer wrote a prompt a line into prompts.jsonl and read "line 1 is not JSON
    (Expecting value)", with no word of the rule: the suffix decides how the file is read."""
    (tmp_path / "prompts.jsonl").write_text("Once upon a time\nThe king\n")
    res = in_process("decode", "tiny_attn", "--prompts", tmp_path / "prompts.jsonl",
                     "--length", "4", check=2)
    said = " ".join(res.stderr.split())
    assert "line 1 is not JSON" in said
    assert ("a .jsonl, .ndjson or .json file holds JSON (a file of another suffix, a prompt "
            "a line)") in said
