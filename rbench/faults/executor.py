"""Who carries out a fault: the local cluster's script, or a cluster's own command templates.

Both run one external command per verb (kill, start, stop, pause, resume) with a timeout and
capture its output; a command that fails or hangs is a failed action with a one-line reason,
never an exception, so the run goes on and the coordinator still brings the node back.

* local: ``cluster.sh`` shipped inside this package (scripts/cluster.sh runs the same file), so a
  pip-installed rbench reaches the local cluster without a checkout; rabbit-i maps to its node i, and
  rabbit4-i to node i of its RabbitMQ 4.0 cluster (the script run with RBENCH_CLUSTER_VERSION=4).
* command: the workload's templates, e.g. ``ssh {host} sudo pkill -9 -f beam.smp``, formatted with
  the node's name, the cluster's name and the node's own placeholders, each shell-quoted (one argument
  whatever it holds; a placeholder inside quotes is refused, since quotes there would not hold).
"""
from __future__ import annotations

import os
import shlex
import signal
import string
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rbench.config.types import FaultControlPlan
from rbench.config.uri import mask_text
from rbench.faults.terms import LocalNode, local_node

MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class ActionResult:
    """What one command did: when it ran (time.time_ns()), whether it succeeded, why not."""

    verb: str
    node: str
    command: str               # as run (masked), for the fault log
    ok: bool
    error: str | None          # one line: "kill rabbit-2: exit 1: cluster: rabbit-2@localhost is not running"
    t_start_ns: int
    t_end_ns: int
    output: str                # stdout and stderr, masked


class FaultExecutor(Protocol):
    """Runs one verb on one node of a cluster; blocks until the command ends or times out."""

    timeout_s: float

    def run(self, verb: str, node: str) -> ActionResult: ...

    def check(self, nodes: list[str]) -> str | None:
        """Before the run: why the nodes cannot be acted on (None: they can, as far as can be known)."""
        ...


def script_path() -> Path:
    """The local cluster script installed with the package (scripts/cluster.sh runs this file)."""
    return Path(__file__).with_name("cluster.sh")


def run_command(verb: str, node: str, command: str | list[str], timeout_s: float,
                env: dict[str, str] | None = None) -> ActionResult:
    """Run ``command`` (a shell line, or an argv) in its own session; on timeout kill its whole group.
    ``env``: variables set on top of rbench's own environment."""
    shown = mask_text(command if isinstance(command, str) else shlex.join(command))
    t_start = time.time_ns()
    try:
        proc = subprocess.Popen(command, shell=isinstance(command, str), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                                env={**os.environ, **env} if env else None,
                                start_new_session=True)      # a Ctrl-C meant for rbench must not cut a restore short
    except OSError as exc:
        t = time.time_ns()
        return ActionResult(verb, node, shown, False, f"{verb} {node}: cannot run: {exc.strerror or exc}", t_start, t, "")
    try:
        output, _ = proc.communicate(timeout=timeout_s)
        error = None if proc.returncode == 0 else f"exit {proc.returncode}"
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        output, _ = proc.communicate()
        error = f"timed out after {timeout_s:g} s"
    t_end = time.time_ns()
    output = mask_text(output or "")
    if error is not None:
        last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")
        error = f"{verb} {node}: {error}" + (f": {last}" if last else "")
        error = error[:MAX_ERROR_CHARS]
    return ActionResult(verb, node, shown, error is None, error, t_start, t_end, output)


# verb → cluster.sh subcommand
_LOCAL_VERBS = {"kill": "kill", "start": "start-node", "stop": "stop-node", "pause": "pause", "resume": "resume"}


