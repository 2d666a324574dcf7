"""`rbench` console script: one subcommand per module in rbench.commands.

Each command module exposes ``HELP: str``, ``add_arguments(parser)`` and
``run(args) -> int``. Errors rbench raises on purpose (RbenchError) print as one
line on stderr with exit status 2; Ctrl-C exits 130 after the command cleaned up.
"""
from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import sys
from collections.abc import Sequence

from rbench.errors import ConfigError, RbenchError


class UsageError(ConfigError):
    """A bad command line; the message already names the command."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one line instead of usage + exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")

# subcommand → module in rbench.commands (listed only when the module exists)
COMMANDS: dict[str, str] = {
    "run": "run",
    "validate": "validate",
    "plan": "plan",
    "perftest": "perftest",
    "reduce": "reduce",
    "report": "report",
    "stream-publish": "stream_publish",
    "amqp10": "amqp10",
    "history": "history",
    "regress": "regress",
    "scalability": "scalability",
    "nightly": "nightly",
    "compare": "compare",
}


def _available() -> dict[str, str]:
    return {
        name: f"rbench.commands.{mod}"
        for name, mod in COMMANDS.items()
        if importlib.util.find_spec(f"rbench.commands.{mod}") is not None
    }


@functools.lru_cache(maxsize=1)
def build_parser() -> argparse.ArgumentParser:
    """The whole command line, built once per process (main() may be called many times: tests, notebooks)."""
    parser = ArgumentParser(prog="rbench", description="Load generator and capacity planner for RabbitMQ, on Spark.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=ArgumentParser)
    for name, module_name in _available().items():
        module = importlib.import_module(module_name)
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP, add_help=getattr(module, "ADD_HELP", True),
                             **getattr(module, "PARSER_KWARGS", {}))   # e.g. perftest reads its own grammar
        module.add_arguments(cmd)
        cmd.set_defaults(_module=module)
    return parser


def _quiet_client_loggers() -> None:
    """aiormq and rstream log connection failures themselves; rbench reports them once, masked."""
    import logging

    for name in ("aiormq", "aio_pika", "rstream", "py4j"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _one_line(message: str) -> str:
    """The error as one line with anything URI-shaped masked: the last guard before the terminal."""
    from rbench.config.uri import mask_text

    return mask_text(" ".join(message.split()))


def main(argv: Sequence[str] | None = None) -> int:
    _quiet_client_loggers()
    command = "rbench"
    try:
        args = build_parser().parse_args(argv)
        command = f"rbench {args.command}"
        return int(args._module.run(args) or 0)
    except UsageError as exc:
        print(_one_line(str(exc)), file=sys.stderr)
        return 2
    except RbenchError as exc:
        print(_one_line(f"{command}: {exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:          # `rbench plan … | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
