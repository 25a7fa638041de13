"""`fsc eval`'s options walked through a third time, across its tasks: a checkpoint read in a
mode it never learned is warned of by every task (not genppl alone), and an option a task or
its data does not read is refused in one line naming it (--text-field on data without fields,
sampling cuts at temperature 0, an --ngram no sample holds twice, --export's unread options)."""

import pytest

from fsc.checkpoint.io import save_checkpoint
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.store import Store

AR_SAID = "is autoregressive (G 1), never trained to denoise"
DENOISER_SAID = "was trained by block diffusion at G 4, never to predict the next token"
LOSS = ["--task", "loss", "--samples", "2", "--lengths", "8"]
NIAH = ["--task", "niah", "--samples", "1", "--lengths", "128", "--depths", "0.5"]
GENPPL = ["--task", "genppl", "--data", "shakespeare", "--samples", "2", "--lengths", "8",
          "--prompt-length", "4"]


def _said(res) -> str:
    return " ".join(res.stderr.split())


def _trained(tmp_path, recipe, name: str, objective: str):
    """A checkpoint of `recipe`'s weights with the training record `fsc train` writes."""
    save_checkpoint(build_model(load_recipe(recipe), seed=0), tmp_path / name, training={
        "objective": objective, "steps": 1, "data": "shakespeare", "seq_len": 16,
        "final_loss": 5.0})
    return tmp_path / name


def _refused(res, says: str, st=None) -> None:
    """Exit 2, one `error:` line saying `says`, no traceback, nothing stored."""
    assert res.returncode == 2, res.stderr
    assert [line for line in res.stderr.splitlines() if line.startswith("error: ")] == [
        res.stderr.strip().splitlines()[-1]]
    assert says in _said(res), res.stderr
    assert "Traceback" not in res.stderr and "warning:" not in res.stderr
    if st is not None and st.exists():
        assert Store(st).query("select count(*) from evaluation")[1] == [(0,)]


def test_an_ar_checkpoint_read_by_diffusion_is_warned_of_by_loss_and_retrieval(
        fsc_main, tmp_path, ar_recipe):
    """`--task loss --mode diffusion` of a checkpoint trained autoregressively printed the
    bound of a denoiser it never was without a word (genppl alone warned); niah decoded its
    answers by block diffusion without one too."""
    ar = _trained(tmp_path, ar_recipe, "ar", "ar")
    st = tmp_path / "st"
    for task in (LOSS, NIAH):
        res = fsc_main("eval", ar, *task, "--mode", "diffusion", "--store", st, check=0)
        assert f"warning: {ar} {AR_SAID}" in _said(res)
        assert "--mode diffusion" in _said(res)
    res = fsc_main("eval", ar, *LOSS, "--store", st, check=0)  # read as trained: no word
    assert "warning" not in res.stderr
    # a request refused is its error line alone, not the warning first
    res = fsc_main("eval", ar, *NIAH, "--mode", "diffusion", "--steps", "2")
    _refused(res, "--steps 2 must be between 1 and G = 1")


def test_a_denoiser_read_autoregressively_is_warned_of(fsc_main, tmp_path, ar_recipe):
    """The reverse: a block-diffusion checkpoint's loss (or genppl's cells) read at G 1 with
    --mode ar; a seeded checkpoint learned nothing, so it is not warned of."""
    dn = _trained(tmp_path, "tiny_attn", "dn", "frontier")
    st = tmp_path / "st"
    res = fsc_main("eval", dn, *LOSS, "--mode", "ar", "--store", st, check=0)
    assert f"warning: {dn} {DENOISER_SAID}: --mode ar scores its next-token NLL" in _said(res)
    res = fsc_main("eval", dn, *GENPPL, "--scorer", ar_recipe, "--mode", "ar", "--store", st,
                   check=0)
    assert f"warning: {dn} {DENOISER_SAID}" in _said(res)
    save_checkpoint(build_model(load_recipe("tiny_attn"), seed=1), tmp_path / "seeded", seed=1)
    res = fsc_main("eval", tmp_path / "seeded", *LOSS, "--data", "shakespeare", "--mode", "ar",
                   "--store", st, check=0)
    assert "warning" not in res.stderr


@pytest.mark.parametrize("args, says", [
    (["tiny_attn", *NIAH], "--text-field: for --task loss or genppl only"),
    (["tiny_attn", *LOSS, "--data", "shakespeare"],
     "--text-field: for --data FILE.jsonl, FILE.parquet or hf:NAME"),
    (["tiny_attn", "--task", "loss", "--samples", "2", "--lengths", "128", "--data", "passkey"],
     "--text-field: for --data FILE.jsonl, FILE.parquet or hf:NAME"),
])
def test_text_field_on_data_without_fields_is_refused(fsc_main, tmp_path, args, says):
    """--text-field was taken, and meant nothing, with a corpus, a task or no data at all."""
    st = tmp_path / "st"
    _refused(fsc_main("eval", *args, "--text-field", "body", "--store", st), says, st)