class LocalExecutor:
    """The nodes of cluster.sh's local clusters on this machine: rabbit-1 … rabbit-N (3.10) and rabbit4-1 …
    (RabbitMQ 4.0), each through the script run with its layout's RBENCH_CLUSTER_VERSION (RBENCH_CLUSTER_DIR
    as the script reads it)."""

    def __init__(self, timeout_s: float, script: Path | None = None) -> None:
        self.timeout_s = timeout_s
        self.script = script or script_path()

    @staticmethod
    def _node(node: str) -> LocalNode:
        found = local_node(node)
        if found is None:
            raise ValueError(f"local fault executor: {node!r} is no node of the local clusters (rabbit-I, rabbit4-I)")
        return found

    @staticmethod
    def env(node: str) -> dict[str, str]:
        """The script's environment for ``node``: which layout (cluster) it belongs to."""
        return {"RBENCH_CLUSTER_VERSION": LocalExecutor._node(node).layout}

    def argv(self, verb: str, node: str) -> list[str]:
        if verb not in _LOCAL_VERBS:
            raise ValueError(f"local fault executor: no {verb!r} for node {node!r}")
        return ["bash", str(self.script), _LOCAL_VERBS[verb], str(self._node(node).index)]

    def run(self, verb: str, node: str) -> ActionResult:
        return run_command(verb, node, self.argv(verb, node), self.timeout_s, self.env(node))

    def check(self, nodes: list[str]) -> str | None:
        """Every node named runs, asking each layout's cluster once (cluster.sh status)."""
        layouts: dict[str, list[LocalNode]] = {}
        for n in nodes:
            found = self._node(n)
            layouts.setdefault(found.layout, []).append(found)
        for layout, wanted in sorted(layouts.items()):
            top = max(w.index for w in wanted)
            result = run_command("status", "", ["bash", str(self.script), "status", str(top)], 60.0,
                                 {"RBENCH_CLUSTER_VERSION": layout})
            states = dict(line.split(" ", 1) for line in result.output.splitlines() if "@" in line and " " in line)
            down = sorted({w.erlang_name for w in wanted if not states.get(w.erlang_name, "").startswith("running")})
            if down:
                start = "scripts/cluster.sh start" if layout == "3" else f"RBENCH_CLUSTER_VERSION={layout} scripts/cluster.sh start"
                return (f"{', '.join(down)} not running on this machine ({states.get(down[0], 'unknown').strip()}); "
                        f"start the local cluster with {start}")
        return None


def template_refusal(template: str) -> str | None:
    """Why ``template`` cannot be filled safely (validation and the executor both ask); None: it can."""
    inside = quoted_placeholder(template)
    if inside is None:
        return None
    return f"{{{inside}}} is inside quotes, where a value's own quotes do not hold; write it bare (each value is shell-quoted)"


def quoted_placeholder(template: str) -> str | None:
    """The first placeholder of ``template`` written inside shell quotes, where the quoting rbench adds
    cannot protect it (``"{node}"`` runs a ``$(…)`` in the value; ``'{node}'`` unquotes it); None if none is.

    Each value is filled shell-quoted, so ``{node}`` written bare is always one argument to the local
    shell: that is the only safe place for it."""
    quote: str | None = None
    for literal, field, _, _ in string.Formatter().parse(template):
        escaped = False
        for c in literal:
            if escaped:
                escaped = False
            elif c == "\\" and quote != "'":
                escaped = True
            elif quote is None and c in "'\"":
                quote = c
            elif c == quote:
                quote = None
        if field is not None and quote is not None:
            return field
    return None


class CommandExecutor:
    """A real cluster's nodes through the workload's command templates (fault_control.command)."""

    def __init__(self, cluster: str, commands: dict[str, str], nodes: dict[str, dict[str, str]], timeout_s: float) -> None:
        self.cluster, self.commands, self.nodes, self.timeout_s = cluster, commands, nodes, timeout_s

    def command(self, verb: str, node: str) -> str:
        if verb not in self.commands:
            raise ValueError(f"fault_control.command.{verb} is not given")
        refusal = template_refusal(self.commands[verb])
        if refusal is not None:
            raise ValueError(f"fault_control.command.{verb}: {refusal}")
        values = {k: shlex.quote(v) for k, v in self.nodes.get(node, {}).items()}
        values.update(node=shlex.quote(node), cluster=shlex.quote(self.cluster))
        return self.commands[verb].format(**values)

    def run(self, verb: str, node: str) -> ActionResult:
        try:
            command = self.command(verb, node)
        except (ValueError, KeyError, IndexError) as exc:       # validation should have caught it
            t = time.time_ns()
            return ActionResult(verb, node, "", False, f"{verb} {node}: {exc}", t, t, "")
        return run_command(verb, node, command, self.timeout_s)

    def check(self, nodes: list[str]) -> str | None:
        return None          # only the commands know; the first action will say


def make_executor(control: FaultControlPlan, cluster: str) -> FaultExecutor:
    if control.kind == "local":
        return LocalExecutor(control.timeout_s)
    return CommandExecutor(cluster, dict(control.commands), {n: dict(v) for n, v in control.nodes}, control.timeout_s)
