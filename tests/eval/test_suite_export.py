"""`fsc eval --task ruler --export DIR`: the prompts fsc eval scores, written as
lm-evaluation-harness tasks; the harness's fsc model answers them as fsc eval does."""

import importlib.util
import json

import pytest
import torch
import yaml

from fsc.data.ruler import VariableTracking
from fsc.eval import ruler
from fsc.eval.retrieval import decode_answers
from fsc.seeds import derive
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


def _export(fsc_main, folder, *args):
    return fsc_main("eval", "tiny_hybrid", *args, "--samples", "3", "--export", folder,
                    check=0)


def _utils(folder):
    spec = importlib.util.spec_from_file_location("exported_utils", folder / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_exported_prompts_are_the_ones_fsc_eval_scores(fsc_main, tmp_path):
    res = _export(fsc_main, tmp_path / "x", "--task", "vt", "--hops", "2", "--lengths", "128")
    assert "--tasks fsc_vt --include-path" in res.stderr
    docs = [json.loads(line) for line in (tmp_path / "x" / "fsc_vt_128.jsonl").open()]
    task = VariableTracking(TOK, 128, 4, hops=2)
    for i, doc in enumerate(docs):
        s = task.sample(derive(0, 128, i, ruler.STREAMS["vt"]))
        first = s.target.index(True)
        assert TOK.encode(doc["input"]) == s.ids[:first] and doc["outputs"] == list(s.answers)
    config = (tmp_path / "x" / "fsc_vt_128.yaml").read_text()
    assert "max_gen_toks: 12" in config and "process_results: !function utils.score" in config
    group = yaml.safe_load((tmp_path / "x" / "fsc_vt.yaml").read_text())
    assert group["group"] == "fsc_vt" and group["task"] == ["fsc_vt_128"]
    score = _utils(tmp_path / "x").score
    assert score(docs[0], [" ".join(docs[0]["outputs"][:1]) + " ???"]) == {"score": 1 / 3}


def test_ruler_exports_a_task_a_variant_and_length_and_refuses_other_tasks(fsc_main, tmp_path):
    _export(fsc_main, tmp_path / "r", "--task", "ruler", "--lengths", "224", "--depths", "0.5",
            "--needles", "2")
    group = yaml.safe_load((tmp_path / "r" / "fsc_ruler.yaml").read_text())
    assert group["task"] == [f"fsc_{t}_224" for t in (
        "niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe")]
    passkey = json.loads((tmp_path / "r" / "fsc_niah_single_224.jsonl").open().readline())
    assert passkey["input"].endswith("The pass key is ") and passkey["outputs"][0].isdigit()
    bad = fsc_main("eval", "tiny_hybrid", "--task", "mqar", "--export", tmp_path / "m")
    assert bad.returncode == 2 and "--export: for --task niah, vt, cwe, fwe or ruler" in bad.stderr


def test_the_harness_model_answers_the_exported_prompts_as_fsc_eval_does(fsc_main, tmp_path):
    """The harness's fsc model, asked each exported document, generates the answer fsc eval
    decodes from the same prompt (free decoding, greedy, K = G), so both score the same."""
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from fsc.harness.lm import FscLM

    _export(fsc_main, tmp_path / "x", "--task", "cwe", "--lengths", "160")
    docs = [json.loads(line) for line in (tmp_path / "x" / "fsc_cwe_160.jsonl").open()]
    config = yaml.safe_load((tmp_path / "x" / "fsc_cwe_160.yaml").read_text()
                            .replace("!function ", ""))
    lm = FscLM("tiny_hybrid", batch_size=3)
    with torch.no_grad():  # confident, varied answers
        for p in lm.model.parameters():
            if p.ndim == 2:
                p.mul_(8.0)
    asked = [Instance("generate_until", d, (d["input"], config["generation_kwargs"]), i)
             for i, d in enumerate(docs)]
    answers = lm.generate_until(asked)
    ids = torch.tensor([TOK.encode(d["input"]) + [0] * 12 for d in docs])
    target = torch.zeros(160, dtype=torch.bool)
    target[-12:] = True
    ours = decode_answers(lm.model, TOK, ids, target, "diffusion", 4)
    assert answers == [TOK.decode(row[-12:].tolist()) for row in ours]
    assert len(set(answers)) > 1


@pytest.mark.slow
def test_the_harness_scores_an_export_as_fsc_eval_does(fsc_main, tmp_path):
    """lm-eval loads the exported tasks and group, and its score of each equals fsc eval's on
    the same checkpoint (seeded random weights: what matters is the same number)."""
    pytest.importorskip("lm_eval")
    store = tmp_path / "st"
    _export(fsc_main, tmp_path / "x", "--task", "ruler", "--lengths", "224", "--depths", "0.5",
            "--needles", "2", "--hops", "2")
    res = fsc_main("eval", "tiny_hybrid", "--task", "harness", "--tasks", "fsc_ruler",
                   "--include-path", tmp_path / "x", "--store", store, "--json", check=0)
    theirs = {r["harness_task"]: r["value"] for r in json.loads(res.stdout)["rows"]}
    res = fsc_main("eval", "tiny_hybrid", "--task", "ruler", "--lengths", "224", "--depths",
                   "0.5", "--needles", "2", "--hops", "2", "--samples", "3", "--store", store,
                   "--json", check=0)
    for r in json.loads(res.stdout)["rows"]:
        name = f"fsc_{r['task']}" + (f"_{r['variant']}" if r["task"] == "niah" else "") + "_224"
        assert theirs[name] == pytest.approx(r["score"]), name
    assert theirs["fsc_ruler"] == pytest.approx(sum(v for k, v in theirs.items()
                                                    if k != "fsc_ruler") / 7)


def test_an_export_replaces_the_earlier_one_in_its_folder_and_nothing_else(fsc_main, tmp_path):
    """A second export into a folder rewrote its own files and left the first one's other
    lengths there, which --include-path still registered (and the group no longer named)."""
    folder = tmp_path / "x"
    _export(fsc_main, folder, "--task", "vt", "--hops", "2", "--lengths", "128,256")
    (folder / "__pycache__").mkdir()  # the harness's cache of utils.py
    res = _export(fsc_main, folder, "--task", "vt", "--hops", "2", "--lengths", "128", "--json")
    assert json.loads(res.stdout)["replaced"] == 6
    assert sorted(p.name for p in folder.iterdir()) == [
        "fsc_vt.yaml", "fsc_vt_128.jsonl", "fsc_vt_128.yaml", "utils.py"]
    res = _export(fsc_main, folder, "--task", "vt", "--hops", "2", "--lengths", "128")
    assert "in place of the earlier export's 4 files" in " ".join(res.stderr.split())
    (folder / "notes.txt").write_text("mine")
    before = sorted(p.name for p in folder.iterdir())
    res = fsc_main("eval", "tiny_hybrid", "--task", "vt", "--lengths", "256", "--samples", "3",
                   "--export", folder)
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1, res.stderr
    assert "holds notes.txt, which an export does not write" in res.stderr
    assert sorted(p.name for p in folder.iterdir()) == before
