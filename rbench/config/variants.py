"""A workload cluster's ``variant: NAME``: the broker variant's files in conf/variants/, read at load.

scripts/variant.sh starts the node from the same files (NAME.conf, NAME.advanced.config, NAME.feature_flags);
this module reads them so the run can record what the variant was (rbench.samples.variant) and refuse a name
with no files before any load, in one line naming the field and the variants there are.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from rbench.errors import ConfigError
from rbench.samples.variant import BrokerVariant

_CHECKOUT = Path(__file__).resolve().parents[2] / "conf" / "variants"
NAME_PATTERN = r"^[a-z0-9_]+$"             # scripts/variant.sh's check_name


def variants_dir() -> Path:
    """RBENCH_VARIANTS_DIR (as scripts/variant.sh reads it), else the checkout's conf/variants, else the
    installed copy under <prefix>/share/rbench (pyproject's data-files)."""
    if env := os.environ.get("RBENCH_VARIANTS_DIR"):
        return Path(env)
    return _CHECKOUT if _CHECKOUT.is_dir() else Path(sys.prefix) / "share" / "rbench" / "conf" / "variants"


def variant_names(directory: Path | None = None) -> list[str]:
    d = directory or variants_dir()
    return sorted(p.name[:-len(".conf")] for p in d.glob("*.conf")) if d.is_dir() else []


def load_variant(name: str, directory: Path | None = None) -> BrokerVariant:
    """The variant NAME's settings; ConfigError when the name is malformed or has no NAME.conf."""
    d = directory or variants_dir()
    if not re.match(NAME_PATTERN, name):
        raise ConfigError(f"variant: expected a name of lower-case letters, digits and _, got {name!r}")
    conf = d / f"{name}.conf"
    if not conf.is_file():
        known = ", ".join(variant_names(d)) or "none"
        raise ConfigError(f"variant: no variant {name!r}: {conf} does not exist (variants in {d}: {known})")

    def optional(suffix: str) -> str | None:
        path = d / f"{name}{suffix}"
        return path.read_text(encoding="utf-8") if path.is_file() else None

    return BrokerVariant.from_texts(name, conf.read_text(encoding="utf-8"), optional(".advanced.config"),
                                    optional(".feature_flags"), str(d))
