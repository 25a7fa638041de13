"""What `fsc plot`, `fsc report` and `fsc compare` read from the store: rows of one of its views
for chosen runs, and each run's provenance.

Every read goes through `Store.query`, the sandboxed read-only path `fsc query` uses, so a
user's `--where` condition reaches nothing but the store. Run ids are looked up first and only
ids the store holds are put into SQL.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import duckdb

from fsc.costmodel import pass_cost
from fsc.data import ruler
from fsc.errors import QueryError, RecipeError, UsageError
from fsc.eval import columns
from fsc.recipe import parse_recipe
from fsc.recipe_yaml import parse_yaml
from fsc.store import Store
from fsc.store.connect import one_line
from fsc.store.process import run_process
from fsc.store.run_ids import resolve_run
from fsc.text import printable

ALL = "all"  # --run all: every run of the kind


@dataclass(frozen=True)
class Source:
    """Where a figure's or a table's rows come from: a view, the run kind that fills it, the
    rows it draws (`need`, a SQL condition on the view; `what` names them), and how runs are
    picked when none is named: for each value of the view's columns `by`, the newest run that
    has such rows (no `by`: the newest run; `by_words`: how `by` reads, where its columns do
    not say it). `from_run`: columns read from the run's config beside the view's, each a
    (name, SQL expression of the config `r.config`) pair (an eval cell's `data`). `keep`: a
    SQL condition for rows a --where never drops (genppl's reference row: the yardstick of the
    cells it sits with). `apart`: a SQL expression on the rows that sets runs of one `by`
    value apart in the default pick: the training directory, so that two checkpoints of one
    recipe are both shown."""

    view: str
    kind: str
    order: str
    by: tuple[str, ...] = ()
    need: str = "true"
    what: str = "rows"
    hint: str = ""
    by_words: str = ""
    from_run: tuple[tuple[str, str], ...] = ()
    keep: str = ""
    apart: str = ""

    def table(self, own: Collection[str] = ()) -> str:
        """The view as a --where reads it: with the `from_run` columns. One the view has of
        its own (`own`: its columns; eval cells record the data they scored) is the row's,
        and the run's only where the row's is NULL (a row stored before it was recorded)."""
        if not self.from_run:
            return self.view
        config = {name: f"CASE WHEN json_valid(r.config) THEN {sql} END"
                  for name, sql in self.from_run}
        mine = [name for name in config if name in own]
        star = f"v.* EXCLUDE ({', '.join(mine)})" if mine else "v.*"
        columns = ", ".join(f"coalesce(v.{name}, {sql}) AS {name}" if name in mine
                            else f"{sql} AS {name}" for name, sql in config.items())
        return (f"(SELECT {star}, {columns} FROM {self.view} v LEFT JOIN runs r "
                f"USING (run_id)) AS {self.view}")

    def describe(self) -> str:
        """How the default picks, in words."""
        each = f" of each {self.by_words or ' and '.join(self.by)}" if self.by else ""
        apart = ", each training directory apart" if self.apart else ""
        return f"the latest {self.kind} run{each} with {self.what}{apart}"


_PROFILE_ORDER = "recipe, G, K, dtype, B, S"


def _in_order(column: str, values) -> str:
    """SQL ordering `column` by `values`' order (others after, NULL last)."""
    return (f"CASE {column} " + " ".join(f"WHEN '{v}' THEN {i}" for i, v in enumerate(values))
            + f" ELSE {len(values)} END")


# at one length and depth, the suite's parts in the order fsc eval scores them
_EVAL_ORDER = (f"run_id, length, depth, pairs, {_in_order('task', ruler.SUITE)}, "
               f"{_in_order('variant', ruler.VARIANTS)}")
# a profile run's --memory-budget (NULL: the device's free memory), which its oom points missed
RUN_BUDGET = ("memory_budget", "TRY_CAST(json_extract(r.config, '$.memory_budget') AS BIGINT)")
PROFILE = Source("profile", "profile", _PROFILE_ORDER, what="points", hint="fsc profile",
                 from_run=(RUN_BUDGET,))
PROFILE_OK = Source("profile", "profile", _PROFILE_ORDER, need="status = 'ok'",
                    what="ok points", hint="fsc profile",
                    from_run=(RUN_BUDGET,))  # what the profile figures draw
# a training run's --out: its runs of one recipe into other directories are other checkpoints
TRAINING = Source("training", "train", "run_id, step", by=("recipe",), what="training steps",
                  hint="fsc train", from_run=(("out", "json_extract_string(r.config, '$.out')"),),
                  apart="out")
# an eval run's --data, and the --batch its samples were decoded at (genppl's tokens/s is the
# batch's: fsc.results.quality.decoded_together); NULL for a run recorded without its request
RUN_DATA = ("data", "json_extract_string(r.config, '$.data')")
RUN_BATCH = ("batch", "TRY_CAST(json_extract(r.config, '$.request.batch') AS BIGINT)")
# the training directory of an eval cell's checkpoint (its step-NNNNNN folder's parent): two
# checkpoints of one recipe trained apart are both picked, two steps of one training are not;
# a recipe evaluated with seeded random weights (its name or YAML file: fsc eval stores a
# checkpoint folder's whole path) is its recipe's, however it was named
TRAINED = (r"CASE WHEN regexp_matches(checkpoint, '\.ya?ml$') OR NOT contains(checkpoint, '/') "
           r"THEN NULL ELSE regexp_replace(checkpoint, '[/\\]step-[0-9]+[/\\]*$', '') END")
# a harness run's rows are all of task 'harness', a row per harness task and metric: its
# tasks are told apart, so that a later harness run of other tasks hides none of them
EVALUATION = Source("evaluation", "eval", _EVAL_ORDER, by=("recipe", "task", "harness_task"),
                    by_words="recipe and task (each harness task apart)",
                    what="evaluation cells", hint="fsc eval", from_run=(RUN_DATA, RUN_BATCH),
                    apart=TRAINED)
# niah's passkey cells: the RULER-style variants (fsc eval --task niah --variant ...) score
# other prompts, so they are not pooled with them
PASSKEY = " AND ".join(f"coalesce({k}, {v!r}) = {v!r}" for k, v in columns.PASSKEY.items())
NIAH = Source("evaluation", "eval", _EVAL_ORDER, by=("recipe",),
              need=f"task = 'niah' AND {PASSKEY}", what="niah cells",
              hint="fsc eval --task niah", from_run=(RUN_DATA, RUN_BATCH), apart=TRAINED)
RETRIEVAL = Source("evaluation", "eval", _EVAL_ORDER, by=("recipe", "task"),
                   need=f"(task IN ('mqar', 'copy') OR task = 'niah' AND {PASSKEY}) AND "
                   "length_ratio IS NOT NULL",
                   what="niah, mqar or copy cells with a training length",
                   hint="fsc eval RUN_DIR", from_run=(RUN_DATA, RUN_BATCH),
                   apart=TRAINED)
# a run with a scored part beside plain passkey cells (fsc eval --task niah scores those too:
# a later passkey run must not hide a recipe's suite run)
RULER = Source("evaluation", "eval", _EVAL_ORDER, by=("recipe",),
               need=f"score IS NOT NULL AND length_ratio IS NOT NULL AND NOT (task = 'niah' AND "
                    f"{PASSKEY})",
               what="RULER-style cells with a training length",
               hint="fsc eval RUN_DIR --task ruler", from_run=(RUN_DATA, RUN_BATCH),
               apart=TRAINED)
QUALITY = Source("evaluation", "eval", _EVAL_ORDER, by=("recipe",), need="task = 'genppl'",
                 what="genppl cells", hint="fsc eval --task genppl",
                 from_run=(RUN_DATA, RUN_BATCH),
                 keep="task = 'genppl' AND mode = 'reference'", apart=TRAINED)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _records(cols: list[str], rows: list[tuple]) -> list[dict[str, Any]]:
    return [dict(zip(cols, r, strict=True)) for r in rows]


def runs_table(st: Store) -> list[dict[str, Any]]:
    """Every run (id, kind, status, start, recipe its config names), oldest first."""
    cols, rows = st.query(
        "SELECT run_id, kind, status, started_at,"
        " CASE WHEN json_valid(config) THEN json_extract_string(config, '$.recipe') END AS recipe"
        " FROM runs ORDER BY started_at, run_id")
    return _records(cols, rows)


def named_runs(st: Store, asked: list[str], kind: str | None = None,
               option: str = "--run") -> list[str]:
    """The run ids `asked` (given as `option`) names, each once: whole ids, prefixes of an id
    or of its tail, or `latest` (the newest run of `kind`; see fsc.store.run_ids). UsageError
    for one that names no run, or several, or (a whole id) a run of another kind than `kind`,
    as for a prefix of its id."""
    if ALL in asked:
        raise UsageError(f"{option} {ALL} stands alone; drop the run ids beside it")
    found = list(dict.fromkeys(resolve_run(st, r, kind, option=option) for r in asked))
    if kind is not None:
        kinds = {r["run_id"]: r["kind"] for r in runs_table(st)}
        for run_id in found:
            if kinds.get(run_id) != kind:
                raise UsageError(
                    f"{option}: run {run_id} is {_a(kinds.get(run_id))} run; this takes "
                    f"{_a(kind)} run (`fsc runs --kind {kind}` lists them)")
    return found


def _a(kind: str | None) -> str:
    """'an eval', 'a train'."""
    kind = kind or "unknown"
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def pick_runs(st: Store, source: Source, asked: list[str]) -> list[str]:
    """The run ids a figure or table of `source` shows: those asked (each must be in the
    store; `all` takes every run with the rows it draws), or by default the latest run with
    such rows for each value of `source.by` (see Source). UsageError for an unknown id, or
    when no run has the rows."""
    if asked and asked != [ALL]:
        return named_runs(st, asked, source.kind)
    known = {r["run_id"]: n for n, r in enumerate(runs_table(st))}  # oldest first
    keys = "".join(f", {c}" for c in (*source.by, *([source.apart] if source.apart else [])))
    _, found = st.query(f"SELECT DISTINCT run_id{keys} FROM {_table(st, source)} WHERE {source.need}")
    found = [f for f in found if f[0] in known]
    if not found:
        raise UsageError(f"the store has no {source.kind} run with {source.what}; "
                         f"run `{source.hint}` first")
    if asked == [ALL]:
        return sorted({f[0] for f in found}, key=known.__getitem__)
    newest: dict[tuple, str] = {}
    for run_id, *key in found:
        if tuple(key) not in newest or known[run_id] > known[newest[tuple(key)]]:
            newest[tuple(key)] = run_id
    return sorted(set(newest.values()), key=known.__getitem__)


def condition(where: str) -> str:
    """The user's --where as one SQL expression, parsed by DuckDB and written back from its
    syntax tree: text that is not exactly one expression (a second statement, a closing
    parenthesis and a UNION) is refused, so it can only narrow the rows fsc selects."""
    if not where.strip():
        raise UsageError("--where: empty condition; e.g. --where \"recipe = 'tiny_attn'\"")
    try:
        return str(duckdb.SQLExpression(where))
    except duckdb.Error as e:
        why = one_line(e).removeprefix("Parser Error: ")
        why = why.split(" is not an expression list: ", 1)[-1]
        raise QueryError(f"{_named(where)}: not one SQL condition ({why})") from None


def _named(where: str) -> str:
    """A --where as the user gave it, for a message."""
    return f'--where "{printable(where, 120)}"'


def _parts(where: str) -> list[str]:
    """The conditions of `where` when it is several joined as `(a) AND (b) ...` (as `fsc plot`
    joins a --where given more than once), else [where]: each part's parentheses and quotes
    are matched."""
    parts, pos = [], 0
    while pos < len(where) and where[pos] == "(":
        depth, quote, end = 0, "", pos
        for end in range(pos, len(where)):
            c = where[end]
            if quote:
                quote = "" if c == quote else quote  # a doubled quote closes and reopens
            elif c in "'\"":
                quote = c
            elif c in "()":
                depth += 1 if c == "(" else -1
                if depth == 0:
                    break
        if depth or quote:
            return [where]
        parts.append(where[pos + 1:end])
        pos = end + 1
        if pos == len(where):
            return parts if len(parts) > 1 else [where]
        if not where.startswith(" AND ", pos):
            return [where]
        pos += len(" AND ")
    return [where]


def continued(st: Store, run_ids: list[str]) -> dict[str, list[tuple[str, int]]]:
    """For each of `run_ids` that is a resumed training run, the runs it continues, newest
    first, each with the last step it contributes: the run before it into the same training
    directory (`out`) for the same recipe, up to the step the resumed run started from, and so
    on back. One logical training run is drawn as one curve."""
    _, found = st.query(
        "SELECT run_id, json_extract_string(config, '$.out'),"
        " json_extract_string(config, '$.recipe_hash'),"
        " TRY_CAST(json_extract(config, '$.resumed_from_step') AS BIGINT)"
        " FROM runs WHERE kind = 'train' AND json_valid(config) ORDER BY started_at, run_id")
    earlier: dict[str, tuple[str | None, int | None]] = {}  # run -> (the run before, resumed at)
    last: dict[tuple, str] = {}
    for run_id, out, recipe_hash, resumed in found:
        earlier[run_id] = (last.get((out, recipe_hash)) if resumed is not None else None, resumed)
        last[(out, recipe_hash)] = run_id
    chains = {}
    for head in run_ids:
        chain, run_id, seen = [], head, {head}
        while run_id in earlier and earlier[run_id][0] is not None:
            before, step = earlier[run_id]
            if before in seen:
                break
            chain.append((before, step if not chain else min(step, chain[-1][1])))
            seen.add(before)
            run_id = before
        if chain:
            chains[head] = chain
    return chains


def rows(st: Store, source: Source, run_ids: list[str],
         where: str | None = None) -> list[dict[str, Any]]:
    """Rows of `source.view` for `run_ids`, filtered by the user's `where` (a SQL condition on
    that view's columns, see `condition`). Training rows of a resumed run come with those of
    the runs it continues, under its run id (`continued`). The query runs
    through the store's sandbox like any `fsc query`; a failing where is a QueryError naming
    --where."""
    if source.view != "training":
        return _view_rows(st, source, run_ids, where)
    chains = continued(st, run_ids)
    inside = {r for chain in chains.values() for r, _ in chain}
    heads = [r for r in run_ids if r not in inside]  # a run another one continues is part of it
    found = _view_rows(st, source, list(dict.fromkeys(heads + sorted(inside))), where)
    by_run: dict[str, list[dict[str, Any]]] = {}
    for row in found:
        by_run.setdefault(row["run_id"], []).append(row)
    out = []
    for head in heads:
        for before, step in reversed(chains.get(head, [])):
            out += [{**r, "run_id": head, "part_of_run": before}
                    for r in by_run.get(before, []) if r["step"] <= step]
        out += by_run.get(head, [])
    return out


def _view_rows(st: Store, source: Source, run_ids: list[str],
               where: str | None) -> list[dict[str, Any]]:
    try:
        cols, found = st.query(_select(st, source, run_ids, where))
    except QueryError as e:
        if where is None:
            raise
        raise _where_failed(st, source, run_ids, where, e) from None
    return _records(cols, found)


def _table(st: Store, source: Source) -> str:
    """`source.table` as this store has its view (fsc.results.select.Source.table)."""
    if not source.from_run:
        return source.view
    return source.table(st.columns(source.view))


def _select(st: Store, source: Source, run_ids: list[str], where: str | None) -> str:
    ids = ", ".join(_literal(r) for r in run_ids)
    conditions = [f"run_id IN ({ids})"]
    if where is not None:
        conditions.append(f"(({condition(where)}) OR ({source.keep}))" if source.keep
                          else f"({condition(where)})")
    return (f"SELECT * FROM {_table(st, source)} WHERE " + " AND ".join(conditions)
            + f" ORDER BY {source.order}")


def _where_failed(st: Store, source: Source, run_ids: list[str], where: str,
                  error: QueryError) -> QueryError:
    """The error of a --where the view's rows fail, naming the condition that fails (of
    several given, the first) and, for a column the view lacks, the columns it has."""
    for part in _parts(where):
        try:
            st.query(_select(st, source, run_ids, part))
        except QueryError as e:
            where, error = part, e
            break
    missing = re.search(r'Referenced column "(.+?)" not found', str(error))
    if missing is None:
        return QueryError(f"{_named(where)}: {error}")
    name = missing.group(1)
    cols = st.query(f"SELECT * FROM {_table(st, source)} LIMIT 0")[0]
    by_lower = {c.lower(): c for c in cols}
    like = [by_lower[c] for c in difflib.get_close_matches(name.lower(), by_lower, 3, 0.6)]
    some = [c for c in cols if not c.endswith(("_id", "_hash"))][:8]
    hint = (f"did you mean {' or '.join(like)}?" if like else
            f"it has {', '.join(some)}, ... (`fsc schema` lists them all)")
    if re.search(r"[=<>]\s*" + re.escape(name) + r"\b", where):  # recipe = tiny_attn
        hint += f"; a text value goes in single quotes: '{printable(name, 40)}'"
    return QueryError(f"{_named(where)}: the {source.view} view has no column "
                      f"{printable(name, 40)}; {hint}")


def provenance(st: Store, run_ids: list[str]) -> list[dict[str, Any]]:
    """Each run with its environment and configuration (config parsed from JSON), in the
    order given; its status as `fsc runs` shows it (a run still marked running whose process
    is gone is dead)."""
    ids = ", ".join(_literal(r) for r in run_ids)
    cols, found = st.query(
        "SELECT r.run_id, r.kind, r.status, r.command, r.started_at, r.resumed_at, r.ended_at,"
        " r.host, r.pid,"
        " r.config, r.error, e.* EXCLUDE (env_id, host, first_seen)"
        f" FROM runs r LEFT JOIN environments e USING (env_id) WHERE r.run_id IN ({ids})")
    by_id = {}
    for rec in _records(cols, found):
        if run_process(rec) == "dead":
            rec["status"] = "dead"
        del rec["pid"]
        try:
            rec["config"] = json.loads(rec["config"]) if rec["config"] else {}
        except ValueError:
            rec["config"] = {}
        by_id[rec["run_id"]] = rec
    return [by_id[r] for r in run_ids if r in by_id]


def with_cost(st: Store, points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Profile rows with `step_flops` (the cost model's FLOPs of the point's step, from the
    recipe the store holds) and `bandwidth` (the run's --bandwidth in TB/s, or None)."""
    hashes = sorted({p["recipe_hash"] for p in points})
    runs = sorted({p["run_id"] for p in points})
    recipes = {}
    if hashes:
        _, found = st.query("SELECT recipe_hash, yaml FROM recipes WHERE recipe_hash IN ("
                               + ", ".join(_literal(h) for h in hashes) + ")")
        for recipe_hash, text in found:
            try:
                recipes[recipe_hash] = parse_recipe(parse_yaml(text, "store"), "store")
            except RecipeError:  # a recipe this fsc no longer reads: no FLOPs for its points
                pass
    bandwidth = {r["run_id"]: r["config"].get("bandwidth") for r in provenance(st, runs)}
    out = []
    for p in points:
        recipe = recipes.get(p["recipe_hash"])
        flops = (pass_cost(recipe, p["S"], p["B"], p["G"]).flops
                 if recipe is not None and p["status"] == "ok" else None)
        out.append(p | {"step_flops": flops, "bandwidth": bandwidth.get(p["run_id"])})
    return out
