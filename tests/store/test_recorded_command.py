"""The command a run records is the one that ran, quoted as a shell reads it: pasted back, a
path with a space stays one argument (and an in-process run records its own arguments, not
the process's)."""

import shlex

from fsc.recipe import load_recipe
from fsc.store import Store


def test_a_run_records_its_command_as_a_shell_reads_it(cli, tmp_path):
    folder = tmp_path / "my recipes"
    folder.mkdir()
    recipe = folder / "tiny copy.yaml"
    recipe.write_text(load_recipe("tiny_attn").to_yaml())
    store = tmp_path / "the store"
    runs = [["profile", "-r", str(recipe), "--S", "16", "--B", "1", "--repeats", "1",
             "--store", str(store)],
            ["eval", str(recipe), "--lengths", "128", "--depths", "0.5", "--samples", "1",
             "--store", str(store)]]
    for args in runs:
        r = cli(*args)
        assert r.code == 0, r.err
    _, rows = Store(store).query("select command from runs order by started_at")
    assert [shlex.split(c) for (c,) in rows] == [["fsc", *args] for args in runs]
