"""`fsc profile --executor`: local worker processes, a local Ray cluster and submitit's local
executor give the points the in-process sweep gives; a worker that dies is retried and no point
is lost or stored twice; --resume measures only what a run lacks, under every executor."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from fsc.scale import executors, work
from fsc.source import load_source_recipe
from fsc.store import Store
from fsc.sweep import SweepConfig, plan

SWEEP = ["-r", "tiny_attn", "-r", "tiny_mamba", "--S", "16,64", "--B", "1,2", "--repeats", "2",
         "--warmup", "0"]
N_POINTS = 8


def points_of(store: Path, run_id: str | None = None) -> list[tuple]:
    st = Store(store)
    where = f"WHERE run_id = '{run_id}'" if run_id else ""
    _, rows = st.query("SELECT recipe_hash, S, B, G, K, dtype, backend, device, status, "
                       f"(SELECT count(*) FROM samples s WHERE s.point_id = p.point_id) "
                       f"FROM profile_points p {where} ORDER BY ALL")
    return rows


def config_of(store: Path, run_id: str) -> dict:
    _, rows = Store(store).query(f"SELECT config FROM runs WHERE run_id = '{run_id}'")
    return json.loads(rows[0][0])


def run_ids(store: Path) -> list[str]:
    _, rows = Store(store).query("SELECT run_id FROM runs ORDER BY started_at")
    return [r[0] for r in rows]


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Path:
    """A store holding one run of the sweep, measured in this process (today's behaviour);
    tests that change a store change a copy."""
    from fsc.cli.main import main

    store = tmp_path_factory.mktemp("local") / "store"
    assert main(["profile", *SWEEP, "--store", str(store)]) == 0
    return store


@pytest.fixture(scope="module")
def in_process(swept) -> list[tuple]:
    """The points of the sweep measured in this process."""
    found = points_of(swept)
    assert len(found) == N_POINTS and {r[8] for r in found} == {"ok"}
    return found


@pytest.fixture(scope="module")
def ray_cluster():
    """A 2-CPU Ray instance on this machine for the module (the executor reuses it)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1")  # loopback only
    yield ray
    ray.shutdown()


def _same_points(store: Path, expected: list[tuple]) -> None:
    (run_id,) = run_ids(store)
    assert points_of(store, run_id) == expected
    config = config_of(store, run_id)
    assert config["recipes"] == ["tiny_attn", "tiny_mamba"]


@pytest.mark.slow  # two worker processes (make test keeps the in-process executor and resume)
def test_two_local_workers_give_the_same_points(cli, in_process, tmp_path):
    r = cli("profile", *SWEEP, "--store", tmp_path / "s", "--workers", "2", "--json")
    assert r.code == 0, r.err
    assert len(json.loads(r.out)["points"]) == N_POINTS
    _same_points(tmp_path / "s", in_process)
    assert config_of(tmp_path / "s", run_ids(tmp_path / "s")[0])["workers"] == 2


@pytest.mark.slow  # processes of their own: make test-slow
def test_a_local_ray_cluster_gives_the_same_points(cli, in_process, ray_cluster, tmp_path):
    r = cli("profile", *SWEEP, "--store", tmp_path / "s", "--executor", "ray")
    assert r.code == 0, r.err
    _same_points(tmp_path / "s", in_process)
    config = config_of(tmp_path / "s", run_ids(tmp_path / "s")[0])
    assert config["executor"] == "ray"
    # the cluster's 2 CPUs time points at once on this machine's cores (it said 1 and no share)
    assert config["workers"] == 2
    assert config["cpu_share"]["lanes"] == 2 and config["cpu_share"]["threads"] == 1


@pytest.mark.slow  # processes of their own: make test-slow
def test_submitits_local_executor_runs_the_array_and_the_driver_stores_its_rows(
        cli, in_process, tmp_path):
    pytest.importorskip("submitit")
    r = cli("profile", *SWEEP, "--store", tmp_path / "s", "--executor", "slurm",
            "--slurm-time", "5")
    assert r.code == 0, r.err
    assert "submitit runs the array on this machine" in r.err  # no sbatch here
    _same_points(tmp_path / "s", in_process)
    (run_id,) = run_ids(tmp_path / "s")
    rows = sorted((tmp_path / "s" / "slurm" / run_id / "rows").iterdir())
    assert len(rows) == 2 and all(p.suffix == ".read" for p in rows)  # both groups, read
    written = [json.loads(line) for p in rows for line in p.read_text().splitlines()]
    assert len(written) == N_POINTS


# ---- a worker that dies --------------------------------------------------------------------

def _dies_once(flag: str):
    """A work function that kills its own worker process the first time any group runs."""

    def fn(cfg, group):
        if not os.path.exists(flag):
            Path(flag).write_text(str(os.getpid()))
            os._exit(3)
        return work.measure(cfg, group)

    return fn


def _setup(tmp_path) -> tuple[SweepConfig, list]:
    cfg = SweepConfig(recipes=["tiny_attn", "tiny_mamba"], S=[16, 64], B=[1, 2], repeats=2,
                      warmup=0)
    points, _ = plan(cfg, {r: load_source_recipe(r) for r in cfg.recipes})
    return cfg, points


def _keys(rows) -> list[tuple]:
    return sorted((r.recipe_hash, r.S, r.B, r.status) for r in rows)


@pytest.mark.slow  # processes of their own: make test-slow
def test_ray_retries_a_task_whose_worker_died(ray_cluster, tmp_path):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cfg, points = _setup(tmp_path)
    flag = str(tmp_path / "died")
    sweep = executors.Distributed(cfg, points, executors.RayCluster(
        "auto", retries=2, cuda=False, fn=_dies_once(flag)), lanes=1)
    stored = []
    sweep.on_point = stored.append
    rows = sweep.run()
    assert Path(flag).exists()  # a worker did die
    assert _keys(rows) == _keys(stored) and len(rows) == N_POINTS
    assert {r.status for r in rows} == {"ok"} and len(set(_keys(rows))) == N_POINTS


@pytest.mark.slow  # processes of their own: make test-slow
def test_ray_gives_up_after_the_retries_and_records_errors(ray_cluster, tmp_path):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cfg, points = _setup(tmp_path)

    def always_fails(cfg, group):
        raise RuntimeError("no such device")

    sweep = executors.Distributed(cfg, points, executors.RayCluster(
        "auto", retries=1, cuda=False, fn=always_fails), lanes=1)
    rows = sweep.run()
    assert len(rows) == N_POINTS and {r.status for r in rows} == {"error"}
    assert all("no such device" in r.error and "after 1 retries" in r.error for r in rows)


@pytest.mark.slow  # processes of their own: make test-slow
def test_local_workers_retry_a_group_whose_process_died(tmp_path):
    cfg, points = _setup(tmp_path)
    flag = str(tmp_path / "died")
    sweep = executors.Distributed(cfg, points, executors.LocalWorkers(
        2, retries=2, cuda=False, fn=_local_dies_once), lanes=2)
    os.environ["FSC_TEST_FLAG"] = flag
    try:
        rows = sweep.run()
    finally:
        del os.environ["FSC_TEST_FLAG"]
    assert Path(flag).exists()
    assert len(rows) == N_POINTS and len(set(_keys(rows))) == N_POINTS
    assert {r.status for r in rows} == {"ok"}


def _local_dies_once(cfg, group):
    """Module level: a spawned pool process imports it by name (tests/ is on its path)."""
    flag = os.environ["FSC_TEST_FLAG"]
    try:
        fd = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return work.measure(cfg, group)
    os.close(fd)
    os._exit(3)


def _waits_unless_first(cfg, group):
    """Module level (a spawned pool process imports it): group 0 at once, others a minute."""
    if group.index:
        time.sleep(60)
    return []


@pytest.mark.slow  # processes of their own: make test-slow
def test_a_stopped_pool_leaves_no_worker_behind():
    """Ctrl-C while a group is still being measured: the pool's processes end with the sweep
    (none left running it, none failing to start once the sweep has gone)."""
    import multiprocessing

    workers = executors.LocalWorkers(2, retries=0, cuda=False, fn=_waits_unless_first)
    arrivals = workers.arrivals(None, [work.Group(0, ()), work.Group(1, ())])
    assert next(arrivals).rows == []
    with pytest.raises(KeyboardInterrupt):
        arrivals.throw(KeyboardInterrupt)
    assert multiprocessing.active_children() == []


def test_groups_split_a_recipe_so_workers_have_work(tmp_path):
    _, points = _setup(tmp_path)
    assert [len(g.points) for g in work.groups(points, 1)] == [4, 4]
    four = work.groups(points, 2)  # twice as many groups as lanes
    assert [len(g.points) for g in four] == [2, 2, 2, 2]
    assert sorted(id(p) for g in four for p in g.points) == sorted(map(id, points))
    assert [work.cost(g.points) for g in four] == sorted((work.cost(g.points) for g in four),
                                                        reverse=True)  # the largest first
    assert all(len({p.ref for p in g.points}) == 1 for g in four)  # one recipe each
    assert len(work.groups(points, 100)) == N_POINTS


# ---- --resume, whatever runs the points ------------------------------------------------------

def _interrupted_run(cli, swept: Path, store: Path) -> str:
    """A finished sweep (a copy of `swept`'s) with three points removed and marked
    interrupted: what a kill leaves."""
    shutil.copytree(swept, store)
    (run_id,) = run_ids(store)
    st = Store(store)
    assert cli("query", "--store", store, "--write", "--yes",
               f"DELETE FROM samples WHERE point_id IN (SELECT point_id FROM profile_points "
               f"WHERE run_id = '{run_id}' AND S = 64 AND NOT (B = 1 AND recipe = 'tiny_mamba'));"
               f"DELETE FROM profile_points WHERE run_id = '{run_id}' AND S = 64 AND NOT "
               f"(B = 1 AND recipe = 'tiny_mamba')").code == 0
    st.finish_run(run_id, "interrupted", "test")
    assert len(points_of(store, run_id)) == N_POINTS - 3
    return run_id


SLOW = pytest.mark.slow  # the same path again on another engine: make test-slow
EVERY_EXECUTOR = [["--workers", "2"], pytest.param(["--executor", "ray"], marks=SLOW),
                  pytest.param(["--executor", "slurm"], marks=SLOW)]


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
@pytest.mark.parametrize("how", EVERY_EXECUTOR)
def test_resume_measures_only_what_is_missing(how, cli, swept, in_process, tmp_path, request):
    if "ray" in how:
        request.getfixturevalue("ray_cluster")
    store = tmp_path / "s"
    run_id = _interrupted_run(cli, swept, store)
    r = cli("profile", "--resume", run_id, "--store", store, *how, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["points_stored_before"] == N_POINTS - 3 and doc["points_measured_now"] == 3
    assert len(doc["points"]) == N_POINTS  # every point the run holds
    assert points_of(store, run_id) == in_process  # the union, each point once


def test_resume_stores_rows_slurm_tasks_wrote_after_the_driver_died(cli, swept, in_process,
                                                                    tmp_path):
    store = tmp_path / "s"
    run_id = _interrupted_run(cli, swept, store)
    # a task of the killed driver wrote two of the missing points (and one already stored)
    cfg, points = _setup(tmp_path)
    missing = [p for p in points if p.S == 64 and not (p.B == 1 and p.ref == "tiny_mamba")]
    kept = [p for p in points if p.S == 16][:1]
    rows = work.measure(cfg, work.Group(0, tuple(missing[:2] + kept)))
    folder = store / "slurm" / run_id / "rows"
    folder.mkdir(parents=True)
    (folder / "old-00000.jsonl").write_text("".join(json.dumps(r, default=str) + "\n"
                                                    for r in rows) + '{"cut": ')  # torn line
    r = cli("profile", "--resume", run_id, "--store", store, "--json")
    assert r.code == 0, r.err
    assert "2 points the run's Slurm tasks wrote were stored" in r.err
    assert json.loads(r.out)["points_measured_now"] == 1  # only the one no task wrote
    assert points_of(store, run_id) == in_process
    assert not list(folder.glob("*.jsonl"))  # taken once


@pytest.mark.parametrize("args, says", [
    (["--executor", "ray", "--slurm-time", "5"], "--slurm-time does not apply to --executor ray"),
    (["--executor", "local", "--slurm-time", "5"], "does not apply to --executor local"),
    (["--executor", "ray", "--address", "nowhere"], "--address"),
    (["--executor", "nope"], "--executor"),
    (["--workers", "0"], "--workers"),
    (["--retries", "-1"], "--retries"),
])
def test_bad_executor_options_are_one_line(args, says, cli, tmp_path):
    r = cli("profile", *SWEEP, "--store", tmp_path / "s", *args)
    assert r.code == 2 and r.err.count("\n") == 1 and says in r.err, r.err
    assert not (tmp_path / "s").exists()


# ---- fsc eval on the same executors ----------------------------------------------------------

EVAL = ["eval", "tiny_attn", "--lengths", "128,256", "--depths", "0,1", "--samples", "2",
        "--batch", "2"]
SAME = ("task", "length", "depth", "pairs", "n", "correct", "accuracy", "token_accuracy")


def _cells(doc) -> list[tuple]:
    return [tuple(r[k] for k in SAME) for r in doc["rows"]]


@pytest.fixture(scope="module")
def eval_in_process(tmp_path_factory):
    from fsc.cli.main import main

    store = tmp_path_factory.mktemp("eval") / "store"
    assert main([*EVAL, "--store", str(store)]) == 0
    _, rows = Store(store).query(f"SELECT {', '.join(SAME)} FROM evaluation ORDER BY length, depth")
    assert len(rows) == 4
    return rows


@pytest.mark.slow  # the in-process grid against worker processes: make test-slow
@pytest.mark.parametrize("how", EVERY_EXECUTOR)
def test_eval_grids_run_on_every_executor(how, cli, eval_in_process, tmp_path, request):
    if "ray" in how:
        request.getfixturevalue("ray_cluster")
    r = cli(*EVAL, "--store", tmp_path / "s", *how, "--json")
    assert r.code == 0, r.err
    assert _cells(json.loads(r.out)) == [tuple(x) for x in eval_in_process]
    _, rows = Store(tmp_path / "s").query(
        f"SELECT {', '.join(SAME)} FROM evaluation ORDER BY length, depth")
    assert rows == eval_in_process  # stored once each, by the driver


DRIVER = """import sys
sys.path.insert(0, {here!r})
import sleepy_work
from fsc.scale import executors, work
pool = executors.LocalWorkers(2, retries=0, cuda=False, fn=sleepy_work.sleeps)
for arrival in pool.arrivals(None, [work.Group(0, ()), work.Group(1, ())]):
    print(arrival, flush=True)
"""


@pytest.mark.slow  # processes of their own: make test-slow
def test_a_killed_driver_leaves_no_worker_behind(tmp_path):
    """kill -9 of the driver gives it no chance to end its pool: its processes end by
    themselves, and so the driver's stdout reaches its end (a caller reading it is not held)."""
    import signal
    import subprocess

    pids = tmp_path / "pids"
    pids.mkdir()
    driver = subprocess.Popen([sys.executable, "-c", DRIVER.format(here=str(Path(__file__).parent))],
                              stdout=subprocess.PIPE, env={**os.environ, "FSC_TEST_PIDS": str(pids)})
    try:
        deadline = time.monotonic() + 120
        while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        workers = [int(p.name) for p in pids.iterdir()]
        assert len(workers) == 2, "the workers did not start"
    finally:
        driver.send_signal(signal.SIGKILL)
    driver.wait(10)
    deadline = time.monotonic() + 20
    alive = workers
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()
                 and "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]]
    for pid in alive:  # (not left behind by a failing test)
        os.kill(pid, signal.SIGKILL)
    assert alive == [], "workers outlived their driver"
    assert driver.stdout.read() == b""  # its end reached: no worker holds it open
