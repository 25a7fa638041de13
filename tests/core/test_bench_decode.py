"""tools.bench_decode at a tiny shape: every side asked for decodes the same greedy tokens as
fsc, gets a row and a ratio, and is recorded in the store; sides it cannot run are refused."""

import json
import sys

import pytest

from fsc.store import Store

pytest.importorskip("transformers")


@pytest.mark.slow  # a transformers model saved, imported and decoded by three decoders
def test_every_side_decodes_fscs_tokens_and_is_recorded(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_decode"])
    from tools.bench_decode import main

    main(["--models", "llama", "--prompt", "12", "--new", "6", "--rounds", "1", "--repeats", "1",
          "--sides", "transformers,transformers-static,fsc", "--store", str(tmp_path / "st")])
    out = capsys.readouterr().out.strip().splitlines()
    doc = json.loads(out[-1])
    assert [r["side"] for r in doc["rows"]] == ["transformers", "transformers-static", "fsc"]
    assert all(r["same_tokens"] and r["gen_tok_s"] > 0 for r in doc["rows"])
    table = [line for line in out if line.startswith("| llama |")]
    assert [line.count("×") for line in table] == [2, 2, 0]  # fsc over each other side
    _, rows = Store(tmp_path / "st").query(
        "SELECT count(*) FROM bench_results WHERE run_id = '" + doc["run_id"] + "'")
    assert rows[0][0] == 6


@pytest.mark.parametrize("args, says", [
    (["--sides", "transformers,nope"], "unknown side 'nope'"),
    (["--sides", "transformers"], "fsc and at least one side"),
    (["--sides", "transformers-compile,fsc", "--device", "cpu"], "CUDA only"),
])
def test_sides_it_cannot_run_are_refused_before_any_model(args, says):
    from tools.bench_decode import main

    with pytest.raises(SystemExit, match=says):
        main(["--models", "llama", *args])
