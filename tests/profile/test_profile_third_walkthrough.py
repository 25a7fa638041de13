"""`fsc profile` and its figures, checked by hand: an out-of-memory row's line in a log, the
figures' lines told apart, the floor of one S, a point whose spread its median lies outside."""

QUICK = ["--warmup", "0", "--repeats", "1"]


def test_an_oom_line_stays_one_line_in_a_log(fsc_main, tmp_path):
    """stderr written to a file or a pipe is 80 columns to rich: the line broke in three."""
    res = fsc_main("profile", "-r", "tiny_attn", "--S", "4096", "--B", "4", "--memory-budget",
                   "3MiB", *QUICK, "--store", tmp_path / "st")
    [line] = [x for x in res.stderr.splitlines() if x.startswith("oom ")]
    assert line.startswith("oom tiny_attn S=4096 B=4 G=4 K=4: tiny_attn: needs ")
    assert line.endswith("but the memory budget is 3.00 MiB")


def test_a_dry_run_checks_what_the_run_would_refuse(fsc_main, tmp_path, monkeypatch):
    """A dry run passed FSC_THREADS=0 and a store that cannot be written, which the run then
    refused; it "checks what the run would check first"."""
    ask = ["profile", "-r", "tiny_attn", "--S", "1k", "--B", "1", "--dry-run"]
    res = fsc_main(*ask, "--store", "/proc/fsc-store")
    assert res.returncode == 2 and "cannot write in folder /proc" in res.stderr
    monkeypatch.setenv("FSC_THREADS", "0")
    res = fsc_main(*ask, "--store", tmp_path / "st")
    assert res.returncode == 2 and "FSC_THREADS='0' must be a positive integer" in res.stderr
    assert not (tmp_path / "st").exists()


def test_a_resume_on_other_workers_is_kept_in_the_runs_config(tmp_path):
    """`fsc profile --resume ID --workers 2` measured the rest on two processes (contended on
    two cores) while the run's config still said one worker, uncontended: the points measured
    after the resume were recorded under the first session's conditions."""
    import json

    from fsc.store import Store

    st = Store(tmp_path / "st")
    first = {"executor": "local", "workers": 1, "cpu_share": {"contended": False}, "S": [16]}
    run_id = st.start_run("profile", "fsc profile", None, first)
    st.add_point(run_id, {"recipe": "tiny", "S": 16, "B": 1}, {"step": [1.0]})
    st.finish_run(run_id, "interrupted")
    for session in ({**first, "workers": 2, "cpu_share": {"contended": True}}, first):
        with st.run("profile", "fsc profile --resume", session, resume=run_id) as run:
            run.end("interrupted", "stopped")
    _, [(config,)] = st.query(f"select config from runs where run_id = '{run_id}'")
    config = json.loads(config)
    assert (config["workers"], config["cpu_share"]) == (1, {"contended": False})  # as it began
    assert [{k: v for k, v in r.items() if k != "at"} for r in config["resumes"]] == [
        {"rows_before": 1, "workers": 2, "cpu_share": {"contended": True}},
        {"rows_before": 1, "workers": 1, "cpu_share": {"contended": False}}]
    with st.run("profile", "fsc profile --resume", first, resume=run_id):  # as it last ran
        pass
    _, [(config,)] = st.query(f"select config from runs where run_id = '{run_id}'")
    assert len(json.loads(config)["resumes"]) == 2


def test_a_sweep_or_eval_stopped_with_json_still_prints_a_document(fsc_main, tmp_path,
                                                                  monkeypatch):
    """`fsc profile --json` (and `fsc eval --json`) stopped by a signal printed nothing on
    stdout, where `fsc train --json` prints its document with "interrupted": a script reading
    stdout got no run id to resume."""
    import json
    import signal

    from fsc.interrupts import Stopped
    from fsc.scale import evaluation, profiling

    def stop(*args, **kwargs):
        raise Stopped(signal.SIGTERM, "20261207T000000-abcdef", 3, 8)

    monkeypatch.setattr(profiling, "profile", stop)
    monkeypatch.setattr(evaluation, "evaluate", stop)
    for args, kept, resume in (
            (["profile", "-r", "tiny_attn", "--S", "1k", "--B", "1"],
             "3 of 8 points of run 20261207T000000-abcdef are stored", "fsc profile --resume"),
            (["eval", "tiny_attn", "--task", "mqar", "--lengths", "128", "--samples", "1"],
             "3 cells of run 20261207T000000-abcdef stored", "fsc eval --resume")):
        res = fsc_main(*args, "--json", "--store", "st")
        command = f"{resume} 20261207T000000-abcdef --store st"
        assert res.returncode == 143 and res.stderr.splitlines()[-2:] == [
            f"interrupted: {kept}; continue with:", f"  {command}"], res.stderr
        assert json.loads(res.stdout) == {
            "run_id": "20261207T000000-abcdef", "interrupted": True, "signal": "SIGTERM",
            "stored": 3, "total": 8, "resume": command}
