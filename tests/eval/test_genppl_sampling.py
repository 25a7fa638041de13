"""genppl draws as `fsc decode` does: --top-k, --min-p and --repetition-penalty beside
--temperature and --top-p (they were not taken: a decoder could not be scored as it is used),
recorded in each cell, told apart in the table and the figure, and a cell stored before they
were recorded read as drawn without them."""

import json

import duckdb
import pytest
from stops import stop_genppl_at_k4

from fsc.store import Store

SMALL = ["--task", "genppl", "--data", "shakespeare", "--samples", "3", "--lengths", "12",
         "--prompt-length", "8"]


def _rows(fsc_main, *args):
    res = fsc_main("eval", *args, "--json", check=0)
    return json.loads(res.stdout)["rows"]


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_every_cut_and_the_penalty_reach_the_samples(fsc_main, tmp_path, ar_recipe):
    """An AR checkpoint: at --top-k 1 or --min-p 1 a sampled cell keeps the most likely token
    alone, so its samples are the greedy cell's (its Gen-PPL too); a penalty changes them.
    Each cell records how it drew."""
    def ar_row(*extra):
        rows = _rows(fsc_main, ar_recipe, *SMALL, "--scorer", ar_recipe, *extra,
                     "--store", tmp_path / "st")
        assert [r["mode"] for r in rows] == ["reference", "ar"]
        return rows[1]

    greedy = ar_row("--temperature", "0")
    hot = ar_row("--temperature", "2")
    assert hot["gen_ppl"] != greedy["gen_ppl"]
    for cut in (("--top-k", "1"), ("--min-p", "1")):
        assert ar_row("--temperature", "2", *cut)["gen_ppl"] == greedy["gen_ppl"], cut
    penalized = ar_row("--temperature", "0", "--repetition-penalty", "3")
    assert penalized["gen_ppl"] != greedy["gen_ppl"]
    assert (greedy["top_k"], greedy["min_p"], greedy["repetition_penalty"]) == (0, 0.0, 1.0)
    drawn = ar_row("--temperature", "2", "--top-k", "5", "--min-p", "0.1",
                   "--repetition-penalty", "1.2")
    assert (drawn["top_k"], drawn["min_p"], drawn["repetition_penalty"]) == (5, 0.1, 1.2)
    _, stored = Store(tmp_path / "st").query(
        "select top_k, min_p, repetition_penalty from eval_cells where mode = 'ar' "
        "order by recorded_at desc limit 1")
    assert stored == [(5, 0.1, 1.2)]


def test_a_greedy_cell_beside_a_sampled_one_is_recorded_without_the_cut(fsc_main, tmp_path,
                                                                        ar_recipe):
    """--temperature 0,1 --top-k 5: the T 0 cell read "T 0 top-k 5" and stored top_k 5,
    though greedy decoding takes no cut; the penalty, which greedy decoding does apply, stays."""
    rows = _rows(fsc_main, ar_recipe, *SMALL, "--scorer", ar_recipe, "--temperature", "0,1",
                 "--top-k", "5", "--repetition-penalty", "1.2", "--store", tmp_path / "st")
    drew = {r["temperature"]: (r["top_k"], r["repetition_penalty"]) for r in rows
            if r["mode"] == "ar"}
    assert drew == {0.0: (0, 1.2), 1.0: (5, 1.2)}


def test_cells_at_k_1_of_several_policies_are_said_to_decode_alike(fsc_main, tmp_path,
                                                                   ar_recipe):
    """--steps 1 --policy confidence,random ran identical cells without a word, where fsc
    decode notes that at K 1 the policy changes nothing."""
    res = fsc_main("eval", "tiny_attn", *SMALL, "--scorer", ar_recipe, "--steps", "1,2",
                   "--policy", "confidence,random", "--json", "--store", tmp_path / "st", check=0)
    doc = json.loads(res.stdout)
    said = ("at K 1 one step reveals the whole block: its cells of each --policy decode alike")
    assert said in doc["warnings"] and said in " ".join(res.stderr.split())
    k1 = {r["policy"]: r["gen_ppl"] for r in doc["rows"] if r.get("K") == 1}
    assert len(k1) == 2 and len(set(k1.values())) == 1  # as it says
    one = fsc_main("eval", "tiny_attn", *SMALL, "--scorer", ar_recipe, "--steps", "1",
                   "--json", "--store", tmp_path / "st", check=0)
    assert not [w for w in json.loads(one.stdout)["warnings"] if "K 1" in w]


