"""The broker variant a cluster's run was measured on: run.json's ``clusters[].variant``.

A variant (conf/variants/NAME.*, started by scripts/variant.sh) is a RabbitMQ node run with settings of
its own: raised flow-control credits, or Khepri for the metadata store. "4.0 tuned is 8× faster" means
nothing unless the run says what "tuned" was, and conf/variants/ may have changed since; so run.json keeps
the settings' text as the run read them, not only the name. The broker's own facts (version, feature
flags as the broker reports them) stay in ``clusters[].broker``: this record is what was asked for.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rbench.samples.fields import Fields

_ERLANG_COMMENT = re.compile(r'("(?:[^"\\]|\\.)*")|%[^\n]*')


def _settings_lines(text: str) -> tuple[str, ...]:
    """A rabbitmq.conf snippet's settings: its lines without comments and blanks."""
    return tuple(s for line in text.splitlines() if (s := line.strip()) and not s.startswith("#"))


def erlang_compact(text: str) -> str:
    """An advanced.config term on one line, without %-comments (strings kept whole)."""
    no_comments = _ERLANG_COMMENT.sub(lambda m: m.group(1) or "", text)
    return " ".join(no_comments.split())


@dataclass(frozen=True)
class BrokerVariant:
    """A variant's name and settings: rabbitmq.conf lines, the advanced.config text and the feature flags
    enabled after boot, as read from ``source`` (the files) when the run started."""

    name: str
    rabbitmq_conf: tuple[str, ...] = ()          # setting lines of NAME.conf (comments dropped)
    advanced_config: str | None = None           # NAME.advanced.config as written; None: the file is absent
    feature_flags: tuple[str, ...] = ()          # NAME.feature_flags: enabled once the node has booted
    source: str | None = None                    # the directory the files were read from

    def settings(self) -> str:
        """'advanced.config [{rabbit, [...]}].; feature flags after boot: khepri_db' (or 'the broker's defaults')."""
        parts = []
        if self.rabbitmq_conf:
            parts.append("rabbitmq.conf " + "; ".join(self.rabbitmq_conf))
        if self.advanced_config is not None and (term := erlang_compact(self.advanced_config)) not in ("", "[]."):
            parts.append(f"advanced.config {term}")
        if self.feature_flags:
            parts.append("feature flags after boot: " + ", ".join(self.feature_flags))
        return "; ".join(parts) or "the broker's defaults"

    def line(self) -> str:
        return f"variant {self.name}: {self.settings()}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "rabbitmq_conf": list(self.rabbitmq_conf), "advanced_config": self.advanced_config,
                "feature_flags": list(self.feature_flags), "source": self.source}

    @classmethod
    def from_json(cls, data: object, where: str) -> BrokerVariant:
        f = Fields(data, where)
        return cls(name=f.text("name"), rabbitmq_conf=f.texts("rabbitmq_conf"),
                   advanced_config=f.opt_text("advanced_config"), feature_flags=f.texts("feature_flags"),
                   source=f.opt_text("source"))

    @classmethod
    def from_texts(cls, name: str, conf: str, advanced: str | None, flags: str | None, source: str) -> BrokerVariant:
        """From the files' contents (rbench.config.variants reads them)."""
        flag_names = tuple(s for line in (flags or "").splitlines() if (s := line.split("#")[0].strip()))
        return cls(name=name, rabbitmq_conf=_settings_lines(conf), advanced_config=advanced,
                   feature_flags=flag_names, source=source)
