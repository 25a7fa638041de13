"""fsc eval's list options repeat, as fsc profile's --S does: `--lengths 128 --lengths 256` is
`--lengths 128,256` (click kept only the last value, so a second length went unmeasured with
exit 0)."""

import json

import pytest

NIAH = ["eval", "tiny_attn", "--task", "niah", "--samples", "1", "--batch", "1",
        "--device", "cpu", "--json"]


def _cells(fsc_main, *args) -> set[tuple]:
    res = fsc_main(*NIAH, *args, check=0)
    return {(r["length"], r["depth"]) for r in json.loads(res.stdout)["rows"]}


def test_a_list_given_twice_is_the_joined_list(fsc_main, tmp_path):
    st = ["--store", tmp_path / "st"]
    repeated = _cells(fsc_main, "--lengths", "128", "--lengths", "256", "--depths", "0",
                      "--depths", "1", *st)
    assert repeated == {(128, 0.0), (128, 1.0), (256, 0.0), (256, 1.0)}
    assert _cells(fsc_main, "--lengths", "128,256", "--depths", "0,1", *st) == repeated


@pytest.mark.parametrize("given", [["--steps", "2", "--steps", "4"], ["--steps", "2,4"]])
def test_a_repeat_is_refused_where_the_list_is(fsc_main, tmp_path, given):
    res = fsc_main(*NIAH, "--lengths", "128", *given, "--store", tmp_path / "st")
    assert res.returncode == 2 and res.stderr == ("error: --steps takes one K except with "
                                                  "--task genppl\n")


def test_help_says_the_lists_repeat(fsc_main):
    said = " ".join(fsc_main("eval", "--help", check=0).stdout.split())
    for option in ("--lengths", "--depths", "--pairs", "--steps", "--G", "--policy",
                   "--threshold", "--temperature", "--tasks"):
        assert f"{option} LIST" in said
    assert said.count("Repeatable: the lists join.") == 9


def test_build_takes_one_point(fsc_main):
    """fsc build's --S and --B size one cache, as fsc estimate's one point: a second value is
    refused naming the option (it took the last)."""
    res = fsc_main("build", "tiny_attn", "--S", "1k", "--S", "2k")
    assert res.returncode == 2
    assert res.stderr.startswith("error: Invalid value for '--S': given 2 times ('1k', '2k'); "
                                 "fsc build reports the cache at one point")
    said = fsc_main("build", "tiny_attn", "--S", "1k", "--B", "2", check=0).stdout
    assert "cache at S=1024, B=2:" in said
    assert "cache at S=8192, B=1:" in fsc_main("build", "tiny_attn", check=0).stdout
