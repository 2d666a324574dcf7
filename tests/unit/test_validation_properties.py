"""Property: any bad workload file or PerfTest line gives one line, exit 2, no traceback, no secret.

Generated, not listed (issue 11): valid workload files and PerfTest command lines are mutated
(wrong types, out-of-range numbers, unknown keys, broken URIs with a password in them,
truncated YAML) and each is validated through the CLI's own main(), in-process, the way a
user's shell would run `rbench validate FILE` or `rbench perftest … --print-workload`.
Derandomized with no deadline, so CI sees the same cases every run.
"""
from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rbench.cli import main

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD_CASES = 5000
PERFTEST_CASES = 5500      # 10,500 cases in all (issue 11 asks for at least 10,000)
SETTINGS = dict(derandomize=True, deadline=None, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

# the secret a mutation plants; long and odd enough never to appear by chance in rbench's own output
secrets = st.text("ABCDEFGHJKMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz23456789", min_size=10, max_size=16).map(lambda s: "Zq" + s)


def _base_workloads() -> list[dict[str, Any]]:
    env = {"RBENCH_AMQP_URL": "amqp://guest:guest@127.0.0.1:5672/"}
    found = []
    for path in sorted((ROOT / "conf" / "workloads").glob("*.yaml")):
        text = path.read_text()
        for k, v in env.items():
            text = text.replace(f"${{{k}:-amqp://guest:guest@127.0.0.1:5672/}}", v)
        found.append(yaml.safe_load(text))
    found.append({"name": "t", "clusters": [{"name": "a", "uris": ["amqp://u:pw@127.0.0.1:5672/"]}], "duration": 5,
                  "rate": 100, "size": 1000, "consumer": {"prefetch": 10}, "publisher": {"confirm": True}})
    return found


BASES = _base_workloads()


def broken_uri(secret: str) -> st.SearchStrategy[str]:
    """URIs that must be refused, each carrying ``secret`` where a password (or worse) goes."""
    return st.sampled_from([
        f"amqp://guest:{secret}@127.0.0.1:99999/",           # port out of range
        f"amqp://guest:{secret}@127.0.0.1:0/",
        f"amqp://guest:{secret}@[::1:5672/",                 # unclosed IPv6 bracket
        f"amqp://guest:{secret}@::1:5672/",                  # IPv6 without brackets
        f"amqp://guest:{secret}@[zz::1]:5672/",
        f"http://guest:{secret}@127.0.0.1:5672/",            # wrong scheme
        f"amqp://guest:{secret}@host:port/",
        f"amqp://guest:{secret}@host:/",
        f"amqp://guest:{secret}@host:5672/a/b",              # two path segments
        f"amqp://guest:{secret}@host:5672/v#frag",
        f"amqp://guest:{secret}@host:5672/?heartbeat=x",
        f"amqp://guest:{secret}@host:5672/?nosuch=1",
        f"amqp://guest:{secret}@ho st:5672/",
        f"amqp://guest:{secret}",                            # reads as host:port, the port being the secret
        f"guest:{secret}@127.0.0.1:5672",                    # no scheme
        f"amqp://guest:{secret}@127.0.0.1:5672/\n",
        f"amqp://guest@[::1]:5680/?password={secret}",       # a credential in the query (issue 29)
        f"amqp://guest:guest@127.0.0.1:5672/?heartbeat=5&API_KEY={secret}",
        f"amqp://127.0.0.1:5672/?token={secret}@other:1#x",
    ])


JUNK = st.one_of(st.integers(-10**12, 10**12), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                 st.none(), st.text(max_size=8), st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))
NUMERIC_FIELDS = [("size",), ("producers",), ("consumers",), ("rate",), ("duration",), ("warmup",), ("tasks",),
                  ("metrics_port",), ("consumer", "prefetch"), ("consumer", "global_prefetch"),
                  ("publisher", "confirm_window"), ("publisher", "message_count"), ("queues", "to"),
                  ("clusters", 0, "nodes"), ("clusters", 0, "max_message_size"), ("drain_timeout",)]
