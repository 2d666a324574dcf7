"""argparse value types shared by the commands: a bad number is refused at the command line, in one line."""
from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A whole number >= 1 (slots, tasks, counts): 0 or a negative count has no meaning, so it is refused."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def port(text: str) -> int:
    """A TCP port 0-65535 (0: any free port)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port 0-65535, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0-65535, got {value}")
    return value
