"""docs/costmodel.md, docs/profile.md and docs/scale.md held to what the tools do: a sliding
window's ring is read and written as far as a block reaches, a break-even is never printed
rounded onto a whole K, the marketed 80 GB is not the H100's memory, and a GPU run's points
are found again when it is resumed under another executor."""

from __future__ import annotations

import json

from fsc.recipe import load_recipe
from fsc.sweep import SweepConfig, plan, unmeasured
from fsc.sweep_results import PointResult


def _said(text: str) -> str:
    return " ".join(text.split())


def _estimate(cli, *args) -> dict:
    r = cli("estimate", *args, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_a_window_ring_is_read_and_written_only_where_a_block_reaches(cli):
    """passkey_hybrid_swa: one attention layer with a ring of W = 32 slots, 3 Mamba layers.
    A slot of the ring is k and v of B = 2 sequences, 2 KV heads of 16, fp32: 512 B. At S = 8
    a block reads 8 slots, and a fold of G = 4 writes 4, not the whole ring; each Mamba
    layer's state (71,680 B at B 2) is read and rewritten in full."""
    mamba = 3 * 71_680
    doc = _estimate(cli, "passkey_hybrid_swa", "--S", "8", "--B", "2")
    assert doc["step_bytes_by_part"]["state_read"] == 8 * 512 + mamba
    assert doc["fold_bytes"] - doc["step_bytes"] == 4 * 512 + mamba
    full = _estimate(cli, "passkey_hybrid_swa", "--S", "4096", "--B", "2")
    assert full["step_bytes_by_part"]["state_read"] == 32 * 512 + mamba  # past W: all of it


def test_a_break_even_just_below_a_whole_k_is_not_rounded_onto_it(cli):
    """tiny_attn at S = 16M: the floor crossover is 2.99998..., so K = 3 is already slower;
    two decimals would print it as 3.00 beside 'K <= 2'."""
    doc = _estimate(cli, "tiny_attn", "--S", "16m")
    assert 2.99998 < doc["comparison"]["floor_crossover_steps"] < 3
    r = cli("estimate", "tiny_attn", "--S", "16m")
    assert r.code == 0, r.err
    assert ("its floor is faster than ar's for K <= 2 (break-even at K = 2.999988)"
            in _said(r.out))


def test_the_marketed_80_gb_still_holds_attn_3b_at_256k(cli):
    """docs/costmodel.md: 80e9 bytes hold attn_3b at S 262,144, B 1 (79.9 GB) and run out at
    S 262,458; the H100's 85.52 GB at 281,713."""
    at80 = _estimate(cli, "attn_3b", "--S", "262144", "--memory", "80")
    assert at80["fits"] and at80["total_bytes"] == 79_910_220_800
    assert at80["oom_context"] == 262_458
    assert _estimate(cli, "attn_3b", "--S", "262144")["oom_context"] == 281_713


def test_a_gpu_run_measured_in_process_resumes_under_workers_without_repeats():
    """A run measured in the fsc process records its GPU as `cuda`; resumed with --workers or
    on Ray, the sweep runs on `cuda:0` (what a worker sees). The points it holds are found,
    not measured again."""
    recipe = load_recipe("tiny_attn")
    cfg = SweepConfig(recipes=["tiny_attn"], S=[16, 32], B=[1], device="cuda:0")
    points, _ = plan(cfg, {"tiny_attn": recipe})
    first = points[0]
    stored = PointResult("tiny_attn", recipe.recipe_hash, recipe.layer_plan, first.S, first.B,
                         first.G, first.K, first.dtype, "auto", "cuda")
    assert stored.key() == first.key(cfg)
    keys = {(*first.key(cfg)[:-1], "cuda"): 1}  # as Store.point_keys gives it
    assert unmeasured(points, keys, cfg) == points[1:]


def test_an_empty_list_entry_or_partition_is_named_in_one_line(cli):
    """`--S 1k,` said "'' is not an integer"; `--slurm-partition ''` was taken and dropped
    (the array went to the cluster's default partition without a word)."""
    for args, says in ((("--S", "1k,"), "--S: '1k,' has an empty entry; give sizes such as "
                                        "1024,4096 or 4k"),
                       (("--B", "1,,2"), "--B: '1,,2' has an empty entry"),
                       (("--executor", "slurm", "--slurm-partition", " "),
                        "--slurm-partition is empty; name a partition, or leave the option out "
                        "for the cluster's default")):
        r = cli("profile", "-r", "tiny_attn", *args, "--dry-run")
        assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
        assert says in _said(r.err)
