"""`fsc eval CKPT --task ruler --export DIR` (or niah, vt, cwe, fwe): the prompts `fsc eval`
would score, written as lm-evaluation-harness tasks instead of scored. Per task (niah per
variant) and length: a JSON-lines file of documents (`input`: the prompt's text; `outputs`: the
expected strings; `length`, `depth`) and a task YAML (generate_until, greedy, at most the
answer's tokens, scored by RULER's metric in `utils.py`: the fraction of `outputs` found in the
answer); and a group YAML over them all (`fsc_ruler`, `fsc_vt`, ...). Any harness model is then
scored on the same prompts: an fsc checkpoint with `fsc eval CKPT --task harness --tasks
fsc_ruler --include-path DIR`, a transformers model through the harness's `hf` model. Pure
Python: no torch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fsc.errors import UsageError
from fsc.eval.grid import EvalGrid
from fsc.eval.ruler import cells, parts

EXPORTED = ("niah", "vt", "cwe", "fwe", "ruler")
UTILS = '''"""RULER's score of a generated answer: the fraction of the expected strings it holds
(case ignored), as fsc.data.ruler.found computes it (written by fsc eval --export)."""


def score(doc, results):
    answer = results[0].lower()
    return {"score": sum(o.lower() in answer for o in doc["outputs"]) / len(doc["outputs"])}
'''
TASK = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{input}}}}"
doc_to_target: "{{{{outputs}}}}"
process_results: !function utils.score
generation_kwargs:
  until: []
  max_gen_toks: {tokens}
  do_sample: false
metric_list:
  - metric: score
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def write_tasks(grid: EvalGrid, tokenizer, folder: Path) -> tuple[list[str], int, int]:
    """Write the harness tasks of `grid`'s prompts into `folder` (see the module docstring),
    in place of an earlier export there; the names of the tasks, the group's last, the most
    tokens a document's prompt and answer hold together, and how many files of the earlier
    export were removed. UsageError for a task that is not the suite's, or a folder holding
    anything an export does not write."""
    if grid.task not in EXPORTED:
        raise UsageError(f"--export: for --task {', '.join(EXPORTED[:-1])} or {EXPORTED[-1]} "
                         f"(this is {grid.task})")
    earlier = earlier_export(folder)
    replaced = sum(p.is_file() for p in earlier)
    for path in earlier:  # a task of other lengths or depths left behind would still register
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    utils = folder / "utils.py"
    folder.mkdir(parents=True, exist_ok=True)
    names, longest = [], 0
    for part in parts(grid):
        for length in grid.lengths:
            docs, tokens = [], 0
            for cell, samples in cells(part, tokenizer, length):
                for s in samples:
                    first = s.target.index(True)
                    expected = s.answers or (tokenizer.decode(
                        [t for t, scored in zip(s.ids, s.score, strict=True) if scored]),)
                    docs.append({"input": tokenizer.decode(s.ids[:first]),
                                 "outputs": list(expected), "length": length,
                                 "depth": cell["depth"]})
                    tokens = len(s.ids) - first
                    longest = max(longest, len(s.ids))
            variant = f"_{cell['variant']}" if part.task == "niah" else ""
            name = f"fsc_{part.task}{variant}_{length}"
            data = (folder / f"{name}.jsonl").resolve()
            data.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
            (folder / f"{name}.yaml").write_text(TASK.format(name=name, data=json.dumps(str(data)),
                                                            tokens=tokens))
            names.append(name)
    group = f"fsc_{grid.task}"
    (folder / f"{group}.yaml").write_text(
        f"group: {group}\ntask:\n" + "".join(f"  - {n}\n" for n in names)
        + "aggregate_metric_list:\n  - metric: score\n    aggregation: mean\n"
        "    weight_by_size: false\nmetadata:\n  version: 1.0\n")
    utils.write_text(UTILS, encoding="utf-8")
    return [*names, group], longest, replaced


def earlier_export(folder: Path) -> list[Path]:
    """The files an earlier export wrote in `folder` (its tasks, group and metric, and the
    harness's cache of that metric); UsageError when it holds anything else: a folder holds
    one export, which the next replaces whole."""
    if not folder.is_dir():
        return []
    ours, others = [], []
    for path in sorted(folder.iterdir()):
        if path.name == "utils.py" and path.is_file() and path.read_text(
                encoding="utf-8", errors="replace") != UTILS:
            raise UsageError(f"--export {folder}: holds a utils.py of its own, which the tasks' "
                             "metric would replace; export into another folder")
        exported = (path.is_file() and (path.name == "utils.py" or (
            path.name.startswith("fsc_") and path.suffix in (".jsonl", ".yaml")))) or (
            path.name == "__pycache__" and path.is_dir())
        (ours if exported else others).append(path)
    if others:
        more = f" and {len(others) - 1} more" if len(others) > 1 else ""
        raise UsageError(f"--export {folder}: holds {others[0].name}{more}, which an export "
                         "does not write (a folder holds one export, which the next replaces "
                         "whole); export into an empty or new folder")
    return ours
