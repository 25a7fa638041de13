"""The store's schema as an ordered list of small migrations, each recorded once.

Append new migrations to `MIGRATIONS`; never reorder them or change what a shipped one does (a
store that applied it keeps what it did). Version n is the n-th function of the list. `migrate`
runs the missing ones in one transaction, so a store is never left half-migrated and two
processes racing to migrate cannot both apply the same step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fsc.errors import StoreError
from fsc.store.connect import utcnow

Connection = Any  # duckdb.DuckDBPyConnection, kept out of this module's imports


# A row table's view: every column of the table (`alias.*`), then its run's and its
# environment's. DuckDB lists a view's columns as they were when the view was created (a query
# binds `alias.*` afresh), so a migration that adds a column to a table recreates its view with
# `row_view`: the catalog, `fsc schema` and the schema test read that list.
ENVIRONMENT = "e.device_name, e.git_commit, e.git_dirty, e.fsc_version, e.torch_version"
PROFILE_ENVIRONMENT = (
    "e.device_name, e.device_memory_bytes, e.git_commit, e.git_dirty,"
    " e.fsc_version, e.torch_version, e.triton_version, e.cuda_version, e.driver_version"
)


def row_view(view: str, table: str, alias: str, environment: str, columns: str = "") -> str:
    """`CREATE OR REPLACE VIEW view`: `table`'s `columns` (default all of them, `alias.*`), its
    run's and `environment`."""
    return f"""
        CREATE OR REPLACE VIEW {view} AS
        SELECT {columns or f"{alias}.*"}, r.status AS run_status, r.command, r.host, {environment}
        FROM {table} {alias}
        LEFT JOIN runs r USING (run_id)
        LEFT JOIN environments e ON e.env_id = r.env_id;
        """


# each row table's view: (view, alias, environment columns)
ROW_VIEWS = {"train_steps": ("training", "t", ENVIRONMENT),
             "eval_cells": ("evaluation", "c", ENVIRONMENT)}


def add_columns(con: Connection, table: str, columns) -> list[str]:
    """Add to row table `table` each declared column (fsc.store.schema.Column) it lacks, and
    recreate its view if any was added; the names added. A declared column needs no migration:
    a store gains it when rows first carry it."""
    if not columns:  # most writes (a training's steps, the shared columns): no catalog query
        return []
    have = {name for (name,) in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'main'"
        " AND table_name = ?", [table]).fetchall()}
    added = [c.name for c in columns if c.name not in have]
    for c in columns:
        if c.name in added:
            con.execute(f'ALTER TABLE {table} ADD COLUMN "{c.name}" {c.type}')
    if added:
        view, alias, environment = ROW_VIEWS[table]
        con.execute(row_view(view, table, alias, environment))
    return added


def create_runs_recipes_environments(con: Connection) -> None:
    con.execute(
        """
        CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY,
            kind VARCHAR NOT NULL,
            command VARCHAR,
            status VARCHAR NOT NULL
                CHECK (status IN ('running', 'finished', 'failed', 'interrupted')),
            started_at TIMESTAMP NOT NULL,
            ended_at TIMESTAMP,
            pid INTEGER,
            host VARCHAR,
            env_id VARCHAR,
            config VARCHAR,
            error VARCHAR
        );
        CREATE TABLE recipes (
            recipe_hash VARCHAR PRIMARY KEY,
            name VARCHAR NOT NULL,
            yaml VARCHAR,
            layer_plan VARCHAR[],
            first_seen TIMESTAMP NOT NULL
        );
        CREATE TABLE environments (
            env_id VARCHAR PRIMARY KEY,
            fsc_version VARCHAR,
            python_version VARCHAR,
            torch_version VARCHAR,
            triton_version VARCHAR,
            cuda_version VARCHAR,
            driver_version VARCHAR,
            device_name VARCHAR,
            device_memory_bytes BIGINT,
            host VARCHAR,
            platform VARCHAR,
            git_commit VARCHAR,
            git_dirty BOOLEAN,
            first_seen TIMESTAMP NOT NULL
        );
        """
    )


