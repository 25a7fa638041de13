"""fsc recipes and fsc build as a new researcher uses them, second pass: what build reports
against a count by hand, a reference that names no recipe, --set values read as a recipe file
reads them, and the messages of the mistakes made writing a recipe by hand."""

import json

import pytest

from fsc.recipe import parse_changes, shipped_dir, shipped_recipes

TINY = shipped_recipes()["tiny_hybrid"].read_text()


def _flat(text: str) -> str:
    return " ".join(text.split())


def _refused(res, *expected):
    """Exit 2 with one line on stderr saying each of `expected`, nothing on stdout."""
    assert res.code == 2, (res.out, res.err)
    assert res.out == "" and "Traceback" not in res.err
    said = _flat(res.err)
    for text in expected:
        assert text in said, said
    return said


def _recipe(tmp_path, *edits, name="mine.yaml"):
    text = TINY
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


def test_build_reports_what_a_count_by_hand_gives(cli):
    """tiny_hybrid: d 64, vocab 288, 3 Mamba-2 layers (expand 2, N 8, head_dim 16, d_conv 4),
    one GQA attention layer (4 heads, 2 KV heads of 16), 4 GELU experts of width 128 a layer."""
    rep = json.loads(cli("build", "tiny_hybrid", "--S", "8k", "--B", "3", "--json").out)
    d, v, d_inner, heads, n, conv = 64, 288, 128, 8, 8, 4
    xbc = d_inner + 2 * n  # the conv's channels: x, B, C
    mamba = (d * (2 * d_inner + 2 * n + heads) + xbc * conv + xbc + 3 * heads + d_inner * d)
    attention = 2 * d * 64 + 2 * d * 32
    moe = 4 * 2 * d * 128 + d * 4
    assert rep["params_by_kind"] == {"embedding": 2 * v * d, "norm": 4 * 2 * d + d,
                                     "mamba": 3 * mamba, "moe": 4 * moe, "attention": attention}
    assert rep["n_params"] == 393_464 and rep["weight_bytes"] == 4 * 393_464
    kv = 3 * 8192 * 2 * 2 * 16 * 4  # B S (K, V) kv_heads head_dim fp32
    state = 3 * 3 * (heads * 16 * n + (conv - 1) * xbc) * 4  # B layers (state + window) fp32
    assert rep["cache"] == {"S": 8192, "B": 3, "kv_bytes": kv, "state_bytes": state,
                            "total_bytes": kv + state}


def test_a_published_size_recipe_by_hand_and_how_it_was_counted(cli):
    """hybrid_3b at S 256k, B 8 (the paper's point): 2,687,868,560 parameters, 100 GiB of KV
    in its 5 attention layers, 471 MiB of Mamba-2 state in its 23; counted on the meta device,
    which the first line now says in words ('(meta build)' said nothing to a reader)."""
    rep = json.loads(cli("build", "hybrid_3b", "--S", "256k", "--B", "8", "--json").out)
    d, d_inner, heads, n = 2560, 5120, 80, 128
    xbc = d_inner + 2 * n
    mamba = d * (2 * d_inner + 2 * n + heads) + 4 * xbc + xbc + 3 * heads + d_inner * d
    assert rep["params_by_kind"] == {"embedding": 2 * 32000 * d, "norm": 28 * 2 * d + d,
                                     "mamba": 23 * mamba, "mlp": 28 * 2 * d * 4 * d,
                                     "attention": 5 * 4 * d * d}
    assert rep["n_params"] == 2_687_868_560 and rep["weight_bytes"] == 2 * 2_687_868_560
    assert rep["cache"]["kv_bytes"] == 8 * 262144 * 5 * 2 * d * 2 == 100 * 2**30
    assert rep["cache"]["state_bytes"] == 8 * 23 * (heads * 64 * n + 3 * xbc) * 4
    said = " ".join(cli("build", "hybrid_3b").out.split())  # (the first line, wrapped)
    assert said.startswith("hybrid_3b hash ")
    assert "(shapes only, on torch's meta device: no weights allocated)" in said
    assert "(built on cpu)" in cli("build", "tiny_attn").out.splitlines()[0]


