"""What `fsc query` prints for a person: tables that fit, records when they do not, values
shown as text."""

import json

import pytest

from fsc.cli.common import out


@pytest.fixture
def width(monkeypatch):
    """Set the width of fsc's stdout console, as a terminal of that many columns would."""
    return lambda columns: monkeypatch.setattr(out, "width", columns)


def test_a_wide_result_is_shown_one_record_per_row(two_runs, cli, width):
    width(100)
    result = cli("query", "select * from profile order by point_id")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert "┃" not in result.out  # no squeezed table
    assert [x for x in lines if x.startswith("row ")] == [
        f"row {n} " + "─" * 94 for n in (1, 2, 3, 4)]
    assert any(x.split() == ["recipe", "tiny"] for x in lines)
    assert any(x.split() == ["S", "1024"] for x in lines)
    assert len(lines) < 4 * 50  # 45 columns, one line each


def test_a_narrow_result_is_a_table_with_numbers_right_aligned(two_runs, cli, width):
    width(100)
    result = cli("query", 'select recipe, "S", step_ms from profile order by "S"')
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert "┃ recipe ┃    S ┃ step_ms ┃" in lines
    assert "│ other  │   64 │     0.5 │" in lines
    assert "│ tiny   │ 4096 │   4.096 │" in lines


def test_the_same_columns_become_records_when_the_terminal_is_narrow(two_runs, cli, width):
    width(20)
    result = cli("query", 'select recipe, "S", step_ms from profile order by "S"')
    assert "┃" not in result.out
    assert result.out.splitlines()[:4] == ["row 1 " + "─" * 14, "recipe   other", "S        64",
                                           "step_ms  0.5"]


def test_zero_rows(two_runs, cli):
    result = cli("query", "select * from runs where false")
    assert (result.code, result.out) == (0, "0 rows\n")


@pytest.mark.parametrize("value", ["[/bold]", "[red]x[/red]", "[link=file:///etc]y[/link]"])
def test_markup_in_values_and_names_is_printed_as_text(two_runs, cli, width, value):
    width(100)
    for sql in (f"select '{value}' as v", f"select 1 as \"{value}\""):
        result = cli("query", sql)
        assert result.code == 0, result.err
        assert value in result.out


def test_control_characters_are_escaped(two_runs, cli):
    result = cli("query", "select 'a' || chr(27) || '[2J' || chr(10) || 'b' || chr(7) as v")
    assert result.code == 0, result.err
    assert "a\\x1b[2J\\nb\\x07" in result.out
    assert not any(c in result.out for c in "\x1b\x07")


def test_long_values_are_cut_on_screen_only(two_runs, cli):
    sql = "select repeat('x', 100000) as v"
    shown = cli("query", sql)
    assert shown.code == 0 and 400 < shown.out.count("x") < 600 and "…" in shown.out
    assert len(json.loads(cli("query", sql, "--json").out)[0]["v"]) == 100000


def test_json_flag(two_runs, cli):
    result = cli("query", "select 1 as a, 'nan'::double as b", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out) == [{"a": 1, "b": None}]
    assert cli("query", "select 1", "--json", "--format", "json").code == 0
    clash = cli("query", "select 1", "--json", "--format", "csv")
    assert clash.code == 2 and "--json and --format csv disagree" in clash.err


def test_csv_flag_is_format_csv(two_runs, cli):
    result = cli("query", "select 1 as a, 'x' as b", "--csv")
    assert result.code == 0, result.err
    assert result.out == cli("query", "select 1 as a, 'x' as b", "--format", "csv").out
    assert result.out.splitlines()[0] == "a,b"
    for clash, says in ((["--json"], "--json and --csv"),
                        (["--format", "json"], "--csv and --format json")):
        res = cli("query", "select 1", "--csv", *clash)
        assert res.code == 2 and says in res.err
