"""`fsc compare` across how a device was named and what hardware it was: `--device auto`
records `cuda`, a worker or `--device cuda:0` records `cuda:0`, the same GPU; runs on
different hardware are compared with a note saying so."""

from __future__ import annotations

import json

from results_helpers import _env, point

from fsc.recipe import load_recipe
from fsc.store import Store


def _runs(store, made: list[tuple[str, str]]) -> list[str]:
    """A finished profile run of tiny_attn per (device, device name), two points each."""
    st = Store(store)
    r = load_recipe("tiny_attn")
    st.register_recipe("tiny_attn", r.recipe_hash, r.to_yaml(), r.layer_plan)
    runs = []
    for device, name in made:
        run = st.start_run("profile", "fsc profile", _env(st, name), {"recipes": ["tiny_attn"]})
        for S in (1024, 4096):
            st.add_point(run, point("tiny_attn", S, 1, 2.0 * S / 1024, device=device))
        st.finish_run(run)
        runs.append(run)
    return runs


def test_cuda_and_cuda0_are_the_same_device(cli, tmp_path):
    h100 = "NVIDIA H100 80GB HBM3"
    runs = _runs(tmp_path / "store", [("cuda", h100), ("cuda:0", h100)])
    r = cli("compare", *runs, "--store", tmp_path / "store", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert [p["device"] for p in doc["points"]] == ["cuda:0", "cuda:0"]
    assert doc["only_a"] == doc["only_b"] == [] and "note:" not in r.err
    assert doc["devices"] == {"a": [h100], "b": [h100]} and doc["notes"] == []


def test_runs_on_different_hardware_are_said_to_be(cli, tmp_path):
    runs = _runs(tmp_path / "store", [("cuda:0", "NVIDIA H100 80GB HBM3"),
                                      ("cuda:0", "NVIDIA H200")])
    r = cli("compare", *runs, "--store", tmp_path / "store", "--json")
    assert r.code == 0, r.err
    note = (f"note: A ({runs[0]}) ran on NVIDIA H100 80GB HBM3, B ({runs[1]}) on NVIDIA H200: "
            "the ratios compare the devices as well as the runs")
    assert note in r.err and json.loads(r.out)["notes"] == [note]


def test_one_matched_point_is_one_point(cli, tmp_path):
    h100 = "NVIDIA H100 80GB HBM3"
    st = Store(tmp_path / "store")
    (a,) = _runs(tmp_path / "store", [("cuda:0", h100)])
    b = st.start_run("profile", "fsc profile", _env(st, h100), {"recipes": ["tiny_attn"]})
    st.add_point(b, point("tiny_attn", 1024, 1, 2.0))
    st.finish_run(b)
    r = cli("compare", a, b, "--store", tmp_path / "store")
    assert r.code == 0, r.err
    assert "1 point matched (1 noise); 1 only in A, 0 only in B" in " ".join(r.out.split())


def test_a_point_oom_in_both_runs_is_no_change_of_status(cli, tmp_path):
    h100 = "NVIDIA H100 80GB HBM3"
    st = Store(tmp_path / "store")
    r = load_recipe("tiny_attn")
    st.register_recipe("tiny_attn", r.recipe_hash, r.to_yaml(), r.layer_plan)
    runs = []
    for _ in range(2):
        run = st.start_run("profile", "fsc profile", _env(st, h100), {"recipes": ["tiny_attn"]})
        st.add_point(run, point("tiny_attn", 1024, 1, 2.0))
        st.add_point(run, {**point("tiny_attn", 4096, 1, 2.0), "status": "oom"})
        st.finish_run(run)
        runs.append(run)
    res = cli("compare", *runs, "--store", tmp_path / "store")
    assert res.code == 0, res.err
    assert "2 points matched (1 both oom, 1 noise)" in " ".join(res.out.split())
    assert "status" not in res.out.split("points matched")[1]
