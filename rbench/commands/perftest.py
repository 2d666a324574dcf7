"""`rbench perftest …`: a RabbitMQ PerfTest command line, run as an rbench workload.

PerfTest users keep their command lines. The line is read by PerfTest's own grammar
(rbench.perftest.grammar, not argparse: `-qq` is the quorum-queue flag, never `-q q`),
every option is looked up in one table (rbench.perftest.options) that says whether
rbench honours it, honours it with a stated difference, accepts it without effect or
refuses it with a reason, and the options become the same Workload a YAML file would
give (`--print-workload` shows it), run on Spark. See docs/perftest.md.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from rbench.commands.run import run_and_report
from rbench.config.load import workload_from_dict
from rbench.config.uri import AMQP_SCHEMES, STREAM_SCHEMES, mask_text, parse_uri
from rbench.coordinator.options import RunOptions
from rbench.perftest import compat, grammar, mapping

HELP = "Run a RabbitMQ PerfTest command line (-x -y -r -s -z -q -c -qq …) as an rbench workload."
ADD_HELP = False                               # -h is PerfTest's --uri; -?/--help is in the table
PARSER_KWARGS = {"prefix_chars": "\x01"}       # argparse passes every token through; grammar.parse reads them


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="PerfTest options (rbench perftest --help)")


def workload_dict(args: argparse.Namespace) -> dict[str, Any]:
    """The workload these PerfTest options describe, as the YAML mapping would be."""
    return mapping.to_workload(grammar.parse(args.argv)).workload


def credential_references(workload: dict[str, Any], prefix: str = "RBENCH_PASSWORD") -> dict[str, str]:
    """Replace every password in ``workload``'s cluster URIs by a ``${VAR}`` reference, in place.

    The printed file then runs as printed (rbench.config.load expands ``${VAR}``) without
    holding the secret. One variable per distinct password: RBENCH_PASSWORD, RBENCH_PASSWORD_2 …
    Returns {variable: the masked URI it belongs to}."""
    variables: dict[str, str] = {}          # password -> variable
    named: dict[str, str] = {}
    for cluster in workload.get("clusters", []):
        for key in ("uris", "stream_uris"):
            out = []
            for text in cluster.get(key, []):
                u = parse_uri(text, AMQP_SCHEMES + STREAM_SCHEMES)
                if not u.has_password:
                    out.append(text)
                    continue
                if u.password not in variables:
                    variable = prefix if not variables else f"{prefix}_{len(variables) + 1}"
                    variables[u.password] = variable
                    named[variable] = u.masked
                out.append(u.text(password=f"${{{variables[u.password]}}}"))
            if key in cluster:
                cluster[key] = out
    return named


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("rbench")
    except PackageNotFoundError:
        v = "unknown"
    return (f"rbench {v} (not PerfTest): reads RabbitMQ PerfTest 2.x command lines; see rbench perftest --help "
            f"and docs/perftest.md")


def run(args: argparse.Namespace) -> int:
    parsed = grammar.parse(args.argv)
    if parsed.has("compat-table"):
        sys.stdout.write(compat.markdown())
        return 0
    if parsed.has("help") or not args.argv:
        sys.stdout.write(compat.help_text())
        return 0
    if parsed.has("metrics-help"):
        sys.stdout.write(compat.help_text(metrics_only=True))
        return 0
    if parsed.has("version"):
        print(_version())
        return 0
    mapped = mapping.to_workload(parsed)
    workload = workload_from_dict(mapped.workload, source="perftest options")
    if parsed.has("print-workload"):
        shown = workload.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        if workload.rate_search is not None:       # the whole section: its SLO is the point, defaults included
            shown["rate_search"] = workload.rate_search.model_dump(mode="json", by_alias=True)
        references = credential_references(shown)
        for note in mapped.notes:
            print(f"# note: {mask_text(note)}")
        for variable, uri in references.items():
            print(f"# credentials: ${{{variable}}} is the password of {uri}; export {variable}=… (percent-encoded) "
                  f"before running this file")
        print(yaml.safe_dump(shown, sort_keys=False))
        return 0
    for note in mapped.notes:
        print(f"rbench perftest: note: {mask_text(note)}", flush=True)
    return run_and_report(workload, RunOptions(**mapped.run), "perftest")