def test_the_table_says_how_a_cell_drew(fsc_main, tmp_path, ar_recipe):
    res = fsc_main("eval", ar_recipe, *SMALL, "--scorer", ar_recipe, "--temperature", "2",
                   "--top-k", "5", "--min-p", "0.1", "--repetition-penalty", "1.2",
                   "--store", tmp_path / "st", check=0)
    assert "ar T 2 top-k 5 min-p 0.1 penalty 1.2: Gen-PPL" in " ".join(res.stderr.split())


@pytest.mark.parametrize("args, says", [
    (["--task", "niah", "--top-k", "5"], "--top-k: for --task genppl only"),
    (["--task", "loss", "--data", "shakespeare", "--repetition-penalty", "1.1"],
     "--repetition-penalty: for --task genppl only"),
    ([*SMALL, "--scorer", "AR", "--min-p", "2"], "--min-p"),
    ([*SMALL, "--scorer", "AR", "--repetition-penalty", "0"], "--repetition-penalty"),
    ([*SMALL, "--scorer", "AR", "--top-k", "-1"], "--top-k"),
])
def test_a_cut_that_cannot_apply_is_one_line(fsc_main, tmp_path, ar_recipe, args, says):
    args = [str(ar_recipe) if a == "AR" else a for a in args]
    res = fsc_main("eval", "tiny_hybrid", *args, "--store", tmp_path / "st")
    assert res.returncode == 2 and says in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert not (tmp_path / "st").exists()


def test_cells_stored_before_the_settings_were_recorded_are_one_line_in_the_figure():
    """A store of older cells (NULL top_k, min_p, repetition_penalty) beside new ones (0, 0,
    1: the same draws) would have split one decoder into two lines of the quality figure."""
    from fsc.results.quality import _Channels, quality_cells

    base = {"task": "genppl", "gen_ppl": 3.0, "mode": "diffusion", "G": 4, "K": 2,
            "recipe": "r", "run_id": "a", "policy": "confidence", "threshold": None,
            "temperature": 1.0, "top_p": 1.0, "tokens_per_s": 5.0, "batch": 1, "n": 1}
    old = base | {"top_k": None, "min_p": None, "repetition_penalty": None}
    new = base | {"K": 4, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0}
    cells = quality_cells([old, new])
    assert cells[0] == cells[1] | {"K": 2}
    assert _Channels(cells, {"r": "C0"}).other == []


@pytest.mark.slow  # a genppl run stopped and resumed: seconds (make test-slow)
def test_a_run_stored_before_the_settings_were_recorded_resumes_with_what_it_lacks(
        fsc_main, tmp_path, monkeypatch, ar_recipe):
    """Its cells hold NULL where a new cell holds the settings' values: a resume would have
    scored every decoding again."""
    store = tmp_path / "store"
    stop_genppl_at_k4(monkeypatch)
    res = fsc_main("eval", "tiny_attn", *SMALL, "--scorer", ar_recipe, "--store", store)
    assert res.returncode == 143, res.stderr
    run = res.stderr.split(" of run ")[1].split()[0]
    with duckdb.connect(str(Store(store).file)) as con:  # as a store written before them
        con.execute("update eval_cells set top_k = NULL, min_p = NULL, "
                    "repetition_penalty = NULL")
    again = fsc_main("eval", "--resume", run, "--store", store, "--json", check=0)
    assert [(r["mode"], r["K"]) for r in json.loads(again.stdout)["rows"]] == [("diffusion", 4)]
