"""`fsc plot`: every kind renders a real figure from the store, with its labels, units, device
and run id; --run and --where choose the rows; bad input is one line."""

from __future__ import annotations

import json

import pytest
from matplotlib.colors import to_hex
from results_helpers import check_png, eval_run, make_runs, point, train_and_eval_rows

from fsc.results import figures, plots
from fsc.store import Store

PROFILE_KINDS = ("latency", "memory", "throughput", "roofline")


def draw(tmp_path, *args, **kw) -> plots.Drawn:
    """plots.draw, with the figure rendered and checked like every figure a test makes."""
    drawn = plots.draw(*args, **kw)
    path = tmp_path / f"{drawn.kind}-{len(list(tmp_path.glob('*.png')))}.png"
    figures.save(drawn.figure, path)
    check_png(path)
    return drawn


def _plot(cli, *args):
    r = cli("plot", *args, "--force", "--json")  # tests draw again to the same file
    assert r.code == 0, r.err
    return json.loads(r.out)


@pytest.mark.parametrize("kind", PROFILE_KINDS)
def test_each_profile_figure_renders_from_a_real_sweep(kind, cli, real_profile, tmp_path):
    store, run_id = real_profile
    out = tmp_path / f"{kind}.png"
    doc = _plot(cli, kind, "--store", store, "--out", out)
    assert doc["runs"] == [run_id] and doc["rows"] == 8 and doc["path"] == str(out)
    im = check_png(out, colours=list(figures.colours(["tiny_attn", "tiny_mamba"]).values()))
    assert (im.width, im.height) == (doc["width"], doc["height"])


@pytest.mark.parametrize("kind", PROFILE_KINDS)
def test_titles_name_device_and_run_and_axes_carry_units(kind, real_profile, tmp_path):
    store, run_id = real_profile
    drawn = draw(tmp_path, Store(store), kind)
    title = drawn.figure.get_suptitle()
    assert run_id in title and drawn.rows[0]["device_name"] in title and kind in title
    labels = [ax.get_xlabel() + " | " + ax.get_ylabel() for ax in drawn.figure.axes
              if ax.get_visible() and ax.get_xlabel()]
    assert labels and all("(" in lab and ")" in lab for lab in labels), labels


def test_recipe_colour_is_the_same_across_figures(real_profile, tmp_path):
    store, _ = real_profile
    got = {}
    for kind in ("latency", "memory"):
        fig = draw(tmp_path, Store(store), kind).figure
        got[kind] = {text.get_text().split(" · ")[0]: to_hex(handle.get_color())
                     for text, handle in zip(fig.legends[0].get_texts(),
                                             fig.legends[0].legend_handles)
                     if text.get_text().startswith("tiny_")}
    assert got["latency"] == got["memory"] and len(set(got["latency"].values())) == 2


def test_colours_are_a_hash_of_the_name_and_distinct_in_one_figure():
    one = figures.colours(["tiny_attn"])
    assert one == figures.colours(["tiny_attn"])
    many = figures.colours([f"r{i}" for i in range(len(figures.PALETTE))])
    assert len(set(many.values())) == len(figures.PALETTE)  # no two alike while colours last
    assert all(c in figures.PALETTE for c in many.values())


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_floor_and_oom_are_drawn_where_known(tmp_path):
    made = make_runs(tmp_path / "store")
    st = Store(made.store)
    st.add_point(made.run_a, {"recipe": "tiny_attn", "recipe_hash": "x", "S": 262144, "B": 2,
                              "G": 4, "K": 4, "dtype": "bf16", "backend": "auto",
                              "device": "cuda:0", "status": "oom",
                              "predicted_total_bytes": 200 * 2**30})
    fig = draw(tmp_path, st, "latency", [made.run_a]).figure
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "cost-model floor" in labels and "did not fit (oom)" in labels
    mem = draw(tmp_path, st, "memory", [made.run_a]).figure
    labels = [t.get_text() for t in mem.legends[0].get_texts()]
    assert any(lab.startswith("NVIDIA H100 80GB HBM3 memory (80.0 GiB)") for lab in labels)
    assert "did not fit (oom): predicted need" in labels
    roof = draw(tmp_path, st, "roofline", [made.run_a]).figure
    labels = [t.get_text() for t in roof.legends[0].get_texts()]
    assert "H100 SXM roof" in labels and any("3.35 TB/s" in lab for lab in labels)


