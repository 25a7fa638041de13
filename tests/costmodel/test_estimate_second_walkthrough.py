"""`fsc estimate` read against its own figures: a crossover is stated as the whole K that
is faster, the share of the device never reads 100 % on the wrong side of `fits` (nor 0 %),
a small tokens/s is not printed as 0.0, the G = 1 hint names a command that works, and the
help says what ar mode does with --steps."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def wide(monkeypatch):
    from fsc.cli import common

    monkeypatch.setattr(common.out, "width", 200)  # every note whole on its line


def _said(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_the_floor_crossover_counts_the_last_faster_K(cli, wide):
    """hybrid_3b at G 8: the floors meet at K = 7.05, so K = 7 is still faster than ar (the
    table says so); 'faster while K < 7.0' read as K <= 6."""
    args = ("estimate", "hybrid_3b", "--G", "8", "--steps", "7")
    doc = json.loads(cli(*args, "--json").out)["comparison"]
    assert 7 < doc["floor_crossover_steps"] < 7.05
    assert doc["diffusion_tokens_per_s"] > doc["ar_tokens_per_s"]  # K = 7 is faster
    r = cli(*args)
    assert r.code == 0, r.err
    said = _said(r.out)
    assert ("diffusion sweeps the weights less often than ar for K <= 6; its floor is faster "
            "than ar's for K <= 7 (break-even at K = 7.05)") in said
    assert "K < 7.0" not in said


@pytest.mark.parametrize(("memory", "share", "fits"), [("87.8", ">100%", "NO"),
                                                       ("87.9", "<100%", "yes")])
def test_the_share_of_the_device_agrees_with_fits(cli, wide, memory, share, fits):
    """hybrid_3b at S 200,000, B 8 needs 87,861,558,560 B: 100.07 % of 87.8 GB (no fit),
    99.96 % of 87.9 GB (fits); both printed '100%' before."""
    args = ("estimate", "hybrid_3b", "--S", "200000", "--B", "8", "--memory", memory)
    assert json.loads(cli(*args, "--json").out)["total_bytes"] == 87_861_558_560
    said = _said(cli(*args).out)
    gib = f"{float(memory) * 1e9 / 2**30:.1f} GiB"  # the device's size in the total's unit
    assert f"total 81.8 GiB {share} of the device's {gib} ({float(memory):.2f} GB)" in said
    assert f"fits {fits}" in said and " 100% " not in said


def test_a_few_mib_is_not_zero_percent_of_the_device(cli, wide):
    said = _said(cli("estimate", "tiny_hybrid").out)
    assert "total 3.53 MiB <1% of the device's 79.6 GiB (85.52 GB)" in said


def test_a_small_tokens_per_s_is_not_printed_as_zero(cli, wide):
    """attn_7b at 16m tokens on a 50 GB/s device: 0.00568 tokens/s, not '0.0'."""
    args = ("estimate", "attn_7b", "--S", "16m", "--gpu", "cpu", "--bandwidth", "0.05",
            "--tflops", "1", "--memory", "1000")
    tps = json.loads(cli(*args, "--json").out)["tokens_per_s"]
    assert 0 < tps < 0.05
    said = _said(cli(*args).out)
    assert f"tokens/s at the floor = B / that = {tps:.3g} " in said + " "  # (ar: G 1)


def test_the_g1_hint_names_a_command_that_works(cli, wide):
    """With --mode ar, '--G N' alone is refused; the hint says to leave --mode ar out, and
    that command gives the comparison."""
    said = _said(cli("estimate", "published/Llama-3.1-8B", "--mode", "ar").out)
    assert ("G = 1: no block-diffusion comparison; give --G N (N > 1) for one, without "
            "--mode ar") in said
    assert cli("estimate", "published/Llama-3.1-8B", "--mode", "ar", "--G", "8").code == 2
    doc = json.loads(cli("estimate", "published/Llama-3.1-8B", "--G", "8", "--json").out)
    assert doc["comparison"] is not None
    # a diffusion point at G 1 keeps the short hint: --G N is all it needs
    said = _said(cli("estimate", "tiny_hybrid", "--G", "1").out)
    assert "give --G N (N > 1) for one" in said and "without --mode ar" not in said


def test_help_says_ar_mode_refuses_steps_and_names_published_models(cli):
    said = _said(cli("estimate", "--help").out)
    assert "ar mode takes none" in said and "Not used in ar mode" not in said
    assert "published/NAME" in said
    r = cli("estimate", "tiny_hybrid", "--mode", "ar", "--steps", "2")
    assert r.code == 2 and "drop --steps 2" in r.err and "--G" not in r.err
    r = cli("estimate", "tiny_hybrid", "--mode", "ar", "--G", "4", "--steps", "2")
    assert r.code == 2 and "drop --G 4 and --steps 2" in r.err


@pytest.mark.parametrize(("given", "says"), [("1.5k", "'1.5k' is not an integer (e.g. 4096 or 4k)"),
                                             ("", "--S is empty; give a size such as 4096 or 4k"),
                                             ("99999999999999999999", "99999999999999999999 is "
                                              "above 16777216, the largest fsc takes")])
def test_a_single_size_option_gives_an_example_of_one_size(cli, given, says):
    """--S takes one size: its errors suggested a list ('1024,4096 or 4k'), which it refuses."""
    r = cli("estimate", "tiny_hybrid", "--S", given)
    assert r.code == 2 and says in _said(r.err) and "1024,4096" not in r.err


def test_an_empty_revision_is_refused(cli):
    """hf:ORG/NAME@ read as no revision at all (the main branch), silently."""
    r = cli("estimate", "hf:org/name@")
    assert r.code == 2 and "hf:org/name@: no revision after @" in _said(r.err)
    assert len(r.err.strip().splitlines()) == 1


def test_a_count_that_rounds_up_takes_the_next_unit():
    from fsc.cli.common import fmt_count

    assert [fmt_count(n) for n in (999, 1000, 999_994, 999_995, 999_999_999, 12_345)] == [
        "999", "1.00K", "999.99K", "1.00M", "1.00B", "12.35K"]  # (was 1000.00M for 999,999,999)


def test_the_library_refuses_more_steps_than_the_block_has():
    """estimate(..., G=4, K=8) was priced (the command line refuses --steps 8 at G 4)."""
    from fsc.costmodel.estimator import estimate
    from fsc.errors import UsageError
    from fsc.recipe import load_recipe

    with pytest.raises(UsageError, match="--steps 8 must be between 1 and G = 4"):
        estimate(load_recipe("tiny_hybrid"), 64, 1, G=4, K=8)


def test_a_count_of_trillions_is_written_in_T():
    """A 90.6-trillion-parameter recipe was shown as 90577.26B."""
    from fsc.cli.common import fmt_count

    assert [fmt_count(n) for n in (90_577_260_000_000, 999_999_999_999, 1_500_000_000)] == [
        "90.58T", "1.00T", "1.50B"]
