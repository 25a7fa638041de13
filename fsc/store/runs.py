"""The run lifecycle and the run listing, Store's methods for them (mixed into fsc.store.Store):
start a run or a whole session of one, finish it, resume it (`--resume`), list runs (`fsc runs`),
and remove or close one (`fsc runs rm`, `fsc runs close`). Each write is one transaction of
Store._transaction, as every other write of the store."""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from fsc.errors import NothingToDo, StoreError, UsageError
from fsc.store.connect import one_line, utcnow
from fsc.store.process import process_state, run_process
from fsc.store.rows import ENV_FIELDS, check_choice, insert
from fsc.store.session import RunSession

RUN_END_STATUSES = ("finished", "failed", "interrupted")
# What `fsc runs` shows: a run still marked running whose process is gone is "dead".
RUN_LIST_STATUSES = ("running", "dead", *RUN_END_STATUSES)
# When a run last stored a row of any kind: where a killed run's time ends.
_ROW_TIMES = (("profile_points", "ended_at"), ("train_steps", "recorded_at"),
              ("eval_cells", "recorded_at"), ("bench_results", "recorded_at"))


def _last_row_at(run: str) -> str:
    """SQL for the time run `run` (an SQL expression) last stored a row; NULL for none."""
    return "greatest(" + ", ".join(f"(SELECT max({col}) FROM {table} x WHERE x.run_id = {run})"
                                   for table, col in _ROW_TIMES) + ")"


def _row_count(run: str) -> str:
    """SQL for the rows run `run` (an SQL expression) holds, of every kind."""
    return " + ".join(f"(SELECT count(*) FROM {table} x WHERE x.run_id = {run})"
                      for table, _ in _ROW_TIMES)


# How a session runs, which a resume may change (fsc profile --resume ID --workers 4): kept in
# the run's config as it began, and each change in its `resumes`
SESSION_KEYS = ("executor", "workers", "cpu_share")


def _session_change(config: dict, session: dict) -> dict:
    """What of SESSION_KEYS `session` sets otherwise than the run last ran (its config, then
    its resumes in order)."""
    last = {k: config.get(k) for k in SESSION_KEYS}
    for resume in config.get("resumes", []):
        last.update({k: v for k, v in resume.items() if k in SESSION_KEYS})
    return {k: session[k] for k in SESSION_KEYS if k in session and session[k] != last[k]}