def create_profile_points_samples(con: Connection) -> None:
    con.execute(
        """
        CREATE SEQUENCE point_id_seq START 1;
        CREATE TABLE profile_points (
            point_id BIGINT PRIMARY KEY DEFAULT nextval('point_id_seq'),
            run_id VARCHAR NOT NULL,
            recipe VARCHAR,
            recipe_hash VARCHAR,
            layer_plan VARCHAR[],
            "S" BIGINT,
            "B" INTEGER,
            "G" INTEGER,
            "K" INTEGER,
            dtype VARCHAR,
            backend VARCHAR,
            mixer_backends VARCHAR,
            device VARCHAR,
            status VARCHAR NOT NULL CHECK (status IN ('ok', 'oom', 'error')),
            error VARCHAR,
            step_ms DOUBLE,
            step_ms_p10 DOUBLE,
            step_ms_p90 DOUBLE,
            fold_ms DOUBLE,
            fold_ms_p10 DOUBLE,
            fold_ms_p90 DOUBLE,
            tokens_per_s DOUBLE,
            peak_bytes BIGINT,
            cache_bytes BIGINT,
            weight_bytes BIGINT,
            predicted_step_bytes BIGINT,
            predicted_total_bytes BIGINT,
            floor_ms DOUBLE,
            bound VARCHAR,
            achieved_gbps DOUBLE,
            roofline_fraction DOUBLE,
            started_at TIMESTAMP,
            ended_at TIMESTAMP
        );
        -- no index: a million samples stay cheap to append and to scan
        CREATE TABLE samples (
            point_id BIGINT NOT NULL,
            phase VARCHAR NOT NULL CHECK (phase IN ('step', 'fold')),
            idx INTEGER NOT NULL,
            ms DOUBLE NOT NULL
        );
        """
    )


def create_artifacts(con: Connection) -> None:
    con.execute(
        """
        CREATE TABLE artifacts (
            artifact_id VARCHAR PRIMARY KEY,
            path VARCHAR,
            recipe_hash VARCHAR,
            files_sha256 VARCHAR,
            repo VARCHAR,
            revision VARCHAR,
            commit_id VARCHAR,
            created_at TIMESTAMP NOT NULL,
            action VARCHAR NOT NULL CHECK (action IN ('saved', 'pushed', 'pulled'))
        );
        """
    )


def create_profile_view(con: Connection) -> None:
    """The profile view as it first shipped: the columns profile_points had then, by name."""
    columns = """
        p.point_id, p.run_id, p.recipe, p.recipe_hash, p.layer_plan,
        p."S", p."B", p."G", p."K", p.dtype, p.backend, p.mixer_backends, p.device,
        p.status, p.error,
        p.step_ms, p.step_ms_p10, p.step_ms_p90, p.fold_ms, p.fold_ms_p10, p.fold_ms_p90,
        p.tokens_per_s, p.peak_bytes, p.cache_bytes, p.weight_bytes,
        p.predicted_step_bytes, p.predicted_total_bytes, p.floor_ms, p.bound,
        p.achieved_gbps, p.roofline_fraction, p.started_at, p.ended_at"""
    con.execute(row_view("profile", "profile_points", "p", PROFILE_ENVIRONMENT, columns))


def create_bench_results(con: Connection) -> None:
    con.execute(
        """
        CREATE TABLE bench_results (
            run_id VARCHAR NOT NULL,
            name VARCHAR NOT NULL,
            params VARCHAR,
            value DOUBLE,
            unit VARCHAR,
            recorded_at TIMESTAMP NOT NULL
        );
        """
    )