def test_a_figure_without_known_peaks_says_so(real_profile, tmp_path):
    store, _ = real_profile
    fig = draw(tmp_path, Store(store), "roofline").figure
    assert any("no roof drawn" in t.get_text() for t in fig.legends[0].get_texts())


@pytest.mark.parametrize("suffix, head", [(".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_svg_and_pdf(suffix, head, cli, real_profile, tmp_path):
    store, _ = real_profile
    out = tmp_path / f"fig{suffix}"
    _plot(cli, "latency", "--store", store, "--out", out)
    data = out.read_bytes()
    assert data.startswith(head) and len(data) > 5000
    if suffix == ".svg":
        assert b"<svg" in data and b"<path" in data
    assert b"CreationDate" not in data and b"<dc:date>" not in data  # bytes from the data alone


def test_default_out_is_kind_png_here(cli, real_profile, tmp_path, monkeypatch):
    store, _ = real_profile
    monkeypatch.chdir(tmp_path)
    assert _plot(cli, "throughput", "--store", store)["path"] == "throughput.png"
    check_png(tmp_path / "throughput.png")


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_run_and_where_choose_the_rows(cli, made, tmp_path):
    out = tmp_path / "l.png"
    assert _plot(cli, "latency", "--store", made.store, "--out", out)["runs"] == [made.run_b]
    both = _plot(cli, "latency", "--store", made.store, "--out", out, "--run", "all")
    assert both["runs"] == [made.run_a, made.run_b] and both["rows"] == 18
    one = _plot(cli, "latency", "--store", made.store, "--out", out, "--run", made.run_a,
                "--where", "B = 1 and recipe = 'tiny_attn'")
    assert one["runs"] == [made.run_a] and one["rows"] == 3
    check_png(out, colours=[figures.colours(["tiny_attn"])["tiny_attn"]])


@pytest.mark.parametrize("where, says", [
    ("nosuch = 1", "--where"),
    ("1=1; drop table runs", "--where"),
    ("read_csv('/etc/passwd') is not null", "--where"),
    ("B = 1) union select * from profile where (1=1", "--where"),
    ("   ", "--where"),
    ("B = 99", "nothing to plot"),
])
def test_bad_where_is_one_line_and_the_store_is_unchanged(where, says, cli, made, tmp_path,
                                                          snapshot):
    before = snapshot(made.store)
    r = cli("plot", "latency", "--store", made.store, "--out", tmp_path / "x.png",
            "--where", where)
    assert r.code == 2 and r.err.count("\n") == 1 and says in r.err, r.err
    assert snapshot(made.store) == before and not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("args, says", [
    (["latency", "--run", "nope"], "no profile run 'nope'"),
    (["latency", "--run", "all", "--run", "x"], "stands alone"),
    (["latency", "--out", "x.jpg"], ".png, .svg or .pdf"),
    (["loss"], "no train run"),
    (["bogus"], "bogus"),
])
def test_bad_choices_are_one_line(args, says, cli, made, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("plot", *args, "--store", made.store)
    assert r.code == 2 and r.err.count("\n") == 1 and says in r.err, r.err


def test_no_store_is_one_line(cli, tmp_path):
    r = cli("plot", "latency", "--store", tmp_path / "none", "--out", tmp_path / "x.png")
    assert r.code != 0 and r.err.count("\n") == 1 and "Traceback" not in r.err


@pytest.mark.parametrize("kind", ["loss", "niah", "retrieval"])
def test_training_and_evaluation_figures(kind, cli, tmp_path):
    store = tmp_path / "store"
    ids = train_and_eval_rows(store)
    out = tmp_path / f"{kind}.png"
    doc = _plot(cli, kind, "--store", store, "--out", out)
    assert sorted(doc["runs"]) == sorted(ids["train" if kind == "loss" else "eval"])
    check_png(out, colours=list(figures.colours(["tiny_attn", "tiny_mamba"]).values()))


def test_retrieval_is_the_mean_over_depths_per_ratio(tmp_path):
    ids = train_and_eval_rows(tmp_path / "store")
    drawn = draw(tmp_path, Store(tmp_path / "store"), "retrieval")
    lines = {ln.get_label().split(" · ")[0]: ln for ln in drawn.figure.axes[0].get_lines()}
    attn = lines["tiny_attn"]
    assert list(attn.get_xdata()) == [1.0, 2.0, 4.0]
    cells = [c for c in drawn.rows if c["recipe"] == "tiny_attn" and c["length_ratio"] == 2.0]
    assert attn.get_ydata()[1] == pytest.approx(sum(c["correct"] for c in cells)
                                                / sum(c["n"] for c in cells))
    assert ids["eval"][0] in drawn.figure.get_suptitle()


def test_niah_heatmap_holds_each_cell(tmp_path):
    train_and_eval_rows(tmp_path / "store")
    drawn = draw(tmp_path, Store(tmp_path / "store"), "niah", metric="token_accuracy")
    images = [ax.images[0] for ax in drawn.figure.axes if ax.images]
    assert len(images) == 2  # one panel per checkpoint
    grid = images[0].get_array()
    assert grid.shape == (3, 3) and float(grid.min()) == float(grid.max()) == 0.5


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_loss_from_a_real_training_run(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "store"
    assert cli("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "6",
               "--log-every", "1", "--eval-every", "3", "--out", tmp_path / "run",
               "--store", store).code == 0
    doc = _plot(cli, "loss", "--store", store, "--out", tmp_path / "loss.png")
    assert doc["rows"] == 6
    check_png(tmp_path / "loss.png", colours=[figures.colours(["tiny_attn"])["tiny_attn"]])


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_resumed_training_is_one_curve_named_by_its_task(cli, tmp_path, monkeypatch):
    """Stopped at step 4 (saved), resumed to 8: two runs in the store, one curve of 8 steps
    under the resumed run's id; steps the first run logged past its last save are left out."""
    from fsc.results import select

    monkeypatch.chdir(tmp_path)
    store, out = tmp_path / "store", tmp_path / "run"
    common = ("--log-every", "1", "--store", store)
    assert cli("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "8",
               "--stop-after", "4", "--out", out, *common).code == 0
    assert cli("train", "--resume", out, *common).code == 0
    st = Store(store)
    _, runs = st.query("select run_id from runs where kind = 'train' order by started_at")
    first, second = (r[0] for r in runs)
    # the first run's rows past its save at step 4 are not part of the curve
    st.query(f"insert into train_steps select * replace (5 as step) from train_steps "
             f"where run_id = '{first}' and step = 4", write=True)
    assert select.continued(st, [second]) == {second: [(first, 4)]}
    doc = _plot(cli, "loss", "--store", store, "--out", tmp_path / "loss.png")
    assert doc["runs"] == [second] and doc["rows"] == 8
    got = select.rows(st, select.TRAINING, [second])
    assert [r["step"] for r in got] == list(range(1, 9))
    assert [r["run_id"] for r in got] == [second] * 8
    assert [r.get("part_of_run") for r in got] == [first] * 4 + [None] * 4
    # asked for both, the continued run is drawn once, inside the one that resumed it
    both = select.rows(st, select.TRAINING, [first, second])
    assert [r["step"] for r in both] == list(range(1, 9))
    fig = figures.loss(got, figures.colours(["tiny_attn"]))
    assert "training loss on copy (frontier)" in fig._suptitle.get_text()


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_default_picks_the_latest_run_with_the_rows_each_figure_draws(cli, tmp_path):
    """niah, then mqar, then loss (the README's order): the loss eval is the newest, yet niah
    draws the niah run and retrieval both the niah and the mqar run, and says so."""
    store = tmp_path / "store"
    niah, mqar = eval_run(store, "tiny_attn", "niah"), eval_run(store, "tiny_attn", "mqar")
    eval_run(store, "tiny_attn", "loss")
    assert _plot(cli, "niah", "--store", store, "--out", tmp_path / "n.png")["runs"] == [niah]
    doc = _plot(cli, "retrieval", "--store", store, "--out", tmp_path / "r.png")
    assert doc["runs"] == [niah, mqar] and "niah, mqar or copy cells" in doc["picked"]
    r = cli("plot", "niah", "--store", store, "--out", tmp_path / "n.png", "--force")
    assert r.code == 0 and "the latest eval run of each recipe with niah cells" in r.err
    newer = eval_run(store, "tiny_attn", "niah")
    assert _plot(cli, "niah", "--store", store, "--out", tmp_path / "n.png")["runs"] == [newer]


def test_no_run_with_the_rows_names_them_and_the_command(cli, tmp_path):
    store = tmp_path / "store"
    eval_run(store, "tiny_attn", "loss")
    r = cli("plot", "niah", "--store", store, "--out", tmp_path / "n.png", "--force")
    assert r.code == 2 and r.err.count("\n") == 1
    assert "no eval run with niah cells" in r.err and "fsc eval --task niah" in r.err


def test_default_profile_figure_skips_a_newer_run_without_ok_points(cli, made, tmp_path):
    st = Store(made.store)
    run = st.start_run("profile", "fsc profile", None, {})
    keys = ("recipe", "recipe_hash", "layer_plan", "S", "B", "G", "K", "dtype", "backend",
            "device")
    st.add_point(run, {k: point("tiny_attn", 1024, 1, 1.0)[k] for k in keys} | {"status": "oom"})
    st.finish_run(run)
    assert _plot(cli, "latency", "--store", made.store, "--out", tmp_path / "l.png")["runs"] \
        == [made.run_b]


LONG_DEVICE = "Intel(R) Xeon(R) Platinum 8480+ Processor with a long name"


def _inside(fig) -> None:
    """The figure's title lies within it (none of it clipped at an edge)."""
    fig.canvas.draw()
    box = fig.get_suptitle() and fig._suptitle.get_window_extent()
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width, (box, fig.bbox)


def test_titles_fit_however_long_the_device_and_runs(tmp_path):
    rows = [point("tiny_attn", 1024, B, 1.0) | {"device_name": LONG_DEVICE,
                                                "run_id": f"20261202T0631{B}0-f5a857"}
            for B in (1, 2)]
    colour = figures.colours(["tiny_attn"])
    _inside(figures.throughput(rows, colour))  # one panel: the narrowest figure
    cells = [{"run_id": f"20261202T06310{i}-f5a857", "recipe": "tiny_attn", "task": task,
              "checkpoint": "c", "length": 256 * m, "length_ratio": float(m), "depth": 0.5,
              "pairs": 2, "n": 10, "accuracy": 0.5, "device_name": LONG_DEVICE}
             for i, task in enumerate(("niah", "mqar", "niah")) for m in (1, 2)]
    _inside(figures.niah(cells[:2], colour))
    fig = figures.retrieval(cells, colour)
    _inside(fig)
    styles = {ln.get_label().split(" · ")[1]: ln.get_linestyle() for ln in fig.axes[0].lines}
    assert styles["mqar"] != styles["niah"]  # told apart without the legend's colours
    assert "depths or pair counts" in fig.axes[0].get_ylabel()


def test_copy_cells_draw_a_line_of_their_own_in_the_retrieval_figure():
    """fsc eval --task copy's cells are retrieval's too (dotted); one alone averages nothing."""
    cells = [{"run_id": "20261202T063100-f5a857", "recipe": "tiny_attn", "task": "copy",
              "checkpoint": "c", "length": 32 * m, "length_ratio": float(m), "depth": None,
              "pairs": None, "n": 16, "accuracy": 1 / m, "device_name": "cpu"} for m in (1, 2)]
    fig = figures.retrieval(cells, figures.colours(["tiny_attn"]))
    [line] = fig.axes[0].lines
    assert list(line.get_ydata()) == [1.0, 0.5] and line.get_linestyle() == ":"
    assert "mean over" not in fig.axes[0].get_ylabel()


def test_memory_in_a_unit_that_fits_and_no_line_decades_above_the_data():
    rows = [point("tiny_mamba", S, 1, 1.0) | {"device": "cpu", "device_name": "cpu box",
                                              "device_memory_bytes": int(23.5 * 2**30),
                                              "peak_bytes": 500_000 + 100 * S, "run_id": "r"}
            for S in (1024, 4096)]
    fig = figures.memory(rows, figures.colours(["tiny_mamba"]))
    ax = fig.axes[0]
    assert ax.get_ylabel() == "peak memory (KiB)" and ax.get_ylim()[1] < 2**10
    assert len(ax.lines) == 1  # the data; the device's 23.5 GiB is named in the legend only
    assert any(t.get_text() == "cpu box memory: 23.5 GiB, above the axis (not drawn)"
               for t in fig.legends[0].get_texts())


def test_the_no_roof_note_is_beside_the_plot_not_on_it():
    rows = [point("tiny_attn", S, 1, 1.0) | {"device": "cpu", "step_flops": 1e9,
                                             "bandwidth": None, "run_id": "r"}
            for S in (1024, 4096)]
    fig = figures.roofline(rows, figures.colours(["tiny_attn"]))
    assert all(not ax.texts for ax in fig.axes)
    assert any("no roof drawn" in t.get_text() for t in fig.legends[0].get_texts())


def test_lines_run_in_numeric_order_of_their_keys():
    """1, 2, 16 (not 1, 16, 2 as their text sorts): a line drawn through grouped keys would
    otherwise zigzag back from 16× to 2×."""
    rows = [{"recipe": "r", "length_ratio": x} for x in (16.0, 1.0, 2.0, 8.0, 4.0)]
    assert [k[1] for k in figures.grouped(rows, ("recipe", "length_ratio"))] == [1, 2, 4, 8, 16]
    mixed = [{"recipe": v} for v in ("b", None, "a")]
    assert [k[0] for k in figures.grouped(mixed, ("recipe",))] == ["a", "b", None]


def test_losses_of_different_tasks_get_panels_of_their_own():
    """Loss curves of a copy run and a passkey run are not drawn on one axis."""
    from fsc.results import figures

    rows = [{"run_id": run, "recipe": "tiny_attn", "data": data, "objective": "frontier",
             "step": s, "loss": loss / s, "eval_accuracy": None}
            for run, data, loss in (("r1", "copy", 3.0), ("r2", "passkey", 6.0))
            for s in range(1, 11)]
    fig = figures.loss(rows, {"tiny_attn": "#1f77b4"})
    axes = [ax for ax in fig.axes if ax.lines]
    assert sorted(ax.get_title() for ax in axes) == ["copy (frontier)", "passkey (frontier)"]
    assert all(len(ax.lines) == 1 for ax in axes)
    one = figures.loss(rows[:10], {"tiny_attn": "#1f77b4"})
    assert len([ax for ax in one.axes if ax.lines]) == 1


def test_the_niah_panels_name_the_run_only_when_several_are_drawn(tmp_path):
    """One run: its id is in the figure's title and not again in each panel's; two runs:
    each panel says which it is."""
    ids = train_and_eval_rows(tmp_path / "store")
    st = Store(tmp_path / "store")
    two = draw(tmp_path, st, "niah", runs=ids["eval"])
    assert sorted(ax.get_title().split(" · ")[1] for ax in two.figure.axes
                  if ax.images) == sorted(ids["eval"])
    one = draw(tmp_path, st, "niah", runs=ids["eval"][:1])
    panel = next(ax.get_title() for ax in one.figure.axes if ax.images)
    assert ids["eval"][0] not in panel and ids["eval"][0] in one.figure._suptitle.get_text()


def test_a_narrow_log_axis_gets_enough_labels():
    """Step times between 2.2 and 3.1 ms: a log axis would label only "2" and "3"; at least
    four labels, evenly spaced, and none repeated."""
    rows = [point("tiny_attn", S, 1, step) | {"run_id": "r", "device_name": "cpu box",
                                              "floor_ms": None}
            for S, step in ((1024, 2.2), (2048, 2.6), (4096, 3.1))]
    fig = figures.latency(rows, figures.colours(["tiny_attn"]))
    fig.canvas.draw()
    ax = fig.axes[0]
    shown = [t.get_text() for t in ax.get_yticklabels() + ax.get_yticklabels(minor=True)
             if t.get_text()]
    lo, hi = ax.get_ylim()
    inside = [v for v in ax.get_yticks() if lo <= v <= hi]
    assert len(inside) >= 4 and len(set(shown)) == len(shown) >= 4, shown


def test_throughput_at_one_batch_size_is_a_line_over_s():
    """Every point at B = 1: one panel of tokens/s against S, a line per recipe, not a panel of
    one dot per S."""
    rows = [point(r, S, 1, base * S / 1024) | {"run_id": "r", "device_name": "cpu box"}
            for r, base in (("tiny_attn", 2.0), ("tiny_mamba", 1.0)) for S in (1024, 4096, 16384)]
    fig = figures.throughput(rows, figures.colours(["tiny_attn", "tiny_mamba"]))
    drawn = [ax for ax in fig.axes if ax.lines]
    assert len(drawn) == 1 and [len(line.get_xdata()) for line in drawn[0].lines] == [3, 3]
    assert "B = 1" in fig._suptitle.get_text() and "S" in drawn[0].get_xlabel()
    two = figures.throughput(rows + [r | {"B": 2} for r in rows],
                             figures.colours(["tiny_attn", "tiny_mamba"]))
    assert len([ax for ax in two.axes if ax.lines]) == 3  # a panel per S, lines over B


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_an_existing_file_is_replaced_only_with_force(cli, made, tmp_path):
    """plot and report never replace a file unasked, as export does: one line, exit 2, the
    file as it was; --force replaces it."""
    for args, out in ((["plot", "latency"], tmp_path / "l.png"),
                      (["report"], tmp_path / "r.html")):
        out.write_text("mine")
        r = cli(*args, "--store", made.store, "--out", out)
        assert r.code == 2 and "exists; pass --force" in r.err and out.read_text() == "mine"
        assert cli(*args, "--store", made.store, "--out", out, "--force").code == 0
        assert out.read_bytes() != b"mine"


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_ruler_draws_a_panel_per_part_and_their_average(cli, tmp_path):
    from results_helpers import RULER_PARTS, ruler_run

    store = tmp_path / "store"
    runs = {r: ruler_run(store, r, lambda i, m, d, k=k: (k + i + (d or 0)) / (4 * m))
            for k, r in enumerate(("tiny_attn", "tiny_mamba"))}
    eval_run(store, "tiny_hybrid", "niah")  # passkey cells, no score: not drawn
    drawn = draw(tmp_path, Store(store), "ruler")
    assert sorted(drawn.run_ids) == sorted(runs.values())
    panels = {ax.get_title(): ax for ax in drawn.figure.axes if ax.get_visible()}
    assert list(panels) == ["niah single", "niah multikey", "vt", "cwe", "average"]  # suite order
    for k, recipe in enumerate(runs):
        line = {ln.get_label(): ln for ln in panels["average"].get_lines()}[recipe]
        assert list(line.get_xdata()) == [1.0, 2.0, 4.0]
        # niah parts: the mean over depths 0 and 1 adds 0.5; four parts, i = 0..3
        want = [(k + sum(range(4)) / 4 + 0.5 * 2 / 4) / (4 * m) for m in (1, 2, 4)]
        assert list(line.get_ydata()) == pytest.approx(want)
    doc = _plot(cli, "ruler", "--store", store, "--out", tmp_path / "ruler.png")
    assert doc["rows"] == 2 * sum(2 if t == "niah" else 1 for t, _ in RULER_PARTS) * 3
    check_png(tmp_path / "ruler.png",
              colours=list(figures.colours(["tiny_attn", "tiny_mamba"]).values()))
    r = cli("plot", "ruler", "--store", tmp_path / "empty", "--out", tmp_path / "x.png")
    assert r.code != 0 and r.err.count("\n") == 1


def test_ruler_is_not_hidden_by_a_later_passkey_run(cli, tmp_path):
    """`fsc eval CK --task niah` scores its plain passkey cells as the suite's niah single
    does; a later such run of a recipe must not replace its suite run in the ruler figure."""
    from results_helpers import EVAL_COLUMNS, ruler_run

    store = tmp_path / "store"
    suite = ruler_run(store, "tiny_attn", lambda i, m, d: 0.5)
    st = Store(store)
    passkey = st.start_run("eval", "fsc eval tiny_attn --task niah", None, {"task": "niah"})
    st.add_rows("eval_cells", passkey, [
        {"checkpoint": "/ckpt/tiny_attn", "recipe": "tiny_attn", "recipe_hash": "h",
         "task": "niah", "mode": "diffusion", "G": 4, "K": 4, "train_length": 128, "n": 10,
         "correct": 5, "accuracy": 0.5, "score": 0.5, "length": 128, "length_ratio": 1.0,
         "depth": 0.0}], EVAL_COLUMNS)
    st.finish_run(passkey)
    doc = _plot(cli, "ruler", "--store", store, "--out", tmp_path / "ruler.png")
    assert doc["runs"] == [suite]


def test_niah_of_a_ruler_run_draws_its_passkey_cells_alone(cli, tmp_path):
    """A ruler run's niah variants sit at the passkey's lengths and depths: drawn with it, the
    last of them wrote over its cell. The heatmap holds the passkey's cells; --json counts
    the rows it draws."""
    from results_helpers import ruler_run

    store = tmp_path / "store"
    ruler_run(store, "tiny_hybrid", lambda i, m, d: 0.1 * i)
    r = cli("plot", "niah", "--store", store, "--out", tmp_path / "n.png", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["rows"] == 6  # single at 3 lengths × 2 depths, of 24 cells
    cols, rows = Store(store).query("select * from evaluation")
    cells = figures.niah_cells([dict(zip(cols, row, strict=True)) for row in rows])
    assert len(cells) == 6 and {c["variant"] for c in cells} == {"single"}
