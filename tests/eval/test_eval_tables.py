"""`fsc eval`'s tables at the terminal's width: no number, header word or decoding label is
ever cut. At 80 columns a grid of decoding settings cut its headers ("leng…", "Gen-P…"), its
labels ("margin τ 0.9 T…") and left an empty column where four were squeezed out; a needle
heatmap of eight lengths cut its last header ("16384 (128…") and, at 60, every cell ("0.…").
"""

import io
from dataclasses import replace

import pytest
from rich.console import Console

from fsc.cli import eval_harness, eval_render
from fsc.cli.eval_tables import GENPPL_DROP, HARNESS_DROP, LOSS_DROP
from fsc.eval.grid import EvalCell

LENGTHS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def _screen(monkeypatch, width: int) -> Console:
    console = Console(file=io.StringIO(), width=width)
    for module in (eval_render, eval_harness):
        monkeypatch.setattr(module, "out", console)
    return console


def _tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each table of `text`: its headers (a header on two lines joined) and its rows' cells."""
    tables, heads, rows = [], None, []
    for line in text.splitlines():
        if line.startswith("┏"):
            heads, rows = None, []
        elif line.startswith("┃"):
            cells = [c.strip() for c in line.split("┃")[1:-1]]
            heads = cells if heads is None else [f"{a} {b}".strip()
                                                 for a, b in zip(heads, cells, strict=True)]
        elif line.startswith("│"):
            rows.append([c.strip() for c in line.split("│")[1:-1]])
        elif line.startswith("└"):
            tables.append((heads, rows))
    return tables


def _whole(text: str, width: int) -> None:
    """Nothing cut, no column squeezed to nothing, every line of a table within `width`."""
    assert "…" not in text, text
    for heads, rows in _tables(text):
        assert all(heads) and all(all(r) for r in rows), text
    assert all(len(ln) <= width for ln in text.splitlines() if ln[:1] in "┏┃┡│└"), text


def _genppl(length: int, K: int, policy: str, threshold) -> EvalCell:
    own = {"gen_ppl": 150.3 + K, "gen_ppl_lo": 139.77, "gen_ppl_hi": 163.61 + K,
           "entropy": 2.513, "repeat_ngram": 0.125, "passes_per_token": 0.25 * K,
           "steps_per_block": 2.0, "policy": policy, "threshold": threshold,
           "temperature": 1.0, "scorer": "runs/scorer", "prompt_length": 64}
    return EvalCell("c", "qa", "h", "diffusion", 8, K, None, "genppl", length, n=2,
                    tokens_per_s=3580.4 + K, own=own)


GENPPL_FIGURES = {"Gen-PPL": ("gen_ppl", ".2f"), "entropy": ("entropy", ".3f"),
                  "rep": ("repeat_ngram", ".3f"), "tok/s": ("tokens_per_s", ".0f"),
                  "passes/tok": ("passes_per_token", ".2f"),
                  "steps/block": ("steps_per_block", ".2f")}


def _label(row: dict) -> str:
    """A row's decoding as the table names it, from its figures."""
    if row["mode"] == "reference":
        return "reference text"
    policy = "" if row["policy"] in (None, "confidence") else f" {row['policy']}"
    threshold = "" if row["threshold"] is None else f" τ {row['threshold']:g}"
    return f"G {row['G']} K {row['K']}{policy}{threshold} T {row['temperature']:g}"


def _every_figure_whole(text: str, rows: list[dict], several: bool) -> set[str]:
    """Each of `rows` (a cell's columns, as --json has them) is a row of the one genppl table
    with its figures whole; returns the columns left out (dropped or said in the title)."""
    ((heads, shown),) = _tables(text)
    assert heads[0] == "decoding" and ("length" in heads) == several, text
    by = {(r[0], r[heads.index("length")] if several else ""): dict(zip(heads, r, strict=True))
          for r in shown}
    assert len(by) == len(rows) == len(shown), text
    for row in rows:
        cells = by[(_label(row), str(row["length"]) if several else "")]
        for head, (name, spec) in GENPPL_FIGURES.items():
            if head in cells and row[name] is not None:
                assert cells[head] == format(row[name], spec), (head, text)
        if "95 % interval" in cells and row["gen_ppl_lo"] is not None:
            assert cells["95 % interval"] == f"{row['gen_ppl_lo']:.2f}–{row['gen_ppl_hi']:.2f}"
        if "samples" in cells:
            assert cells["samples"] == str(row["n"])
    return (set(GENPPL_FIGURES) | {"95 % interval", "samples"}) - set(heads)


def test_a_grid_of_decoding_settings_at_80_columns_cuts_nothing(monkeypatch):
    """The user's grid: 2 lengths × K 1, 2 × confidence, margin × τ none, 0.9."""
    cells = [EvalCell("c", "qa", "h", "reference", 8, 1, None, "genppl", n, n=2,
                      own={"gen_ppl": 12.35, "gen_ppl_lo": 9.1, "gen_ppl_hi": 15.2,
                           "entropy": 2.5, "repeat_ngram": 0.01, "scorer": "runs/scorer"})
             for n in (16, 32)]
    cells += [_genppl(n, K, p, t) for n in (16, 32) for K in (1, 2)
              for p in ("confidence", "margin") for t in (None, 0.9)]
    for width in (80, 60):
        console = _screen(monkeypatch, width)
        eval_render.render(cells, "genppl", "qa", "r")
        text = console.file.getvalue()
        _whole(text, width)
        left = _every_figure_whole(text, [c.columns() for c in cells], several=True)
        assert left <= set(GENPPL_DROP), left
        assert "samples 2" in text  # the same in every row: said once, above the table
        assert "G 8 K 1 margin τ 0.9 T 1" in text