def profile_view_follows_the_table(con: Connection) -> None:
    """The profile view as every column of profile_points (`p.*`: DuckDB binds a view when it
    is queried, so a measurement added by a later migration shows up without a new view),
    then the run's and the environment's."""
    con.execute(row_view("profile", "profile_points", "p", PROFILE_ENVIRONMENT))


def create_training_and_evaluation(con: Connection) -> None:
    """`fsc train` logs a row per logged step, `fsc eval` a row per cell; each table has a
    view with its run and environment."""
    con.execute(
        """
        CREATE TABLE train_steps (
            run_id VARCHAR NOT NULL,
            recipe VARCHAR,
            recipe_hash VARCHAR,
            objective VARCHAR,
            data VARCHAR,
            step INTEGER NOT NULL,
            loss DOUBLE,
            lr DOUBLE,
            grad_norm DOUBLE,
            tokens BIGINT,
            tokens_per_s DOUBLE,
            elapsed_s DOUBLE,
            eval_accuracy DOUBLE,
            recorded_at TIMESTAMP NOT NULL
        );
        CREATE TABLE eval_cells (
            run_id VARCHAR NOT NULL,
            checkpoint VARCHAR,
            recipe VARCHAR,
            recipe_hash VARCHAR,
            task VARCHAR NOT NULL,
            mode VARCHAR,
            "G" INTEGER,
            "K" INTEGER,
            length BIGINT,
            train_length BIGINT,
            length_ratio DOUBLE,
            depth DOUBLE,
            pairs INTEGER,
            n INTEGER,
            correct INTEGER,
            accuracy DOUBLE,
            loss DOUBLE,
            tokens_per_s DOUBLE,
            seconds DOUBLE,
            recorded_at TIMESTAMP NOT NULL
        );
        """
    )
    con.execute(row_view("training", "train_steps", "t", ENVIRONMENT))
    con.execute(row_view("evaluation", "eval_cells", "c", ENVIRONMENT))


def eval_cells_token_accuracy(con: Connection) -> None:
    """Partial credit beside exact match: the fraction of scored tokens decoded right."""
    con.execute("ALTER TABLE eval_cells ADD COLUMN token_accuracy DOUBLE")
    # recreated so that the catalog lists the new column (the query would see it anyway)
    con.execute(row_view("evaluation", "eval_cells", "c", ENVIRONMENT))


def eval_cells_loss_spread(con: Connection) -> None:
    """A held-out loss's standard error over its sequences, and how many distinct sequences
    the data held (fewer than n: sequences were scored more than once)."""
    con.execute("ALTER TABLE eval_cells ADD COLUMN loss_se DOUBLE")
    con.execute("ALTER TABLE eval_cells ADD COLUMN distinct_sequences BIGINT")
    con.execute(row_view("evaluation", "eval_cells", "c", ENVIRONMENT))


def eval_cells_quality(con: Connection) -> None:
    """Text quality: a held-out loss in bits per byte, and genppl's cells (each names its own
    decoding: policy, threshold, sampling; what scored it; Gen-PPL with its interval, entropy,
    repeats, speed, steps used)."""
    for name, kind in (("bits_per_byte", "DOUBLE"), ("policy", "VARCHAR"),
                       ("threshold", "DOUBLE"), ("temperature", "DOUBLE"), ("top_p", "DOUBLE"),
                       ("prompt_length", "BIGINT"), ("scorer", "VARCHAR"),
                       ("gen_ppl", "DOUBLE"), ("gen_ppl_lo", "DOUBLE"), ("gen_ppl_hi", "DOUBLE"),
                       ("scored_tokens", "BIGINT"), ("entropy", "DOUBLE"),
                       ("entropy_se", "DOUBLE"), ("repeat_ngram", "DOUBLE"),
                       ("passes_per_token", "DOUBLE"), ("steps_per_block", "DOUBLE"),
                       ("ended_early", "INTEGER"), ("mauve", "DOUBLE")):
        con.execute(f"ALTER TABLE eval_cells ADD COLUMN {name} {kind}")
    con.execute(row_view("evaluation", "eval_cells", "c", ENVIRONMENT))


