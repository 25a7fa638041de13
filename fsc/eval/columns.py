"""The eval tasks' own eval_cells columns (fsc.store.schema.Column), beside EvalCell's shared
ones: each task's line in TASKS (fsc.eval.tasks) names its own, and a store gains them when the
task first writes. Light (no torch), so that `fsc schema` describes them at once.
"""

from __future__ import annotations

from fsc.store.schema import Column

SUITE = (  # the RULER-style suite's (fsc.eval.ruler) own eval_cells columns: each task's knobs and RULER's score
    Column("variant", "VARCHAR",
           "niah: single (one key asked), multikey (several keys, one asked), multivalue (one "
           "key's values, all asked) or multiquery (several keys, all asked)."),
    Column("needles", "INTEGER",
           "niah: keys (single, multikey, multiquery) or values (multivalue) the variant places "
           "(loss on niah data: as its sequences were drawn)."),
    Column("distractors", "INTEGER", "niah (and loss on niah data): more needles, of keys "
           "never asked."),
    Column("hops", "INTEGER", "vt (and loss on vt data): links of each chain after its value "
           "(VAR B = VAR A)."),
    Column("chains", "INTEGER", "vt (and loss on vt data): chains per prompt, one asked."),
    Column("words", "INTEGER", "cwe, fwe (and loss on their data): words the answer names."),
    Column("haystack", "VARCHAR",
           "niah, vt (and loss on their data): what the needles sit in: filler, or a shipped "
           "corpus's validation text."),
    Column("template", "VARCHAR",
           "niah, vt, cwe, fwe (and loss on their data): the prompts' wording: fsc (a short question, then 'Answer:') "
           "or ruler (RULER's template: its instruction, question and answer prefix, needle "
           "sentence, cwe's numbered list, fwe's noise word at rank 1)."),
    Column("score", "DOUBLE",
           "niah, vt, cwe, fwe: RULER's score, the fraction of the expected strings found in a "
           "decoded answer, averaged over the n samples (correct: the samples that found them "
           "all)."),
)
ANSWERS = Column(
    "answers", "VARCHAR",
    "niah, mqar, copy, vt, cwe, fwe: JSON text, what each sample expected and what was decoded, a "
    "list of {expected, decoded, score} (one a sample, in order): expected, the answer strings "
    "(niah: the key; mqar: one a query; copy: the letters); decoded, the answer's text (mqar: a list, one a "
    "query); score, the sample's exact match (mqar: the fraction of its queries) or RULER's "
    "score. Read it with json functions, e.g. `answers->0->>'decoded'`.")
SUITE = (*SUITE, ANSWERS)
# the plain passkey's suite knobs (NULL in a store written before the suite): niah cells with
# other values are the RULER-style variants, which score other prompts
PASSKEY = {"variant": "single", "distractors": 0, "haystack": "filler", "template": "fsc"}
OWN = {"niah": ("variant", "needles", "distractors", "haystack", "template", "score", "answers"),
       "vt": ("hops", "chains", "haystack", "template", "score", "answers"),
       "cwe": ("words", "template", "score", "answers"),
       "fwe": ("words", "template", "score", "answers"),
       "ruler": tuple(c.name for c in SUITE)}
MQAR = COPY = (ANSWERS,)


def plain_passkey(row) -> bool:
    """A niah cell of the plain passkey (PASSKEY: one key, no distractors, the filler
    haystack, fsc's wording; a knob NULL in a store written before it counts as PASSKEY's),
    not of the RULER-style variants, which score other prompts."""
    return row.get("task") == "niah" and all(
        (v if row.get(k) is None else row.get(k)) == v for k, v in PASSKEY.items())


def suite(task: str) -> tuple[Column, ...]:
    """The columns of SUITE that `task`'s cells fill (ruler: every part's)."""
    return tuple(c for c in SUITE if c.name in OWN[task])


# how a genppl cell draws besides its temperature: (column, as tables and figures name it, the
# value that cuts nothing)
CUTS = (("top_k", "top-k", 0), ("top_p", "top-p", 1.0), ("min_p", "min-p", 0.0),
        ("repetition_penalty", "penalty", 1.0))
# a sampling setting a decoded genppl cell stored before it was recorded (NULL) drew as this
# value draws: no cut, no penalty (top_p was recorded from the first)
UNRECORDED = {k: none for k, _, none in CUTS if k != "top_p"}


def cut_words(cell) -> list[str]:
    """The cuts and the penalty a genppl cell (a row, or anything with `get`) drew with where
    they apply, as tables name them: ['top-k 20', 'top-p 0.9', 'penalty 1.05']."""
    return [f"{said} {cell.get(k):g}" for k, said, none in CUTS
            if cell.get(k) not in (None, none)]


