"""An unreachable Ray cluster is one line, before any run is recorded (its own module: the
executor tests keep a Ray instance up in theirs)."""

import pytest

from fsc.store import Store

SWEEP = ["-r", "tiny_attn", "--S", "16", "--B", "1", "--repeats", "1", "--warmup", "0"]


def test_no_ray_cluster_is_one_line(cli, tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray instance is up in this process")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    r = cli("profile", *SWEEP, "--store", tmp_path / "s", "--executor", "ray",
            "--address", "127.0.0.1:1")
    assert r.code == 1 and r.err.count("\n") == 1 and "no Ray cluster reached" in r.err, r.err
    st = Store(tmp_path / "s")
    assert not st.exists() or st.query("SELECT count(*) FROM runs")[1] == [(0,)]
