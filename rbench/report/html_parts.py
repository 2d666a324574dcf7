"""The HTML building blocks of report.html: its style sheet, inline images, tables, and the leaderboard
Markdown turned into HTML."""
from __future__ import annotations

import base64
import html
from pathlib import Path


def img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def table(headers: list[str], rows: list[list[str]], text_columns: tuple[int, ...] = ()) -> str:
    """An HTML table; ``text_columns`` (indexes) hold sentences and are set flush left."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td class='text'>{html.escape(c)}</td>" if i in text_columns else
                                    f"<td>{html.escape(c)}</td>" for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:20px 28px;color:#222;max-width:1500px}
h1{font-size:1.5em;margin:0 0 4px} h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#555;font-size:13px;margin:0 0 10px}
table{border-collapse:collapse;font-size:12px;margin:8px 0} th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f3f3f3;position:sticky;top:0} td:nth-child(-n+2){text-align:left}
.method{color:#555;font-size:13px} .notes li{color:#8a4b00} img{max-width:100%;border:1px solid #eee;margin:6px 0}
.scroll{overflow-x:auto} td.text{text-align:left;max-width:520px}
#verdict{background:#f7f9fc;border:1px solid #d5dde8;border-radius:6px;padding:6px 16px 10px}
#verdict h2{margin-top:.4em;border:0}
.headline{font-size:17px;margin:6px 0} .slo{font-size:13px;color:#333}
table.verdict{font-size:14px;width:100%} table.verdict td,table.verdict th{vertical-align:top;text-align:left}
table.verdict td.cost{font-weight:600;font-size:15px;text-align:right;white-space:nowrap}
table.verdict td.num{text-align:right;white-space:nowrap} table.verdict td.answer{font-weight:600;font-size:15px}
table.verdict td.why{font-size:12px;color:#444;max-width:420px}
tr.not_reached td.answer{color:#1f5fa8} tr.bracketed td.answer{color:#17693a} tr.none_met td.answer{color:#a33}
tr.generator td.answer{color:#8a4b00}
.plots{display:grid;grid-template-columns:1fr 1fr;gap:8px} .plots img{width:100%}
"""


def md_tables_to_html(md: str) -> str:
    """Render the leaderboard Markdown (headings, paragraphs, pipe tables) as HTML."""
    out: list[str] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if rows:
            out.append(table(rows[0], rows[2:]))
            rows.clear()

    for line in md.splitlines()[1:]:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
            continue
        flush()
        if line.startswith("## "):
            out.append(f"<h3>{html.escape(line[3:])}</h3>")
        elif line.strip():
            out.append(f"<p class='method'>{html.escape(line)}</p>")
    flush()
    return "\n".join(out)