def test_a_path_is_never_read_as_a_shipped_name(tmp_path, cli, monkeypatch):
    """The shipped-name lookup joined the reference to recipes/: an absolute /dir/x read
    /dir/x.yaml (and ../x left recipes/), while the same file as x was refused."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text(TINY)
    said = _refused(cli("build", tmp_path / "mine"), f"{tmp_path}/mine: no such checkpoint")
    assert f"(did you mean {tmp_path}/mine.yaml?)" in said  # the file beside it
    _refused(cli("build", "mine"), "mine: no such recipe file", "did you mean mine.yaml?")
    outside = f"../{shipped_dir().name}/tiny_hybrid"  # recipes/../recipes/tiny_hybrid.yaml
    _refused(cli("build", outside), "no such checkpoint, training directory or recipe file")
    # ./x is a path here: it built the shipped tiny_hybrid; the file beside a path is named as
    # the path was given (it said mine.yaml for ./sub/../mine, which is not there from here)
    _refused(cli("build", "./tiny_hybrid"), "./tiny_hybrid: no such", "did you mean tiny_hybrid?")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    _refused(cli("build", "../mine"), "../mine: no such", "did you mean ../mine.yaml?")


@pytest.mark.parametrize("ref, meant", [
    ("tiny_hybird", "tiny_hybrid"),
    ("tiny_hybrid.yaml", "tiny_hybrid"),
    ("TINY_HYBRID", "tiny_hybrid"),
    ("Llama-3.1-8B", "published/Llama-3.1-8B"),
    ("recipes/published/Bamba-9B", "published/Bamba-9B"),  # outside the repository
])
def test_a_reference_naming_nothing_suggests_the_shipped_name(tmp_path, cli, monkeypatch, ref,
                                                              meant):
    monkeypatch.chdir(tmp_path)
    _refused(cli("build", ref), f"{ref}: no such", f"did you mean {meant}?")


def test_a_name_far_from_any_suggests_none(cli):
    said = _refused(cli("build", "qqqqqq"), "qqqqqq: no such recipe file",
                    "see `fsc recipes`")
    assert "did you mean" not in said


def test_recipes_names_the_folder_its_files_are_in(cli):
    """Outside the repository `cp recipes/tiny_hybrid.yaml my.yaml` (README) finds nothing: the
    table now says where NAME's file is."""
    res = cli("recipes")
    assert res.code == 0, res.err
    caption = f"NAME is the file {shipped_dir()}/NAME.yaml: copy it to change it"
    assert "".join(caption.split()) in "".join(res.out.split())  # wrapped anywhere


@pytest.mark.parametrize("text, value", [
    ("mamba.decay_scale=5e-1", 0.5),  # was the text '5e-1', refused as not a number
    ("mamba.decay_scale=1E-1", 0.1),
    ("attention.logn=128", 128),
    ("attention.window=none", None),
])
def test_set_reads_a_value_as_a_recipe_file_does(text, value):
    assert parse_changes([text]) == ((text.split("=")[0], value),)


@pytest.mark.parametrize("value, expected", [
    ("010", "010 has a leading zero (YAML reads it as the octal number 8); allowed: a decimal "
            "integer such as 10"),
    ("1:30", "1:30 is a base-60 number to YAML (90)"),
])
def test_set_refuses_what_a_recipe_file_refuses(tmp_path, cli, value, expected):
    """`--set attention.logn=010` scored the checkpoint with logn 8, under the name
    +attention.logn=8; the same value in a recipe file is refused."""
    _refused(cli("eval", "tiny_hybrid", "--task", "loss", "--data", "shakespeare", "--set",
                 f"attention.logn={value}", "--store", tmp_path / "st"),
             f"error: --set attention.logn: {expected}")


def test_a_text_value_of_set_is_still_refused_by_the_field(tmp_path, cli):
    _refused(cli("eval", "tiny_hybrid", "--task", "loss", "--data", "shakespeare", "--set",
                 "attention.logn=[1", "--store", tmp_path / "st"),
             "attention.logn: expected an integer (got '[1')")


@pytest.mark.parametrize("edit, expected", [
    # an FFN key at the top level was told no home; a mixer's key was
    (("block_size: 4\n", "block_size: 4\nhidden_ratio: 2\n"),
     "hidden_ratio: unknown key (it belongs in mlp or moe)"),
    (("block_size: 4\n", "block_size: 4\nn_experts: 4\n"),
     "n_experts: unknown key (it belongs in moe)"),
    # a choice in the wrong case found no suggestion
    (("\ndtype: fp32\n", "\ndtype: FP32\n"),
     "dtype: not an allowed value (did you mean fp32?) (got 'FP32')"),
    # a placement beside every was told it may be uniform or back_dense, the value it had
    (("{every: 4}", "{every: 4, placement: uniform}"),
     "layers.attention.placement: needs count (got 'uniform'); allowed: placement beside count, "
     "not beside every or positions"),
])
def test_a_hand_written_mistake_says_where_it_belongs(tmp_path, cli, edit, expected):
    path = _recipe(tmp_path, edit)
    said = _refused(cli("build", path), f"error: {path}: {expected}")
    assert "allowed: uniform, back_dense" not in said


@pytest.mark.parametrize("text", ["~\n", "# only a comment\n", "---\n"])
def test_a_file_without_a_recipe_says_so(tmp_path, cli, text):
    """`~` was said to be an empty file."""
    path = tmp_path / "r.yaml"
    path.write_text(text)
    _refused(cli("build", path), f"{path}: file is empty (or holds only comments, --- or null)")


def test_store_without_save_is_refused_as_seed_is(tmp_path, cli):
    """--store was ignored without --save (--seed was refused)."""
    _refused(cli("build", "tiny_attn", "--store", tmp_path / "st"),
             "--store records the checkpoint --save writes; give --save DIR or drop --store")


def test_a_store_that_cannot_be_written_is_refused_before_the_checkpoint(tmp_path, cli):
    """The checkpoint was written, then recording it failed ('File exists: afile'): the
    command failed, the directory stayed, unrecorded, and a second try said it exists."""
    (tmp_path / "afile").write_text("")
    _refused(cli("build", "tiny_attn", "--save", tmp_path / "ck", "--store", tmp_path / "afile"),
             "is not a directory")
    assert not (tmp_path / "ck").exists()