class RunLifecycle:
    """Store's run methods; they use its path (dir, file, exists, behind), connections (_open,
    _transaction) and writes (register_recipe, register_environment)."""

    dir: Path
    file: Path

    def start_run(self, kind: str, command: str, env_id: str | None, config: dict,
                  started: datetime | None = None) -> str:
        """Record a new run in status 'running'; return its run_id. `started`: when its work
        began, if before now (a model loaded first); now else."""
        now = utcnow()
        run_id = f"{now:%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"
        row = {"run_id": run_id, "kind": kind, "command": command, "status": "running",
               "started_at": started or now, "pid": os.getpid(), "host": socket.gethostname(),
               "env_id": env_id, "config": config}
        with self._transaction() as con:
            insert(con, "runs", row)
        return run_id

    @contextmanager
    def run(self, kind: str, command: str, config: dict, *, recipes=(),
            environment: dict[str, Any] | None = None,
            resume: str | None = None, started: datetime | None = None) -> Iterator[RunSession]:
        """A run's session (fsc.store.session): `recipes` (fsc Recipe objects) and `environment`
        (fsc.provenance.environment()) registered, the run started (or profile run `resume`
        claimed again, see resume_run), and on leaving marked finished, failed or interrupted."""
        for r in recipes:
            self.register_recipe(r.name, r.recipe_hash, r.to_yaml(), r.layer_plan)
        env_id = self.register_environment(environment) if environment is not None else None
        if resume is None:
            run_id = self.start_run(kind, command, env_id, config, started)
        else:
            self.resume_run(resume, env_id, kind, config)
            run_id = resume
        session = RunSession(self, run_id)
        try:
            yield session
        except BaseException as e:
            session._close(e)
            raise
        session._close(None)

    def finish_run(self, run_id: str, status: str = "finished", error: str | None = None,
                   points: list[int] | None = None) -> None:
        """Mark a run finished, failed or interrupted. With `points` (the ids add_point returned
        to this process for the run), first check that each is in the store under the run: if
        one is not, the run is marked failed instead, naming them, and StoreError is raised (a
        row lost without an error is the worst failure a store can have)."""
        check_choice("run status", status, RUN_END_STATUSES)
        lost: list[int] = []
        with self._transaction() as con:
            if points:
                found = {pid for (pid,) in con.execute(
                    "SELECT point_id FROM profile_points WHERE run_id = ? AND point_id IN"
                    " (SELECT unnest(?::BIGINT[]))", [run_id, list(points)]).fetchall()}
                lost = sorted(set(points) - found)
            if lost:
                status, error = "failed", (f"{len(lost)} of {len(set(points))} points this "
                                           f"process stored are missing (point ids {lost[:10]})")
            done = con.execute(
                "UPDATE runs SET status = ?, ended_at = ?, error = ? WHERE run_id = ?"
                " RETURNING run_id",
                [status, utcnow(), error, run_id],
            ).fetchall()
            if not done:
                raise ValueError(f"no run {run_id!r} in {self.file}")
        if lost:
            raise StoreError(f"run {run_id}: {error} in {self.file}; the run is marked failed")

    # ---- resuming a run (`fsc profile --resume`, `fsc eval --resume`) ---------------------

    def run_config(self, run_id: str, kind: str = "profile") -> dict[str, Any]:
        """The stored config of `kind` run `run_id` if it may be resumed (see resume_run)."""
        self._refuse_without_store(run_id)
        with self._open(write=False) as con:
            return self._resumable(con, run_id, kind)

    def resume_run(self, run_id: str, env_id: str | None, kind: str = "profile",
                   session: dict[str, Any] | None = None) -> dict[str, Any]:
        """Claim `kind` run `run_id` for this process and return its config: status back to
        'running' with this pid and host, and resumed_at now (the liveness check compares it
        with the process's own start; started_at stays when the run began). Check and claim are one transaction, so of two
        processes resuming one run only one wins. UsageError when the run is unknown, of
        another kind, still running, or recorded in another environment; NothingToDo when it
        finished. `session`: the config this resume would have started the run with; how it
        runs (SESSION_KEYS: the executor, its workers, the CPU share) where that is not how
        the run last ran is added to the config's `resumes`, with when and from which row."""
        with self._transaction_on_existing(run_id) as con:
            config = self._resumable(con, run_id, kind)
            (was,) = con.execute("SELECT env_id FROM runs WHERE run_id = ?", [run_id]).fetchone()
            if was is not None and was != env_id:
                get = f"SELECT {', '.join(ENV_FIELDS)} FROM environments WHERE env_id = ?"
                old, new = (con.execute(get, [e]).fetchone() for e in (was, env_id))
                diff = "; ".join(f"{c} {a} -> {b}" for c, a, b in zip(ENV_FIELDS, old, new,
                                                                       strict=True) if a != b)
                raise UsageError(f"run {run_id} was measured in another environment ({diff}); "
                                 "start a new run instead")
            # the time it sat stopped: from its end (a killed run's: its last row, or its last
            # resume where it stored none since) to now, which its duration leaves out
            stopped_since = ("coalesce(ended_at, greatest(coalesce("
                             f"{_last_row_at('$run')}, started_at), coalesce(resumed_at, "
                             "started_at)))")
            con.execute("UPDATE runs SET status = 'running', pid = $pid, host = $host,"
                        " resumed_at = $now, ended_at = NULL, error = NULL, stopped_s ="
                        " coalesce(stopped_s, 0) + greatest(0, date_diff('microsecond',"
                        f" {stopped_since}, $now) / 1e6) WHERE run_id = $run",
                        {"pid": os.getpid(), "host": socket.gethostname(), "now": utcnow(),
                         "run": run_id})
            if changed := _session_change(config, session or {}):
                rows = con.execute(f"SELECT {_row_count('$run')}", {"run": run_id}).fetchone()
                config.setdefault("resumes", []).append(
                    {"at": utcnow().isoformat(timespec="seconds"), "rows_before": rows[0],
                     **changed})
                con.execute("UPDATE runs SET config = ? WHERE run_id = ?",
                            [json.dumps(config), run_id])
        return config

    def _resumable(self, con: duckdb.DuckDBPyConnection, run_id: str,
                   kind: str) -> dict[str, Any]:
        status = self._quiet_run_status(con, run_id, force=None)
        was, config = con.execute("SELECT kind, config FROM runs WHERE run_id = ?",
                                  [run_id]).fetchone()
        if was != kind:
            raise UsageError(f"run {run_id} is {'an' if was[0] in 'aeiou' else 'a'} {was} "
                             f"run; fsc {kind} --resume continues a {kind} run")
        if status == "finished":  # idempotent: a retry or a requeued job finds it done
            what = "point" if kind == "profile" else "cell"
            raise NothingToDo(f"run {run_id} finished; every {what} of it is stored: nothing "
                              "to do", run_id=run_id, status=status)
        return json.loads(config or "{}")

    def point_keys(self, run_id: str) -> dict[tuple, int]:
        """How many points run `run_id` holds at each (recipe_hash, S, B, G, K, dtype, backend,
        device): what a resumed sweep skips."""
        with self._open(write=False) as con:
            rows = con.execute("SELECT recipe_hash, S, B, G, K, dtype, backend, device, count(*)"
                               " FROM profile_points WHERE run_id = ? GROUP BY ALL",
                               [run_id]).fetchall()
        return {tuple(r[:-1]): r[-1] for r in rows}

    # ---- listing runs (`fsc runs`) ------------------------------------------------------

    def runs(
        self, limit: int = 20, *, kind: str | None = None, status: str | None = None,
        recipe: str | None = None, run_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Most recent runs first, with point counts, liveness and duration.

        Filters: `kind` ('profile', 'bench', ...); `status`, one of RUN_LIST_STATUSES, where
        'dead' is a run still marked running whose process is gone and 'running' one whose
        process is alive or on another host; `recipe`, a recipe name the run has points of or
        was asked to measure, itself or changed by --set (named `recipe+key=value`); `run_id`,
        that run alone.
        """
        check_choice("run status", status, (None, *RUN_LIST_STATUSES))
        where, params = [], []
        if run_id is not None:
            where.append("r.run_id = ?")
            params.append(run_id)
        if kind is not None:
            where.append("r.kind = ?")
            params.append(kind)
        if status is not None:
            where.append("r.status = ?")
            params.append("running" if status == "dead" else status)
        if recipe is not None:
            named = "({0} = ? OR starts_with({0}, ?))"  # the recipe, or it changed by --set
            where.append(
                "(r.run_id IN (SELECT run_id FROM profile_points WHERE "
                + named.format("recipe") + ") OR CASE WHEN json_valid(r.config) THEN EXISTS"
                " (SELECT 1 FROM unnest(json_extract_string(r.config, '$.recipes[*]')) AS u(x)"
                " WHERE " + named.format("x") + ") OR "
                + named.format("json_extract_string(r.config, '$.recipe')") + " ELSE false END)"
            )
            params += [recipe, recipe + "+"] * 3
        live = status in ("running", "dead")  # told apart below, after the query
        sql = f"""
            SELECT r.run_id, r.kind, r.status, r.started_at, r.resumed_at, r.ended_at,
                   r.stopped_s, r.pid, r.host,
                   r.command, r.error,
                   count(p.point_id) FILTER (WHERE p.status = 'ok') AS points_ok,
                   count(p.point_id) FILTER (WHERE p.status = 'oom') AS points_oom,
                   count(p.point_id) FILTER (WHERE p.status = 'error') AS points_error,
                   max(p.ended_at) AS last_point_at, {_last_row_at("r.run_id")} AS last_row_at,
                   (SELECT count(*) FROM bench_results b WHERE b.run_id = r.run_id)
                   AS bench_figures,
                   (SELECT count(*) FROM train_steps t WHERE t.run_id = r.run_id)
                   + (SELECT count(*) FROM eval_cells c WHERE c.run_id = r.run_id) AS rows_logged,
                   (SELECT max(step) FROM train_steps t WHERE t.run_id = r.run_id) AS last_step,
                   CASE WHEN r.kind = 'train' AND json_valid(r.config)
                        THEN TRY_CAST(json_extract(r.config, '$.steps') AS BIGINT) END AS steps
            FROM runs r LEFT JOIN profile_points p USING (run_id)
            {"WHERE " + " AND ".join(where) if where else ""}
            GROUP BY ALL ORDER BY r.started_at DESC, r.run_id DESC
            {"" if live else f"LIMIT {int(limit)}"}
            """
        with self._open(write=False, sandbox=True) as con:
            try:
                cur = con.execute(sql, params)
                cols, rows = [d[0] for d in cur.description], cur.fetchall()
            except duckdb.Error as e:
                raise StoreError(f"reading runs from {self.file} failed{self.behind()}: "
                                 f"{one_line(e)}") from e
        out = []
        for values in rows:
            run = dict(zip(cols, values, strict=True))
            run["process"] = run_process(run)
            if run["ended_at"] is not None:
                end = run["ended_at"]
            elif run["process"] == "alive":
                end = utcnow()
            else:  # a killed run: it ended with the last row it stored
                end = run["last_row_at"]
            run["duration_s"] = ((end - run["started_at"]).total_seconds()
                                 - (run["stopped_s"] or 0) if end else None)  # working time
            if not live or (run["process"] == "dead") == (status == "dead"):
                out.append(run)
        return out[:limit]

    # ---- removing and closing runs (`fsc runs rm`, `fsc runs close`) ---------------------

    def remove_run(self, run_id: str, force: bool = False) -> dict[str, int]:
        """Delete run `run_id` with its points, their samples and its benchmark figures in one
        transaction; return how many rows of each went. Refused for a run whose process is
        alive, and without `force` for one marked running on another host."""
        with self._transaction_on_existing(run_id) as con:
            self._quiet_run_status(con, run_id, force)
            points = "SELECT point_id FROM profile_points WHERE run_id = $run"
            steps = (  # samples before their points
                ("samples", f"DELETE FROM samples WHERE point_id IN ({points})"),
                ("points", "DELETE FROM profile_points WHERE run_id = $run"),
                ("bench_results", "DELETE FROM bench_results WHERE run_id = $run"),
                ("train_steps", "DELETE FROM train_steps WHERE run_id = $run"),
                ("eval_cells", "DELETE FROM eval_cells WHERE run_id = $run"),
            )
            removed = {what: con.execute(sql, {"run": run_id}).fetchone()[0]
                       for what, sql in steps}
            con.execute("DELETE FROM runs WHERE run_id = ?", [run_id])
        return removed

    def close_run(self, run_id: str, force: bool = False) -> None:
        """Mark run `run_id`, still 'running' though its process is gone, 'interrupted', ending
        at the last row it stored (a point, training step, eval cell or figure; else at its
        start). Refused when the process is alive, and without `force` when the run is marked
        running on another host (fsc cannot tell there)."""
        with self._transaction_on_existing(run_id) as con:
            status = self._quiet_run_status(con, run_id, force)
            if status != "running":
                raise UsageError(f"run {run_id} has ended ({status}); only a run still marked "
                                 "running can be closed")
            con.execute(
                "UPDATE runs SET status = 'interrupted', error = $error, ended_at = coalesce("
                f" {_last_row_at('$run')}, started_at) WHERE run_id = $run",
                {"run": run_id,
                 "error": "its process ended without closing the run (closed by fsc runs close)"},
            )

    # ---- what resuming, removing and closing a run check first ---------------------------

    def check_settled(self, run_id: str, force: bool = False) -> None:
        """UsageError unless run `run_id` may be removed or closed now (see _quiet_run_status):
        what `fsc runs rm` checks before it asks."""
        self._refuse_without_store(run_id)
        with self._open(write=False) as con:
            self._quiet_run_status(con, run_id, force)

    def _refuse_without_store(self, run_id: str) -> None:
        """UsageError when there is no store yet: never create a store just to say a run is
        not in it."""
        if not self.exists():
            raise UsageError(f"no run {run_id!r}: no store at {self.dir} yet")

    @contextmanager
    def _transaction_on_existing(self, run_id: str) -> Iterator[duckdb.DuckDBPyConnection]:
        self._refuse_without_store(run_id)
        with self._transaction() as con:
            yield con

    def _quiet_run_status(self, con: duckdb.DuckDBPyConnection, run_id: str,
                          force: bool | None) -> str:
        """The stored status of `run_id` once it is sure no process still writes to it:
        UsageError for an unknown run, for a running one whose process is alive, and without
        `force` for one marked running on another host (None: a command with no --force, a
        resume, which is told to close the run first)."""
        row = con.execute("SELECT status, pid, host, coalesce(resumed_at, started_at) FROM runs"
                          " WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            raise UsageError(f"no run {run_id!r} in {self.file} (`fsc runs` lists them)")
        status, pid, host, started_at = row
        process = process_state(pid, host, started_at) if status == "running" else None
        if process == "alive":
            raise UsageError(f"run {run_id} is still running (pid {pid}); stop it first")
        if process == "unknown" and not force:
            then = ("pass --force if it is not" if force is False else
                    f"if it is not, close it first: fsc runs close {run_id} --force")
            raise UsageError(f"run {run_id} is marked running on host {host}, where fsc cannot "
                             f"tell whether it is alive; {then}")
        return status