def test_text_field_on_training_text_without_fields_is_refused(fsc_main, tmp_path, ar_recipe):
    """Without --data the text is training's: a corpus has no fields to name; a JSON lines
    file's field is read as given."""
    ar = _trained(tmp_path, ar_recipe, "ar", "ar")
    st = tmp_path / "st"
    _refused(fsc_main("eval", ar, *LOSS, "--text-field", "body", "--store", st),
             f"--text-field: {ar} was trained on shakespeare, which has no fields", st)
    rows = "\n".join('{"body": "To be, or not to be, that is the question"}' for _ in range(9))
    (tmp_path / "b.jsonl").write_text(rows + "\n")
    res = fsc_main("eval", ar, *LOSS, "--data", tmp_path / "b.jsonl", "--text-field", "body",
                   "--store", st, check=0)
    assert "warning" not in res.stderr


def test_cuts_at_temperature_0_are_refused(fsc_main, tmp_path, ar_recipe):
    """genppl took --top-p and --min-p at --temperature 0 (greedy: they cut nothing) and wrote
    cells named by them, as fsc decode refuses; with a temperature that samples they stay."""
    st = tmp_path / "st"
    res = fsc_main("eval", "tiny_attn", *GENPPL, "--scorer", ar_recipe, "--steps", "4",
                   "--temperature", "0", "--top-p", "0.5", "--min-p", "0.1", "--store", st)
    _refused(res, "--top-p 0.5 and --min-p 0.1 at --temperature 0 change nothing", st)
    fsc_main("eval", "tiny_attn", *GENPPL, "--scorer", ar_recipe, "--steps", "4",
             "--temperature", "0,1", "--top-p", "0.5", "--store", st, check=0)


def test_an_ngram_no_sample_holds_twice_is_refused(fsc_main, tmp_path, ar_recipe):
    """--ngram 8 over 8-token samples: each holds one 8-gram, so the repeat column was 0 (or
    empty past the length) whatever the text."""
    st = tmp_path / "st"
    res = fsc_main("eval", "tiny_attn", *GENPPL, "--scorer", ar_recipe, "--ngram", "8",
                   "--store", st)
    _refused(res, "--ngram 8: a sample of --lengths 8 holds no two 8-grams, so none repeats; "
             "give at most --ngram 7", st)


def test_export_refuses_what_it_does_not_read_and_carries_steps(fsc_main, tmp_path):
    """--export loads no model and stores nothing: --batch, --mode, --device, --store and the
    executor's options were taken and meant nothing, and --steps (the harness's generation K)
    was left out of the command it prints."""
    folder = tmp_path / "ex"
    res = fsc_main("eval", "tiny_attn", *NIAH, "--export", folder, "--batch", "4", "--mode",
                   "ar", "--workers", "2")
    _refused(res, "--mode, --batch, --workers: --export writes prompts only")
    assert not folder.exists()
    res = fsc_main("eval", "tiny_attn", *NIAH, "--export", folder, "--steps", "2", check=0)
    assert "--tasks fsc_niah --include-path" in _said(res) and _said(res).endswith("--steps 2")


def test_the_help_names_each_tasks_own_defaults(fsc_main):
    """--pairs defaults to the pairs trained with (else 8); --needle-digits is read by ruler
    and by loss on passkey data too; --seed also draws the loss's sequences and masks."""
    said = " ".join(fsc_main("eval", "--help", check=0).stdout.split())
    assert "mqar, loss on mqar data: numbers of pairs, e.g. 4,8,16 (default: as trained, " \
           "else 8)" in said
    assert "niah, ruler, loss on passkey data: digits of the key" in said
    assert "(loss: sequences, and masks of the bound;" in said
    # the executor options shared with fsc profile speak of an eval's groups too
    assert "fsc eval scores a group per prompt length" in said
    assert "fsc eval fails the run, keeping the cells scored" in said


@pytest.mark.parametrize("given, says", [
    (["--task", "niah", "--lengths", "128", "--depths", "0.5", "--depths", "0.50"],
     "--depths: 0.5 is given twice"),
    ([*GENPPL, "--policy", "confidence,confidence"], "--policy: confidence is given twice"),
    ([*GENPPL, "--threshold", "none,0.9", "--threshold", "none"],
     "--threshold: none is given twice"),
    ([*GENPPL, "--temperature", "1,1.0"], "--temperature: 1 is given twice"),
])
def test_a_value_given_twice_is_refused(fsc_main, tmp_path, ar_recipe, given, says):
    """A depth, policy, threshold or temperature given twice was decoded twice and stored
    once, with exit 0 (a length, pairs, G or K given twice is refused already)."""
    st = tmp_path / "st"
    scorer = ["--scorer", ar_recipe] if "genppl" in given else []
    _refused(fsc_main("eval", "tiny_attn", "--samples", "1", *given, *scorer, "--store", st),
             says, st)


@pytest.mark.parametrize("task", [LOSS, GENPPL + ["--scorer", "tiny_attn"], ["--tasks", "x"]],
                         ids=["loss", "genppl", "harness"])
def test_a_hub_model_is_not_scored_as_seeded_weights(fsc_main, tmp_path, task):
    """`fsc eval hf:ORG/NAME` read the model's config alone and scored seeded random weights,
    stored under the published model's name; it is refused, before the Hub is asked, with the
    import that fetches the weights."""
    res = fsc_main("eval", "hf:acme/tiny-llama", *task, "--store", tmp_path / "st")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert ("fsc eval would score seeded random weights: hf:acme/tiny-llama is read for its "
            "config alone" in res.stderr and "fsc import hf:acme/tiny-llama --out DIR"
            in res.stderr)
    assert not (tmp_path / "st").exists()