def test_a_decoding_label_too_wide_for_the_terminal_is_printed_whole(monkeypatch):
    cell = _genppl(16, 1, "margin", 0.9)
    cell = replace(cell, own={**cell.own, "top_k": 20, "top_p": 0.9, "min_p": 0.05,
                              "repetition_penalty": 1.1})
    console = _screen(monkeypatch, 40)
    eval_render.render([cell], "genppl", "qa", "r")
    text = console.file.getvalue()
    assert "…" not in text
    assert "G 8 K 1 margin τ 0.9 T 1 top-k 20 top-p 0.9 min-p 0.05 penalty 1.1" in text
    ((heads, _),) = _tables(text)
    assert heads == ["decoding", "Gen-PPL"]  # every other column went first


def _needles(depths=(0.0,)) -> list[EvalCell]:
    return [EvalCell("c", "pk", "h", "diffusion", 8, 8, 128, "niah", n, depth=d,
                     length_ratio=n / 128, n=20, correct=1, accuracy=0.05 * i)
            for i, n in enumerate(LENGTHS) for d in depths]


@pytest.mark.parametrize("width", [80, 60, 40])
def test_a_heatmap_too_wide_for_the_terminal_is_split_by_lengths(width, monkeypatch):
    """Every cell and header whole, each part with its depths, the lengths in order."""
    console = _screen(monkeypatch, width)
    eval_render.render(_needles((0.0, 0.5)), "niah", "pk", "r")
    text = console.file.getvalue()
    _whole(text, width)
    tables = _tables(text)
    assert len(tables) > 1
    heads = [h for hs, _ in tables for h in hs[1:]]
    assert heads == [f"{n} ({n // 128}×)" for n in LENGTHS], text
    assert all(hs[0] == "depth" and [r[0] for r in rows] == ["0", "0.5"] for hs, rows in tables)
    cells = [c for _, rows in tables for c in rows[0][1:]]
    assert cells == [f"{0.05 * i:.2f}" for i in range(len(LENGTHS))]
    console = _screen(monkeypatch, 120)  # where it fits: one table
    eval_render.render(_needles(), "niah", "pk", "r")
    ((heads, rows),) = _tables(console.file.getvalue())
    assert heads[-1] == "16384 (128×)" and len(rows[0]) == 1 + len(LENGTHS)


def test_the_suite_table_is_split_as_the_heatmap_is(monkeypatch):
    cells = [EvalCell("c", "pk", "h", "diffusion", 8, 8, 128, task, n, length_ratio=n / 128,
                      n=20, own={"score": 0.5, "variant": variant})
             for n in LENGTHS for task, variant in (("niah", "multivalue"), ("vt", None))]
    console = _screen(monkeypatch, 60)
    eval_render.render(cells, "ruler", "pk", "r")
    text = console.file.getvalue()
    _whole(text, 60)
    tables = _tables(text)
    assert len(tables) > 1 and all([r[0] for r in rows] == ["niah multivalue", "vt", "average"]
                                   for _, rows in tables)


def test_a_narrow_loss_table_drops_columns_and_cuts_no_figure(monkeypatch):
    cells = [EvalCell("c", "pk", "h", "diffusion", 8, 8, 128, "loss", n, n=20, loss=1.6023,
                      own={"loss_se": 0.0123, "bits_per_byte": 2.3116}) for n in (128, 1024)]
    console = _screen(monkeypatch, 40)
    eval_render.render(cells, "loss", "pk", "r")
    text = console.file.getvalue()
    _whole(text, 40)
    ((heads, rows),) = _tables(text)
    assert heads[:2] == ["length", "loss (nats/token)"] and set(heads[2:]) <= set(LOSS_DROP)
    assert [r[:2] for r in rows] == [["128", "≤ 1.6023"], ["1024", "≤ 1.6023"]]


def test_a_narrow_harness_table_keeps_the_names_and_values_whole(monkeypatch):
    row = {"recipe": "qa", "harness_version": "0.4", "mode": "ar", "G": 1, "K": 1,
           "bound": False, "mc_samples": None, "harness_task": "mmlu_high_school_statistics",
           "metric": "acc_norm,none", "value": 0.2512, "value_se": 0.0123, "n": 2376,
           "num_fewshot": 5}
    console = _screen(monkeypatch, 60)
    eval_harness.render_harness([row], "r", 1.0)
    text = console.file.getvalue()
    _whole(text, 60)
    ((heads, rows),) = _tables(text)
    assert heads[:3] == ["task", "metric", "value"] and set(heads[3:]) <= set(HARNESS_DROP)
    assert rows == [["mmlu_high_school_statistics", "acc_norm,none", "0.2512"]]


@pytest.mark.slow
def test_fsc_eval_genppl_at_80_columns_shows_each_stored_figure_whole(fsc_main, tmp_path,
                                                                     ar_recipe, monkeypatch):
    from fsc.cli import common
    from fsc.store import Store

    monkeypatch.setattr(common.out, "width", 80)
    res = fsc_main("eval", "tiny_attn", "--task", "genppl", "--data", "shakespeare",
                   "--samples", "2", "--lengths", "8,16", "--prompt-length", "4",
                   "--steps", "1,2", "--policy", "confidence,margin", "--threshold", "none,0.9",
                   "--scorer", ar_recipe, "--store", tmp_path / "st", check=0)
    names, rows = Store(tmp_path / "st").query("SELECT * FROM evaluation")
    rows = [dict(zip(names, r, strict=True)) for r in rows]
    assert len(rows) == 18  # the reference text and 8 settings at each length
    _whole(res.stdout, 80)
    left = _every_figure_whole(res.stdout, rows, several=True)
    assert left <= set(GENPPL_DROP) and "samples 2" in res.stdout
