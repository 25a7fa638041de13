"""tools.bench_decode_gpu on the CPU at a tiny point: the commands it runs on the H200 (fsc
profile, fsc decode --prompt-file and --prompts --batch) give a row each, recorded in the store."""

import json
import sys

import pytest

from fsc.store import Store


@pytest.mark.slow  # six fsc processes
def test_the_side_by_side_runs_and_records(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_decode_gpu"])
    from tools.bench_decode_gpu import main

    main(["--device", "cpu", "--recipes", "tiny_mamba", "--S", "64", "--B", "1,2", "--length",
          "8", "--G", "4", "--K", "4", "--store", str(tmp_path / "st")])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [(r["S"], r["B"]) for r in doc["rows"]] == [(64, 1), (64, 2)]
    for r in doc["rows"]:
        assert r["profile"]["tokens_per_s"] > 0 and r["decode"]["tokens_per_s"] > 0
        assert r["decode"]["prompt_tokens"] == 64 and r["ratio"] > 0
    _, rows = Store(tmp_path / "st").query(
        "SELECT count(*) FROM bench_results WHERE run_id = '" + doc["run_id"] + "'")
    assert rows[0][0] == 4
