"""`fsc report`'s page (fsc.results.report) written out: as HTML, one self-contained file,
and as Markdown.

HTML: figures are inline SVG, the style sheet is inline, and the page has no script and no
reference to anything outside itself, so it opens anywhere, offline, and can be mailed or
attached as it is. Markdown: the same sections, with the figures as PNG files in a folder
beside it.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fsc import __version__
from fsc.results.report import Report, Table

# ---- HTML ------------------------------------------------------------------------------------

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1b1b;
       max-width: 1200px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
.meta { color: #666; }
figure { margin: 1.2em 0; }
figure svg { width: 100%; height: auto; }
details pre { background: #f7f7f7; padding: 0.5em 0.8em; overflow-x: auto; }
figcaption { color: #555; font-size: 0.92em; }
.missing { color: #8a5a00; background: #fff6e0; padding: 0.4em 0.7em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }
th { background: #f4f4f4; }
td:first-child, th:first-child { text-align: left; }
td.text { text-align: left; font-family: ui-monospace, monospace; word-break: break-all; }
.note { color: #555; font-size: 0.9em; }
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _table_html(t: Table) -> str:
    parts = [f"<h3>{_e(t.title)}</h3>"]
    if t.rows:
        head = "".join(f"<th>{_e(c)}</th>" for c in t.columns) if any(t.columns) else ""
        parts.append("<table>" + (f"<thead><tr>{head}</tr></thead>" if head else "") + "<tbody>")
        for row in t.rows:
            cells = []
            for i, v in enumerate(row):
                cls = ' class="text"' if not any(t.columns) and i == 1 else ""
                cells.append(f"<td{cls}>{_e(v)}</td>")
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</tbody></table>")
    if t.note:
        parts.append(f'<p class="note">{_e(t.note)}</p>')
    parts += [f"<details><summary>{_e(name)}</summary><pre>{_e(text)}</pre></details>"
              for name, text in t.details]
    return "\n".join(parts)


def to_html(r: Report) -> str:
    body = [f"<h1>{_e(r.title)}</h1>",
            f'<p class="meta">fsc {_e(__version__)} · {_e(r.generated)} · runs '
            f"{_e(', '.join(r.run_ids))}</p>"]
    if r.note:
        body.append(f'<p class="note">{_e(r.note)}</p>')
    seen: dict[str, int] = {}
    for s in r.sections:
        body.append(f"<h2>{_e(s.title)}</h2>")
        if s.text:
            body.append(f"<p>{_e(s.text)}</p>")
        for f in s.figures:
            if f.missing:
                body.append(f'<p class="missing">{_e(f.kind)}: not drawn ({_e(f.missing)})</p>')
            else:
                seen[f.kind] = seen.get(f.kind, 0) + 1  # a second latency figure: fig-latency-2
                anchor = f"fig-{f.kind}" + (f"-{seen[f.kind]}" if seen[f.kind] > 1 else "")
                body.append(f'<figure id="{_e(anchor)}">{f.svg}'
                            f"<figcaption>{_e(f.caption)}</figcaption></figure>")
        body += [_table_html(t) for t in s.tables]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(r.title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


# ---- Markdown --------------------------------------------------------------------------------

def _md(text: Any) -> str:
    """A table cell: pipes escaped, no line breaks."""
    return " ".join(str(text).split()).replace("|", "\\|")


FIGURE_FILE = re.compile(r"\d{2,}-[a-z_]+\.png")  # a figure's file as to_markdown names it


def to_markdown(r: Report, folder: Path, folder_ref: str) -> str:
    """The report as markdown; figures are written as PNG files into `folder`, which the
    markdown names as `folder_ref` (relative to the markdown file), after an earlier report's
    figures there are removed (any other file is kept)."""
    for stale in folder.iterdir():
        if FIGURE_FILE.fullmatch(stale.name) and stale.is_file():
            stale.unlink()
    lines = [f"# {r.title}", "", f"fsc {__version__} · {r.generated} · runs "
             f"{', '.join(r.run_ids)}", ""] + ([r.note, ""] if r.note else [])
    drawn = 0  # figures are numbered in the order they come, over the whole report
    for s in r.sections:
        lines += [f"## {s.title}", ""]
        if s.text:
            lines += [s.text, ""]
        for f in s.figures:
            if f.missing:
                lines += [f"*{f.kind}: not drawn ({f.missing})*", ""]
                continue
            drawn += 1
            name = f"{drawn:02d}-{f.kind}.png"
            (folder / name).write_bytes(f.png)
            # percent-encoded: a Markdown link ends at a space (a report named "my notes.md")
            lines += [f"![{f.kind}]({quote(f'{folder_ref}/{name}')})", "", f"*{f.caption}*", ""]
        for t in s.tables:
            lines += [f"### {t.title}", ""]
            if t.rows:
                cols = t.columns if any(t.columns) else ["", ""]
                lines.append("| " + " | ".join(_md(c) for c in cols) + " |")
                lines.append("|" + "|".join(" --- " for _ in cols) + "|")
                lines += ["| " + " | ".join(_md(v) for v in row) + " |" for row in t.rows]
                lines.append("")
            if t.note:
                lines += [t.note, ""]
            for name, text in t.details:
                lines += [f"{name}:", "", "~~~~", text.rstrip("\n"), "~~~~", ""]
    return "\n".join(lines)
