"""Help text and the docs/perftest.md compatibility table, both generated from ``options``.

`python -m rbench.perftest.compat docs/perftest.md` rewrites the table between the
BEGIN/END markers of that file; tests/unit/test_perftest_grammar.py fails when the
committed file differs from what this module generates, so docs and parser cannot drift.
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from rbench.perftest.option import DIFFERS, GROUPS, HONOURED, NO_EFFECT, RBENCH, REFUSED, SOURCE, Option
from rbench.perftest.options import ALL_OPTIONS, PERFTEST_OPTIONS, RBENCH_OPTIONS, counts

BEGIN = "<!-- BEGIN GENERATED: python -m rbench.perftest.compat docs/perftest.md -->"
END = "<!-- END GENERATED -->"

HANDLING_WORDS = {HONOURED: "honoured", DIFFERS: "honoured, differs", NO_EFFECT: "accepted, no effect",
                  REFUSED: "refused", RBENCH: "rbench"}


def _usage(o: Option) -> str:
    names = ", ".join(o.names)
    if o.arg == "none":
        return names
    if o.arg == "optional":
        return f"{names} [{o.metavar}]"
    return f"{names} {o.metavar}" + (" …" if o.arg == "many" else "")


def help_text(metrics_only: bool = False, width: int = 100) -> str:
    """PerfTest's options in PerfTest's words, each with rbench's meaning beside it."""
    c = counts()
    lines = [
        "usage: rbench perftest [PerfTest options] [rbench options]",
        "",
        "Runs a RabbitMQ PerfTest command line as an rbench workload on Spark. Every PerfTest option is read as",
        "PerfTest reads it (exact names: -qq, -hst, --producers=2, -x 2). Each option shows PerfTest's description,",
        "then what rbench does: [honoured], [differs] (honoured with the stated difference), [no effect] (accepted,",
        "said so at run time) or [refused] (the run stops with 'not supported by rbench: <reason>').",
        f"Of PerfTest's {len(PERFTEST_OPTIONS)} options rbench honours {c[HONOURED]}, honours {c[DIFFERS]} with a "
        f"difference, accepts {c[NO_EFFECT]} without effect and refuses {c[REFUSED]}. Table: docs/perftest.md.",
    ]
    tags = {HONOURED: "honoured", DIFFERS: "differs", NO_EFFECT: "no effect", REFUSED: "refused", RBENCH: "rbench"}
    indent = " " * 34
    for group in GROUPS:
        if metrics_only and group != "metrics":
            continue
        opts = [o for o in ALL_OPTIONS if o.group == group]
        if not opts:
            continue
        lines += ["", f"{group}:" if group != "rbench" else "rbench's own options:"]
        for o in opts:
            usage = f"  {_usage(o)}"
            first = o.perftest or o.rbench
            head = usage.ljust(34) if len(usage) < 33 else usage + "\n" + indent
            body = textwrap.fill(first, width, initial_indent=head, subsequent_indent=indent, break_on_hyphens=False,
                                 break_long_words=False)
            lines.append(body)
            if o.perftest:
                lines.append(textwrap.fill(f"rbench [{tags[o.handling]}]: {o.rbench}", width, initial_indent=indent,
                                           subsequent_indent=indent + "  ", break_on_hyphens=False,
                                           break_long_words=False))
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """The compatibility table of docs/perftest.md."""
    c = counts()
    out = [
        f"Generated from `rbench/perftest/options.py`, the table the parser reads; the PerfTest column quotes "
        f"{SOURCE}.",
        "",
        f"**{len(PERFTEST_OPTIONS)} PerfTest options: {c[HONOURED]} honoured, {c[DIFFERS]} honoured with a stated "
        f"difference, {c[NO_EFFECT]} accepted without effect, {c[REFUSED]} refused with a reason.**",
    ]
    for group in GROUPS:
        opts = [o for o in PERFTEST_OPTIONS if o.group == group]
        if not opts:
            continue
        out += ["", f"### {group[0].upper()}{group[1:]}", "",
                "| option | value | PerfTest says | rbench | what rbench does |", "|---|---|---|---|---|"]
        for o in opts:
            names = " ".join(f"`{n}`" for n in o.names)
            value = {"none": "", "one": o.metavar, "optional": f"[{o.metavar}]", "many": f"{o.metavar} …"}[o.arg]
            out.append(f"| {names} | {_cell(value)} | {_cell(o.perftest)} | {HANDLING_WORDS[o.handling]} | "
                       f"{_cell(o.rbench)} |")
    out += ["", "### rbench's own options", "", "| option | value | what it does |", "|---|---|---|"]
    for o in RBENCH_OPTIONS:
        names = " ".join(f"`{n}`" for n in o.names)
        value = "" if o.arg == "none" else o.metavar + (" …" if o.arg == "many" else "")
        out.append(f"| {names} | {_cell(value)} | {_cell(o.rbench)} |")
    return "\n".join(out) + "\n"


def render_into(text: str) -> str:
    """``text`` with everything between BEGIN and END replaced by ``markdown()``."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"markers {BEGIN!r} … {END!r} not found")
    return text[: start + len(BEGIN)] + "\n" + markdown() + text[end:]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m rbench.perftest.compat docs/perftest.md", file=sys.stderr)
        return 2
    path = Path(argv[0])
    path.write_text(render_into(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
