"""docs/benchmarks.md's derived figures agree with the figures they are derived from.

A table's mean over seeds is the mean of the seeds' rows, its range their lowest and highest; a
RULER average is the mean of its parts; a speed-up, a tokens/s or a fraction of the roofline is
the quotient of the two columns it divides. Each check reads the table by its header line and
allows the rounding of the figures it reads."""

import re
from pathlib import Path
from statistics import mean

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
RATIOS = ["1×", "2×", "4×", "8×", "16×"]


def table(header: str) -> list[list[str]]:
    """The body rows (cells stripped) of the one table whose header line starts with `header`."""
    lines = DOC.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(header)]
    assert len(starts) == 1, f"{len(starts)} tables start {header!r}"
    rows = []
    for line in lines[starts[0] + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def number(cell: str) -> float:
    """The first number of a cell: '0.97 [0.95, 0.99]' -> 0.97, '1,208.6' -> 1208.6, '5 %' -> 5."""
    return float(re.search(r"-?[\d,]*\.?\d+", cell.replace("*", "")).group().replace(",", ""))


def agrees(value: float, cell: str, rel: float = 0.005) -> bool:
    """`value` rounds to the figure printed in `cell`, give or take `rel` of it (the rounding of
    the figures it was computed from)."""
    printed = re.search(r"-?[\d,]*\.?\d+", cell.replace("*", "")).group()
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(value - number(cell)) <= 0.5 * 10**-decimals + rel * abs(value)


def spread(cell: str) -> tuple[float, float]:
    low, high = re.search(r"\[([\d.]+), ([\d.]+)\]", cell).groups()
    return float(low), float(high)


def test_retrieval_means_over_seeds_are_the_seeds_rows():
    by_run = {row[0]: [number(c) for c in row[1:]] for row in
              table("| training | 1× | 2× | 4× | 8× | 16× |")}
    for row in table("| recipe | seeds | 1× | 2× | 4× | 8× | 16× |"):
        recipe, seeds = row[0], int(row[1])
        runs = [by_run[recipe]] + [by_run[f"{recipe}-s{s}"] for s in range(1, seeds)]
        for i, cell in enumerate(row[2:]):
            values = [run[i] for run in runs]
            assert abs(number(cell) - mean(values)) <= 0.0051, (recipe, RATIOS[i], cell, values)
            assert spread(cell) == (min(values), max(values)), (recipe, RATIOS[i], cell, values)


def test_reach_seed0_averages_are_the_mean_of_the_seven_parts():
    rows = table("| seed 0: task |")
    parts, average = rows[:-1], rows[-1]
    assert len(parts) == 7 and "average" in average[0]
    for col in range(1, len(average)):
        values = [number(r[col]) for r in parts]
        assert abs(number(average[col]) - mean(values)) <= 0.0051, (col, average[col], values)


def test_reach_seed_columns_give_the_mean_and_range_over_seeds():
    seed0 = table("| seed 0: task |")[-1]
    for row in table("| average of the 7 parts | seed 0 |"):
        recipe = row[0].strip("*")
        seeds = [tuple(float(x) for x in cell.split(" → ")) for cell in row[1:4]]
        for at, i in ((0, 0), (1, 4)):  # the seed columns give 1× and 16×
            values = [s[at] for s in seeds]
            cell = row[4 + i]
            assert abs(number(cell) - mean(values)) <= 0.0051, (recipe, RATIOS[i], cell, values)
            assert spread(cell) == (min(values), max(values)), (recipe, RATIOS[i], cell, values)
        col = 1 + 5 * ["passkey_attn", "passkey_mamba", "passkey_hybrid_halflife8"].index(recipe)
        assert seeds[0] == (number(seed0[col]), number(seed0[col + 4])), recipe


def test_cached_decoding_speed_ups_divide_their_columns():
    for row in table("| generated tokens | cached tok/s"):
        assert agrees(number(row[1]) / number(row[2]), row[3]), row


def test_published_models_tokens_per_s_is_batch_over_floor():
    for row in table("| recipe | B | params | weights"):
        B, floor_ms, tokens_per_s = number(row[1]), number(row[8]), number(row[9])
        # the floor is printed to three figures, tokens/s from the unrounded floor
        assert agrees(B / (floor_ms / 1e3), row[9], rel=0.01), (row, tokens_per_s)


def test_gpu_kernel_columns_divide_as_they_say():
    for row in table("| kernel | mode | B | S |"):
        triton_us, torch_us, gbps = number(row[5]), number(row[6]), number(row[9])
        assert agrees(torch_us / triton_us, row[11]), row
        assert agrees(gbps / 4800 * 100, row[10]), row  # the H200's 4.8 TB/s


def test_graph_speed_ups_and_roofline_fractions_divide_their_columns():
    for row in table("| recipe | S | B | step, graphs"):
        graphs, eager, floor = number(row[3]), number(row[4]), number(row[6])
        assert agrees(eager / graphs, row[5]), row
        assert agrees(floor / graphs * 100, row[7]), row
        assert agrees(floor / eager * 100, row[8]), row


def prose(path: Path = DOC) -> str:
    """The file's text with its line breaks and runs of spaces as single spaces."""
    return " ".join(path.read_text().split())


def test_the_adaptations_range_at_300_steps_is_the_tables():
    at_300 = [number(row[4]) for row in table("| option | seed | TAG |") if row[4]]
    low, high = re.search(r"At 300 steps every adapted run is ([\d.]+) to ([\d.]+)",
                          prose()).groups()
    assert (low, high) == (f"{min(at_300):.2f}", f"{max(at_300):.2f}")


def test_readme_retrieval_figures_are_section_9s_seed_0():
    by_run = {row[0]: row[1:] for row in table("| training | 1× | 2× | 4× | 8× | 16× |")}
    readme = prose(DOC.parents[1] / "README.md")
    said = re.search(r"hybrid retrieves the key at ([\d.]+) to 2× that length, ([\d.]+) at 4× and "
                     r"([\d.]+) at 16×, Mamba-2 alone at ([\d.]+) at 1×, ([\d.]+) at 2× and "
                     r"([\d.]+) at 4×, while attention loses it at 2× \(([\d.]+) at 1×, "
                     r"([\d.]+) at 2×, ([\d.]+) at 4×\)", readme).groups()
    hybrid, mamba, attn = by_run["passkey_hybrid"], by_run["passkey_mamba"], by_run["passkey_attn"]
    assert number(hybrid[0]) == number(hybrid[1])  # "at 0.99 to 2×"
    table_says = [hybrid[0], hybrid[2], hybrid[4], *mamba[:3], *attn[:3]]
    assert list(said) == [f"{number(c):.2f}" for c in table_says]


def test_readme_gen_ppl_figures_are_section_14s():
    rows = {(r[0], r[1]): r[2:] for r in table("| policy | K | quality_attn |") if r[1]}
    readme = prose(DOC.parents[1] / "README.md")
    fold_low, fold_high, *said = re.search(
        r"Gen-PPL falls (\d+)- to (\d+)-fold from K = 1 to K = 8 \(confidence order: "
        r"([\d.]+) → ([\d.]+) for attention, ([\d.]+) → ([\d.]+) for Mamba-2, ([\d.]+) → "
        r"([\d.]+) for the hybrid", readme).groups()
    first, last = rows[("confidence", "1")], rows[("confidence", "8")]
    for i in range(3):
        assert agrees(number(first[i]), said[2 * i]) and agrees(number(last[i]), said[2 * i + 1])
    folds = [number(a) / number(b) for a, b in zip(first, last)]
    assert (int(fold_low), int(fold_high)) == (round(min(folds)), round(max(folds)))