EDGE_NUMBERS = st.sampled_from([-1, 0, -100, 65536, 70000, 2**31, 2**63, 200_000_000, 10**30, -0.5])


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for p in path[:-1]:
        if isinstance(doc, dict):
            doc = doc.setdefault(p, {})
        elif isinstance(doc, list) and isinstance(p, int) and p < len(doc):
            doc = doc[p]
        else:
            return
    if isinstance(doc, dict):
        doc[path[-1]] = value
    elif isinstance(doc, list) and isinstance(path[-1], int) and path[-1] < len(doc):
        doc[path[-1]] = value


@st.composite
def bad_workload_texts(draw: st.DrawFn) -> tuple[str, str]:
    """(YAML text, secret): a committed or typical workload, mutated one to three times."""
    import copy

    doc = copy.deepcopy(draw(st.sampled_from(BASES)))
    secret = draw(secrets)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["wrong type", "out of range", "unknown key", "broken uri", "uri as string",
                                     "secret in a field", "conflict"]))
        if kind == "wrong type":
            _set(doc, draw(st.sampled_from(_paths(doc))), draw(JUNK))
        elif kind == "out of range":
            _set(doc, draw(st.sampled_from(NUMERIC_FIELDS)), draw(EDGE_NUMBERS))
        elif kind == "unknown key":
            where = draw(st.sampled_from([(), ("clusters", 0), ("queues",), ("publisher",), ("consumer",)]))
            key = draw(st.sampled_from(["password", "pass", "secret", "uri", "user", "rat", "sizee"]))
            _set(doc, where + (key,), secret)
        elif kind == "broken uri":
            uris = doc["clusters"][0].get("uris") if isinstance(doc.get("clusters"), list) and doc["clusters"] \
                and isinstance(doc["clusters"][0], dict) else None
            if isinstance(uris, list):
                uris.append(draw(broken_uri(secret)))
            else:
                doc["clusters"] = [{"name": "a", "uris": [draw(broken_uri(secret))]}]
        elif kind == "uri as string":
            _set(doc, ("clusters", 0, "uris"), f"amqp://guest:{secret}@127.0.0.1:5672/")
        elif kind == "secret in a field":       # a password pasted into the wrong field, URI-shaped
            path = draw(st.sampled_from(_paths(doc) + [("name",), ("size",), ("duration",)]))
            _set(doc, path, f"amqp://admin:{secret}@10.0.0.1:5672/")
        else:
            _set(doc, ("rate",), 10)
            _set(doc, ("rate_steps",), [{"rate": 5, "duration": 2}])
    text = yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)
    if draw(st.booleans()) and draw(st.integers(0, 3)) == 0:      # truncated YAML, a quarter of the time
        text = text[:draw(st.integers(0, len(text)))]
    return text, secret


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _check(code: int, out: str, err: str, secret: str, command: str) -> None:
    assert secret not in out and secret not in err, (out, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert code in (0, 2), (code, err)
    if code == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"rbench {command}") and not out, (out, err)


@settings(max_examples=WORKLOAD_CASES, **SETTINGS)  # type: ignore[arg-type]
@given(case=bad_workload_texts())
def test_mutated_workloads_give_one_line_and_no_secret(case: tuple[str, str], tmp_path_factory: Any) -> None:
    text, secret = case
    path = _scratch(tmp_path_factory) / "w.yaml"
    path.write_text(text)
    code, out, err = _run(["validate", str(path)])
    _check(code, out, err, secret, "validate")


_SCRATCH: list[Path] = []


def _scratch(factory: Any) -> Path:
    """One file rewritten per case; in memory (/dev/shm) where there is one, since opening files on a
    loaded CI disk costs more than validating them."""
    if not _SCRATCH:
        shm = Path("/dev/shm")
        if shm.is_dir() and os.access(shm, os.W_OK):
            import tempfile

            _SCRATCH.append(Path(tempfile.mkdtemp(prefix="rbench-props-", dir=shm)))
        else:
            _SCRATCH.append(factory.mktemp("props"))
    return _SCRATCH[0]


