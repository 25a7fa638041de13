"""A run named on the command line: its whole id, an unambiguous prefix of it (as git takes a
commit), a prefix of its tail (the random part after the start time: `3f35e7` names
`20261204T040650-3f35e7`), or `latest` (the newest run, of the kind the command needs where it
needs one)."""

from __future__ import annotations

from fsc.errors import UsageError

LATEST = "latest"


def _tail(run_id: str) -> str:
    """The part of an id after its start time (`3f35e7` of `20261204T040650-3f35e7`)."""
    return run_id.rpartition("-")[2]


def resolve_run(st, text: str, kind: str | None = None, option: str | None = None) -> str:
    """The run id `text` names in store `st` (fsc.store.Store): itself when it is a whole id,
    else the one run of `kind` (any kind when None) whose id or tail starts with it; `latest`
    is the newest run of `kind`. UsageError (one line, led by `option` when given) for none,
    or for text that names several (the first few listed)."""
    lead = f"{option}: " if option else ""
    if not st.exists():
        raise UsageError(f"{lead}no run {text!r}: no store at {st.dir} yet")
    _, rows = st.query("SELECT run_id, kind FROM runs ORDER BY started_at, run_id")
    if text in (r[0] for r in rows):  # a whole id: the command says if its kind will not do
        return text
    ids = [r[0] for r in rows if kind is None or r[1] == kind]
    what = f"{kind} run" if kind else "run"
    if text == LATEST:
        if not ids:
            raise UsageError(f"{lead}the store holds no {what} yet (`fsc runs` lists them)")
        return ids[-1]
    found = [i for i in ids if i.startswith(text) or _tail(i).startswith(text)] if text else []
    if len(found) == 1:
        return found[0]
    if found:
        shown = ", ".join(found[:4]) + (", …" if len(found) > 4 else "")
        raise UsageError(f"{lead}{text!r} names {len(found)} {what}s ({shown}); give more of "
                         "the id")
    other = [r for r in rows if kind is not None and text and r[1] != kind
             and (r[0].startswith(text) or _tail(r[0]).startswith(text))]
    if len(other) == 1:  # the id of a run of another kind: say so, not 'no run'
        raise UsageError(f"{lead}{text[:80]!r} names {other[0][1]} run {other[0][0]}; this takes "
                         f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind} run (`fsc runs --kind {kind}` lists them)")
    raise UsageError(f"{lead}no {what} {text[:80]!r} in {st.file} (`fsc runs` lists them; the "
                     f"first characters of an id or of its tail, or `{LATEST}`, will do)")
