"""Commands the docs show (profile, results, store, scale), run as a reader would, where what
they did differed from what the docs say: a --where that leaves nothing, runs of one recipe
told apart in a figure, a dry run that checks and records what the run would, a write that
would drop a column."""

from __future__ import annotations

import json

from matplotlib.colors import to_hex

from fsc.results import plots
from fsc.results.axes import MARKERS
from fsc.store import Store

TINY = ["-r", "tiny_attn", "--B", "1", "--repeats", "1", "--warmup", "0"]


def _count(store, sql: str) -> int:
    return Store(store).query(sql)[1][0][0]


def test_a_where_that_leaves_nothing_is_named(fsc_main, made):
    """docs/results.md: nothing to draw says why, "a `--where` that leaves nothing" among the
    reasons; it said "no ok profile point ... (fsc profile records them)"."""
    res = fsc_main("plot", "latency", "--run", made.run_a, "--where", "B = 99",
                   "--store", made.store)
    assert res.returncode == 2
    assert res.stderr.strip() == (f'error: nothing to plot: --where "B = 99" leaves no row of '
                                  f"run {made.run_a}")


def test_plot_says_runs_for_several(fsc_main, made):
    res = fsc_main("plot", "latency", "--run", made.run_a, "--run", made.run_b, "--store",
                   made.store, check=0)
    assert f"rows of runs {made.run_a}, {made.run_b}" in res.stderr


def test_lines_of_one_recipe_from_two_runs_look_different(made):
    """Two runs of a recipe drawn together were two lines of one colour, marker and style:
    which point is whose could be read from nowhere."""
    st = Store(made.store)
    colour = {"tiny_attn": "#ff0000", "tiny_mamba": "#0000ff"}
    for kind in ("throughput", "latency", "memory"):
        fig = plots.draw(st, kind, [made.run_a, made.run_b], colour=colour).figure
        shared = 0
        for ax in fig.axes:
            looks = [(line.get_marker(), str(line.get_linestyle())) for line in ax.get_lines()
                     if to_hex(line.get_color()) == "#ff0000" and line.get_marker() in MARKERS]
            assert len(set(looks)) == len(looks), (kind, looks)
            shared += len(looks) >= 2
        assert shared, kind  # a panel that holds both runs' tiny_attn lines


def test_dry_run_refuses_a_kernel_tuning_the_run_refuses(fsc_main, tmp_path, monkeypatch):
    """docs/kernels.md: `fsc profile` checks FSC_KERNEL_TUNING first; --dry-run said all was
    well and the same command without it then failed."""
    monkeypatch.setenv("FSC_KERNEL_TUNING", "attention.block_n=100")
    res = fsc_main("profile", *TINY, "--S", "16", "--dry-run", "--store", tmp_path / "st")
    assert res.returncode == 2
    assert "FSC_KERNEL_TUNING: attention.block_n=100 is not valid" in res.stderr
    assert "Traceback" not in res.stderr


def test_resume_dry_run_records_nothing_of_slurm_rows(fsc_main, tmp_path):
    """docs/profile.md: --dry-run "records nothing"; `--resume RUN --dry-run` of a run whose
    Slurm tasks left rows stored them and marked their files read."""
    store = tmp_path / "st"
    made = json.loads(fsc_main("profile", *TINY, "--S", "16,32", "--store", store, "--json",
                               check=0).stdout)
    run_id = made["run_id"]
    rows = store / "slurm" / run_id / "rows"
    rows.mkdir(parents=True)
    left = rows / "0.jsonl"  # the S 32 point as a Slurm task wrote it, its driver killed
    left.write_text(json.dumps(next(p for p in made["points"] if p["S"] == 32)) + "\n")
    fsc_main("query", "--write", "--yes", "delete from profile_points where S = 32; "
             "update runs set status = 'interrupted'", "--store", store, check=0)

    dry = fsc_main("profile", "--resume", run_id, "--dry-run", "--json", "--store", store,
                   check=0)
    assert json.loads(dry.stdout)["points"] == []  # the row in the file is as good as stored
    assert "1 point the run's Slurm tasks wrote would be stored" in dry.stderr
    assert _count(store, "select count(*) from profile_points") == 1
    assert left.exists()

    fsc_main("profile", "--resume", run_id, "--store", store, check=0)
    assert _count(store, "select count(*) from profile_points") == 2
    assert not left.exists()


def test_a_write_that_drops_a_column_names_the_column(fsc_main, made):
    """It read "would remove table runs (columns error)", as if the table went."""
    res = fsc_main("query", "--write", "--yes", "alter table runs drop column error",
                   "--store", made.store)
    assert res.returncode == 2
    assert "would remove column error of table runs, which fsc needs" in res.stderr


def test_a_resume_says_what_it_measured_and_what_the_run_holds(fsc_main, tmp_path):
    """After `fsc profile --resume` measured 1 point of 2 it said "2 points recorded in ...",
    as if it had measured both."""
    store = tmp_path / "st"
    run_id = json.loads(fsc_main("profile", *TINY, "--S", "16,32", "--store", store, "--json",
                                 check=0).stdout)["run_id"]
    fsc_main("query", "--write", "--yes", "delete from profile_points where S = 32; "
             "update runs set status = 'interrupted'", "--store", store, check=0)
    res = fsc_main("profile", "--resume", run_id, "--store", store, check=0)
    assert f"1 point measured now; run {run_id} holds 2 in " in res.stdout


def test_a_selection_of_points_none_ok_says_what_they_are(fsc_main, made):
    """A --where that keeps only points that did not run (out of memory) was told "fsc profile
    records them", as though there were none."""
    from results_helpers import point

    st = Store(made.store)
    for S in (65536, 131072):
        st.add_point(made.run_a, point("tiny_mamba", S, 8, 1.0, status="oom", step_ms=None,
                                       tokens_per_s=None, peak_bytes=None))
    res = fsc_main("plot", "latency", "--run", made.run_a, "--where", "status = 'oom'",
                   "--store", made.store)
    assert res.returncode == 2
    assert res.stderr.strip() == ("error: nothing to plot: no ok profile point in the rows "
                                  "selected (those selected are 2 oom)")