@pytest.fixture(scope="module", autouse=True)
def _remove_scratch() -> Iterator[None]:
    yield
    import shutil

    for d in _SCRATCH:
        shutil.rmtree(d, ignore_errors=True)
    _SCRATCH.clear()


PERFTEST_BASES = [
    ["-x", "1", "-y", "1", "-z", "5"],
    ["-x", "2", "-y", "4", "-r", "100", "-s", "1000", "-z", "10", "-c", "50", "-q", "100"],
    ["-qq", "-u", "q", "-C", "1000", "-r", "50"],
    ["-sq", "-z", "5", "-x", "1", "-y", "0"],
    ["--queue-pattern", "perf-%d", "--queue-pattern-from", "1", "--queue-pattern-to", "3", "-x", "3", "-y", "3", "-z", "3"],
    ["-vr", "100:5", "-vr", "200:5", "-z", "10"],
]
VALUE_FLAGS = ["-x", "-y", "-r", "-R", "-s", "-z", "-C", "-D", "-c", "-q", "-Q", "-A", "-L", "-ct", "-X", "-Y",
               "-vr", "-vs", "-qa", "-mp", "-b", "-M", "-i", "-mpp", "--queue-pattern-from", "-P", "-m", "-n"]
FLAG_VALUES = st.one_of(st.sampled_from(["-100", "-1", "0", "70000", "1e400", "nan", "inf", "abc", "", "1.5", "10:x",
                                         "x:10", "-5:10", "1:-1", "x-queue-type=stream", "=", "a=b=c", "99999999999"]),
                        st.text("0123456789-.:,=x", max_size=6))


@st.composite
def bad_perftest_lines(draw: st.DrawFn) -> tuple[list[str], str]:
    argv = list(draw(st.sampled_from(PERFTEST_BASES)))
    secret = draw(secrets)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flag value", "broken uri", "uris list", "unknown flag", "drop token",
                                     "secret in a value"]))
        if kind == "flag value":
            argv += [draw(st.sampled_from(VALUE_FLAGS)), draw(FLAG_VALUES)]
        elif kind == "broken uri":
            argv += ["-h", draw(broken_uri(secret))]
        elif kind == "uris list":
            argv += ["-H", f"amqp://guest:guest@127.0.0.1:5672/,{draw(broken_uri(secret))}"]
        elif kind == "unknown flag":
            argv += [draw(st.sampled_from(["--password", "-pw", "--nosuch", "-zz"])), f"amqp://u:{secret}@h:5672/"]
        elif kind == "drop token" and argv:
            del argv[draw(st.integers(0, len(argv) - 1))]
        else:
            argv += [draw(st.sampled_from(VALUE_FLAGS)), f"amqp://admin:{secret}@10.0.0.1:5672/"]
    return argv, secret


@settings(max_examples=PERFTEST_CASES, **SETTINGS)  # type: ignore[arg-type]
@given(case=bad_perftest_lines())
def test_mutated_perftest_lines_give_one_line_and_no_secret(case: tuple[list[str], str]) -> None:
    argv, secret = case
    code, out, err = _run(["perftest", *argv, "--print-workload"])
    _check(code, out, err, secret, "perftest")


def test_valid_bases_stay_valid(tmp_path: Path) -> None:
    """The mutations start from inputs that validate, so every failure above is the mutation's."""
    for i, doc in enumerate(BASES):
        f = tmp_path / f"{i}.yaml"
        f.write_text(yaml.safe_dump(doc))
        assert _run(["validate", str(f)])[0] == 0
    for argv in PERFTEST_BASES:
        code, _, err = _run(["perftest", *argv, "--print-workload"])
        assert code == 0, (argv, err)

