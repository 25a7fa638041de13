"""Local lm-evaluation-harness tasks (task YAML over JSON lines, no network): a multiple-choice
task, a rolling-loglikelihood task and a generation task, written into a folder for
`--include-path`."""

from __future__ import annotations

import json
from pathlib import Path

CHOICE = [
    {"question": "The king sat upon his", "choices": [" throne", " horse", " pie"], "gold": 0},
    {"question": "Good night, sweet", "choices": [" prince", " cheese", " lamp"], "gold": 0},
    {"question": "To be, or not to", "choices": [" go", " be", " see"], "gold": 1},
    {"question": "What light through yonder", "choices": [" door", " hill", " window"],
     "gold": 2},
    {"question": "All the world's a", "choices": [" stage", " field", " song"], "gold": 0},
]
TEXT = [
    {"text": "Now is the winter of our discontent made glorious summer."},
    {"text": "Friends, Romans, countrymen, lend me your ears."},
    {"text": "If music be the food of love, play on."},
]
GEN = [{"question": "Say A:", "answer": "A"}, {"question": "Say B:", "answer": "B"}]

YAML = {
    "fsc_choice": """task: fsc_choice
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{gold}}}}"
target_delimiter: ""
metric_list:
  - metric: acc
  - metric: acc_norm
""",
    "fsc_text": """task: fsc_text
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
""",
    "fsc_gen": """task: fsc_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 6
metric_list:
  - metric: exact_match
""",
}
DOCS = {"fsc_choice": CHOICE, "fsc_text": TEXT, "fsc_gen": GEN}


def write_tasks(folder: Path, missing: bool = False) -> Path:
    """The three tasks in `folder`; with `missing`, a fourth (fsc_missing) whose dataset is a
    Hub id, which cannot be had offline."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, docs in DOCS.items():
        data = folder / f"{name}.jsonl"
        data.write_text("".join(json.dumps(d) + "\n" for d in docs))
        (folder / f"{name}.yaml").write_text(YAML[name].format(data=data))
    if missing:
        (folder / "fsc_missing.yaml").write_text(
            YAML["fsc_choice"].replace("task: fsc_choice", "task: fsc_missing")
            .replace("dataset_path: json", "dataset_path: fsc-nobody/no-such-dataset")
            .replace("dataset_kwargs:\n  data_files:\n    test: {data}\n", ""))
    return folder


def with_text_tokenizer(ckpt: Path, generation: dict | None = None) -> Path:
    """`ckpt` (an fsc checkpoint of a vocabulary of at least 128) given a tokenizer.json of
    printable ASCII characters and `</s>` at 127, as a published model carries one, and, where
    given, the `generation` settings as its generation_config.json."""
    from tokenizers import Tokenizer, models

    from fsc.checkpoint.layout import read_checksums, write_checksums

    chars = {chr(i): i for i in range(32, 127)} | {"</s>": 127}
    Tokenizer(models.BPE(vocab=chars, merges=[])).save(str(ckpt / "tokenizer.json"))
    added = ["tokenizer.json"]
    if generation is not None:
        (ckpt / "generation_config.json").write_text(json.dumps(generation))
        added.append("generation_config.json")
    write_checksums(ckpt, [*read_checksums(ckpt), *added])  # listed, as a save lists them
    return ckpt
