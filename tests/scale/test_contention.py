"""A CPU sweep whose timing processes outnumber the cores says so before it starts and is
marked contended in its run's config."""

from __future__ import annotations

import json

import pytest

from fsc.scale.contention import cpu_share, warning
from fsc.store import Store

SWEEP = ["profile", "-r", "tiny_mamba", "--S", "16", "--B", "1", "--repeats", "1",
         "--warmup", "0", "--device", "cpu"]


@pytest.mark.parametrize("lanes, threads, cores, contended", [
    (1, 1, 2, False), (1, 2, 2, False), (1, 4, 2, True),
    (2, 1, 2, True),  # two workers and the driver on two cores: the review's 1.6–15.7×
    (2, 1, 4, False), (4, 2, 8, True),
])
def test_contention_counts_lanes_threads_and_the_driver(lanes, threads, cores, contended):
    share = cpu_share(lanes, threads, cores)
    assert share == {"lanes": lanes, "threads": threads, "cores": cores, "contended": contended}


def _config(store) -> dict:
    (text,) = Store(store).query("select config from runs")[1][0]
    return json.loads(text)


def test_a_contended_sweep_warns_and_is_recorded(cli, tmp_path, monkeypatch):
    monkeypatch.setattr("fsc.cli.profile.torch_threads", lambda: 4)
    monkeypatch.setattr("fsc.scale.contention.cores", lambda: 2)
    r = cli(*SWEEP, "--store", tmp_path / "store")
    assert r.code == 0, r.err
    assert warning(cpu_share(1, 4, 2)) + "\n" in r.err
    assert _config(tmp_path / "store")["cpu_share"] == {"lanes": 1, "threads": 4, "cores": 2,
                                                        "contended": True}


def test_a_sweep_with_cores_to_spare_says_nothing(cli, tmp_path, monkeypatch):
    monkeypatch.setattr("fsc.scale.contention.cores", lambda: 2)
    r = cli(*SWEEP, "--store", tmp_path / "store")
    assert r.code == 0 and "warning" not in r.err
    assert _config(tmp_path / "store")["cpu_share"]["contended"] is False