def as_drawn(cell: dict) -> dict:
    """A genppl row with each sampling setting it holds no record of (`UNRECORDED`) at the
    value it drew with (a reference row decodes nothing: as it is)."""
    if cell.get("mode") == "reference":
        return cell
    return cell | {k: v for k, v in UNRECORDED.items() if cell.get(k) is None}


DATA = Column("data", "VARCHAR",
              "loss, genppl: the data scored: a shipped corpus and its split (shakespeare:val), "
              "a file's path, an hf: dataset, or (loss) a task or mix of tasks.")

GENPPL = (  # genppl's (fsc.eval.genppl): how each cell decoded, what scored it, the measures
    DATA,
    Column("policy", "VARCHAR",
           "genppl: which masked positions a step reveals: confidence, random, margin or "
           "entropy."),
    Column("threshold", "DOUBLE",
           "genppl: threshold τ of adaptive parallel decoding (NULL: the even schedule)."),
    Column("temperature", "DOUBLE", "genppl: sampling temperature (0: greedy)."),
    Column("top_p", "DOUBLE", "genppl: nucleus sampling mass."),
    Column("top_k", "BIGINT",
           "genppl: sampled from the k most likely tokens only, before top_p (0: all; NULL in "
           "a cell stored before it was recorded: all)."),
    Column("min_p", "DOUBLE",
           "genppl: then only tokens at least min_p times as likely as the most likely one (0: "
           "all; NULL: all, stored before it was recorded)."),
    Column("repetition_penalty", "DOUBLE",
           "genppl: ids of the prompt and earlier blocks made less likely, transformers' rule "
           "(1: none; NULL: none, stored before it was recorded)."),
    Column("prompt_length", "BIGINT",
           "genppl: tokens of the --data text before each sample (0: BOS)."),
    Column("scorer", "VARCHAR", "genppl: the autoregressive model that scored the samples."),
    Column("scorer_window", "BIGINT",
           "genppl: positions the scorer reads at a time: a longer prompt and sample are read "
           "in windows of that many, sliding by half of one (NULL: in one pass, or a cell "
           "stored before it was recorded)."),
    Column("gen_ppl", "DOUBLE",
           "genppl: exp(summed scorer NLL / summed scorer tokens) over the cell's samples."),
    Column("gen_ppl_lo", "DOUBLE",
           "genppl: lower end of the 95 % bootstrap interval of gen_ppl (over samples)."),
    Column("gen_ppl_hi", "DOUBLE", "genppl: upper end of that interval."),
    Column("scored_tokens", "BIGINT", "genppl: scorer tokens the perplexity is over."),
    Column("entropy", "DOUBLE",
           "genppl: mean unigram entropy per sample, nats (generator tokens)."),
    Column("entropy_se", "DOUBLE", "genppl: standard error of entropy over samples."),
    Column("repeat_ngram", "DOUBLE",
           "genppl: mean fraction of a sample's n-grams seen earlier in it."),
    Column("passes_per_token", "DOUBLE",
           "genppl: forward passes per generated token (steps and folds; the prompt excluded)."),
    Column("steps_per_block", "DOUBLE",
           "genppl: denoising steps per block actually used (threshold decoding adapts them)."),
    Column("ended_early", "INTEGER",
           "genppl: samples that ended at EOS before the length (scored on what they hold)."),
    Column("uncarried", "INTEGER",
           "genppl: samples holding text the scorer's tokenizer does not give back (a character "
           "it lacks, dropped: scored on the rest)."),
    Column("mauve", "DOUBLE",
           "genppl: MAUVE of the samples against the reference text, the data's own "
           "continuations (fsc[quality])."),
)

LOSS = (  # the loss task's (fsc.eval.loss; the held-out loss is every cell's `loss`)
    Column("loss_se", "DOUBLE",
           "loss: standard error of the held-out loss over its n sequences, nats."),
    Column("distinct_sequences", "BIGINT",
           "loss on a text file: distinct sequences of this length the file holds; fewer than n "
           "means sequences were scored again."),
    Column("bits_per_byte", "DOUBLE",
           "loss on text: the summed NLL (or bound) in bits over the UTF-8 bytes of the scored "
           "text."),
)

# and the suite's knobs, those of --data's tasks (loss on vt data: hops, chains, ...)
LOSS_KNOBS = tuple(c for c in SUITE if c.name in ("needles", "distractors", "hops", "chains",
                                                  "words", "haystack", "template"))
ALL = (*SUITE, *GENPPL, *LOSS)  # what `fsc schema` describes beside the schema's own
