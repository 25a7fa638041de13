"""A run named on the command line: its whole id, an unambiguous prefix of it (as git takes a
commit), or `latest` (the newest run, of the kind the command needs where it needs one)."""

from __future__ import annotations

from fsc.errors import UsageError

LATEST = "latest"


def resolve_run(st, text: str, kind: str | None = None, option: str | None = None) -> str:
    """The run id `text` names in store `st` (fsc.store.Store); UsageError (one line, led by
    `option` when given) for none, or for a prefix that names several (the first few listed)."""
    lead = f"{option}: " if option else ""
    if not st.exists():
        raise UsageError(f"{lead}no run {text!r}: no store at {st.dir} yet")
    where = "" if kind is None else f" WHERE kind = '{kind}'"
    _, rows = st.query(f"SELECT run_id, kind FROM runs{where} ORDER BY started_at, run_id")
    ids = [r[0] for r in rows]
    what = f"{kind} run" if kind else "run"
    if text == LATEST:
        if not ids:
            raise UsageError(f"{lead}the store holds no {what} yet (`fsc runs` lists them)")
        return ids[-1]
    if text in ids:
        return text
    found = [i for i in ids if i.startswith(text)] if text else []
    if len(found) == 1:
        return found[0]
    if found:
        shown = ", ".join(found[:4]) + (", …" if len(found) > 4 else "")
        raise UsageError(f"{lead}{text!r} names {len(found)} {what}s ({shown}); give more of "
                         "the id")
    raise UsageError(f"{lead}no {what} {text[:80]!r} in {st.file} (`fsc runs` lists them; an "
                     f"id's first characters or `{LATEST}` will do)")