def runs_resumed_at(con: Connection) -> None:
    """When a run was last resumed: its process's start, which the liveness check compares
    with the process's own, so that started_at stays when the run began."""
    con.execute("ALTER TABLE runs ADD COLUMN resumed_at TIMESTAMP")


def eval_cells_harness(con: Connection) -> None:
    """lm-evaluation-harness metrics (`fsc eval --task harness`): a row per task and metric,
    with its standard error, the few-shot count, the harness version, whether the value rests
    on the diffusion bound (and its Monte Carlo draws), and where the weights came from."""
    for name, kind in (("harness_task", "VARCHAR"), ("metric", "VARCHAR"), ("value", "DOUBLE"),
                       ("value_se", "DOUBLE"), ("num_fewshot", "INTEGER"),
                       ("harness_version", "VARCHAR"), ("mc_samples", "INTEGER"),
                       ("bound", "BOOLEAN"), ("provenance", "VARCHAR")):
        con.execute(f"ALTER TABLE eval_cells ADD COLUMN {name} {kind}")
    con.execute(row_view("evaluation", "eval_cells", "c", ENVIRONMENT))


def eval_cells_suite(con: Connection) -> None:
    """The RULER-style suite (niah's variants, vt, cwe, fwe): each task's knobs and RULER's
    score (the fraction of the expected strings found in the decoded answer)."""
    for name, kind in (("variant", "VARCHAR"), ("needles", "INTEGER"),
                       ("distractors", "INTEGER"), ("hops", "INTEGER"), ("chains", "INTEGER"),
                       ("words", "INTEGER"), ("haystack", "VARCHAR"), ("score", "DOUBLE")):
        con.execute(f"ALTER TABLE eval_cells ADD COLUMN {name} {kind}")
    con.execute(row_view("evaluation", "eval_cells", "c", ENVIRONMENT))


def eval_cells_template(con: Connection) -> None:
    """The suite's prompts' wording (fsc's or RULER's template): the plain passkey's cells
    are told from niah's by it, so every store has the column its readers name."""
    con.execute("ALTER TABLE eval_cells ADD COLUMN IF NOT EXISTS template VARCHAR")  # (declared too)
    con.execute(row_view("evaluation", "eval_cells", "c", ENVIRONMENT))


def runs_stopped_s(con: Connection) -> None:
    """The seconds a run sat stopped (interrupted, failed or killed) before it was resumed,
    which its duration leaves out."""
    con.execute("ALTER TABLE runs ADD COLUMN stopped_s DOUBLE")


MIGRATIONS: list[Callable[[Connection], None]] = [
    create_runs_recipes_environments,
    create_profile_points_samples,
    create_artifacts,
    create_profile_view,
    create_bench_results,
    profile_view_follows_the_table,
    create_training_and_evaluation,
    eval_cells_token_accuracy,
    eval_cells_loss_spread,
    eval_cells_quality,
    runs_resumed_at,
    eval_cells_harness,
    eval_cells_suite,
    eval_cells_template,
    runs_stopped_s,
]


def migrate(con: Connection) -> list[str]:
    """Apply the missing migrations in one transaction; return the names applied."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)"
        )
        done = {v for (v,) in con.execute("SELECT version FROM schema_migrations").fetchall()}
        newest = max(done, default=0)
        if newest > len(MIGRATIONS):
            raise StoreError(
                f"the store's schema is version {newest} but this fsc knows {len(MIGRATIONS)};"
                " upgrade fsc to write to it"
            )
        applied = []
        for version, step in enumerate(MIGRATIONS, start=1):
            if version in done:
                continue
            step(con)
            con.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                [version, step.__name__, utcnow()],
            )
            applied.append(step.__name__)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return applied
