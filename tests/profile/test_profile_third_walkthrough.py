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
