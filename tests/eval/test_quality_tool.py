"""tools.quality (`make quality`): the jobs it runs and how it reads its targets."""

from tools import quality


def test_the_jobs_train_the_trio_the_ar_row_and_a_larger_scorer():
    a = quality.options([])
    jobs = {j.tag: j for j in quality.jobs(a)}
    assert {j.recipe for j in jobs.values()} == {*quality.TRIO, quality.SCORER}
    assert jobs[quality.AR].recipe == "quality_attn" and jobs[quality.AR].objective == "ar"
    assert jobs[quality.SCORER].objective == "ar"
    assert all(jobs[t].objective == "blocks" for t in quality.TRIO)
    more = quality.options(["--seeds", "1,2"])
    tags = [j.tag for j in quality.jobs(more)]
    assert "quality_attn-s2" in tags and quality.SCORER not in tags  # seed 0's scorer
    assert {j.seed for j in quality.jobs(more)} == {1, 2}


def _row(K, ppl, entropy, mode="diffusion", policy="confidence"):
    return (mode, K, "r", ppl, ppl * 0.9, ppl * 1.1, entropy, 100.0, policy)


def test_verdicts_follow_the_numbers():
    ref = _row(None, 5.0, 3.0, "reference", None)
    cells = {"quality_attn": [_row(1, 100.0, 3.1), _row(8, 20.0, 2.95)],
             "quality_mamba": [_row(1, 90.0, 2.5), _row(8, 22.0, 2.9)],
             "quality_hybrid": [_row(1, 30.0, 3.0), _row(8, 40.0, 3.0),
                                _row(8, 10.0, 3.0, policy="random")]}
    said = "\n".join(quality.verdicts(cells, ref, ["confidence"]))
    assert "confidence, quality_attn: Gen-PPL falls from K = 1 to K = 8 (100.0 → 20.0): met" in said
    assert "quality_hybrid: Gen-PPL does not fall" in said and "(30.0 → 40.0): missed" in said
    assert "quality_mamba: sample entropy within 16.7% of the text's (3.00) at every K: missed" in said
    assert "quality_mamba at K = 8: Gen-PPL 1.10× attention's (22.0 against 20.0): met" in said
    assert "quality_hybrid at K = 8: Gen-PPL 2.00× attention's (40.0 against 20.0): missed" in said
    assert "random" not in said  # each policy judged on its own cells
