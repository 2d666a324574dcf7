"""The layout rules of docs/architecture.md, checked on the source (one ast pass, nothing imported).

Why on the source rather than at run time (tests/unit/test_imports.py does that for the executor): an
import inside a function runs only when that function does, so a run-time check misses it, and a cycle
through such an import fails only on the call path that closes it. Every rule prints the offending
modules, one a line. ``python tests/unit/test_layout.py`` prints every finding without pytest.
"""
from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "rbench"
EXT = ROOT / "ext"
MAP = ROOT / "docs" / "architecture.md"
MAX_LINES = 500

# Data tables over MAX_LINES: file (relative to the repository) -> why it stays one file. None today:
# perftest/options.py, the largest table, fits once its record type is apart (perftest/option.py).
EXEMPT_LINES: dict[str, str] = {}

# The layer rules of docs/architecture.md: module prefixes (a package and everything under it) ...
SAMPLES_FORBIDDEN = ("pyspark", "asyncio", "uvloop")      # ... plus every compiled module
EXECUTOR_SIDE = ("rbench.runtime", "rbench.drivers", "rbench.live")
EXECUTOR_FORBIDDEN = ("pydantic", "pyspark")
PYSPARK_ALLOWED = ("rbench.spark", "rbench.jvm_launch", "rbench.coordinator", "rbench.reduce", "rbench.runtime.daemon")
COMMANDS_ALLOWED = ("rbench.cli", "rbench.commands")


@dataclass(frozen=True)
class Import:
    """One import statement's target, as the module that executes it sees it."""

    importer: str
    target: str          # the module loaded: pkg.mod for ``from pkg import mod``
    names: tuple[str, ...]   # names taken from target (``from target import a, b``), () for ``import``
    line: int


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


@cache
def python_modules() -> dict[str, Path]:
    """Every rbench module written in Python: dotted name -> file (a package is its __init__.py)."""
    out: dict[str, Path] = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


@cache
def compiled_modules() -> dict[str, Path]:
    """Every compiled module, named as setup.py names it: ext/OWNER/NAME.pyx -> rbench.OWNER._NAME."""
    return {f"rbench.{pyx.parent.name}._{pyx.stem}": pyx for pyx in sorted(EXT.glob("*/*.pyx"))}


def _is_module(name: str) -> bool:
    return name in python_modules() or name in compiled_modules()


def _type_checking_lines(tree: ast.Module) -> set[int]:
    """Lines inside ``if TYPE_CHECKING:`` blocks: imports for the type checker only, never executed."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


@cache
def imports_of(module: str) -> tuple[Import, ...]:
    """Every import the module's code can execute, at any depth (functions included)."""
    path = python_modules()[module]
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_lines(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, (), node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            plain = []
            for alias in node.names:
                if _is_module(f"{base}.{alias.name}"):     # ``from pkg import mod`` imports pkg.mod
                    found.append(Import(module, f"{base}.{alias.name}", (), node.lineno))
                else:
                    plain.append(alias.name)
            if plain or not node.names:
                found.append(Import(module, base, tuple(plain), node.lineno))
    return tuple(found)


def _internal(target: str) -> str | None:
    """The rbench module an import loads (``import rbench.a.b`` names the deepest one that exists)."""
    name = target
    while name.startswith("rbench"):
        if _is_module(name):
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in python_modules()}
    for module in python_modules():
        for imp in imports_of(module):
            target = _internal(imp.target)
            if target is not None and target != module and target in python_modules():
                graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _cycle_report(component: list[str], graph: dict[str, set[str]]) -> str:
    edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a]) if b in component]
    return "cycle: " + ", ".join(edges)


def oversized() -> list[tuple[str, int]]:
    files = [*PKG.rglob("*.py"), *EXT.rglob("*.pyx"), *EXT.rglob("*.pxi")]
    sizes = [(str(p.relative_to(ROOT)), len(p.read_text().splitlines())) for p in sorted(files)]
    return [(f, n) for f, n in sizes if n > MAX_LINES and f not in EXEMPT_LINES]


def private_imports() -> list[str]:
    """``from rbench.a import _x`` in rbench/ where rbench.a is another module: a private name crossing over."""
    out = []
    for module in python_modules():
        for imp in imports_of(module):
            if _internal(imp.target) is None:
                continue
            for name in imp.names:
                if name.startswith("_") and not name.startswith("__"):
                    out.append(f"{python_modules()[module].relative_to(ROOT)}:{imp.line}: "
                               f"from {imp.target} import {name}")
    return out


def layer_violations() -> list[str]:
    out = []
    for module, path in python_modules().items():
        where = path.relative_to(ROOT)
        for imp in imports_of(module):
            target = imp.target
            top = target.split(".")[0]
            loaded = _internal(target) or target
            if _under(module, ("rbench.samples",)):
                if top in SAMPLES_FORBIDDEN or loaded in compiled_modules():
                    out.append(f"{where}:{imp.line}: samples/ imports {target} (no Spark, asyncio or compiled code)")
            if _under(module, EXECUTOR_SIDE) and top in EXECUTOR_FORBIDDEN and not (
                    top == "pyspark" and _under(module, PYSPARK_ALLOWED)):
                out.append(f"{where}:{imp.line}: the executor side imports {target}")
            if top == "pyspark" and not _under(module, PYSPARK_ALLOWED):
                out.append(f"{where}:{imp.line}: pyspark outside {', '.join(PYSPARK_ALLOWED)}")
            if _under(loaded, ("rbench.commands",)) and not _under(module, COMMANDS_ALLOWED):
                out.append(f"{where}:{imp.line}: imports {target}: only cli.py imports rbench.commands")
    return out


# ---------------------------------------------------------------- the map

@dataclass(frozen=True)
class MapEntry:
    """One entry of the map's tree under ``rbench/``: its name and the text that says its job."""

    name: str        # "cli.py", "commands/"
    text: str        # every line of the entry after the name


def _tree_block() -> list[str]:
    text = MAP.read_text()
    match = re.search(r"## The tree\s*```\n(.*?)```", text, re.S)
    assert match, f"{MAP}: no '## The tree' code block"
    return match.group(1).splitlines()


def map_entries() -> dict[str, MapEntry]:
    """The entries under ``rbench/`` (indented two spaces; deeper lines continue the entry above)."""
    entries: dict[str, list[str]] = {}
    current = None
    inside = False
    for line in _tree_block():
        if line.startswith("rbench/"):
            inside = True
            continue
        if inside and line and not line.startswith(" "):
            break
        if not inside or not line.strip():
            continue
        if re.match(r"  \S", line):
            current, _, rest = line.strip().partition(" ")
            entries[current] = [rest.strip()]
        elif current is not None:
            entries[current].append(line.strip())
    return {name: MapEntry(name, " ".join(lines).strip()) for name, lines in entries.items()}


def unmapped_packages() -> list[str]:
    """Packages under rbench/ the map does not name (with some words on their job)."""
    entries = map_entries()
    out = []
    for init in sorted(PKG.rglob("__init__.py")):
        rel = init.parent.relative_to(PKG)
        if not rel.parts:
            continue
        top = entries.get(f"{rel.parts[0]}/")
        if top is None or len(top.text.split()) < 3:
            out.append(f"rbench/{rel.as_posix()}/: no entry with its job in the map's tree")
        elif len(rel.parts) > 1 and f"{'/'.join(rel.parts[1:])}/" not in top.text:
            out.append(f"rbench/{rel.as_posix()}/: not named in the entry of rbench/{rel.parts[0]}/")
    return out


# a path: words joined by "/", ending in a source/doc suffix or in "/" (a folder); "a/b" without
# either is prose ("progress/stop"), and output files (run.json, *.parquet) are not the code's paths
PATH_TOKEN = re.compile(r"(?<![\w./<>-])((?:\.\./|[\w-]+/)*[\w-]+(?:\.(?:py|pyx|pxi|pxd|pyi|md|sh|c|yaml)\b|/(?![\w])))")


def stale_map_paths() -> list[str]:
    """Paths the map names that do not exist (relative to their entry's package, to rbench/ or the root)."""
    out = []
    entries = map_entries()
    for name, entry in entries.items():
        for token in PATH_TOKEN.findall(entry.text):
            # in a package's entry, a name is relative to the package or to one of its sub-packages
            bases = [PKG, ROOT]
            if name.endswith("/"):
                bases += [PKG / name, *(i.parent for i in (PKG / name).rglob("__init__.py"))]
            if not any((base / token).exists() for base in bases):
                out.append(f"rbench/{name}: {token} does not exist")
    for token in re.findall(r"`([^`\s]+)`", MAP.read_text()):
        for path in PATH_TOKEN.findall(token):
            if re.search(r"[A-Z]{3,}", path):          # a placeholder: ext/OWNER/NAME.pyx
                continue
            if not any((base / path).exists() for base in (ROOT, PKG)):
                out.append(f"`{token}`: {path} does not exist")
    for token in PATH_TOKEN.findall(MAP.read_text()):
        if token.startswith("../"):
            out.append(f"{token}: points outside the repository")
    return sorted(set(out))


# ---------------------------------------------------------------- the tests

def _lines(found: list[str]) -> str:
    return "\n" + "\n".join(found)


def test_no_import_cycle() -> None:
    graph = import_graph()
    found = [_cycle_report(c, graph) for c in cycles(graph)]
    assert not found, _lines(found)


def test_no_module_over_the_line_limit() -> None:
    found = [f"{f}: {n} lines (limit {MAX_LINES})" for f, n in oversized()]
    found += [f"{rel}: exempt, but fits now (or has no reason): drop its exemption" for rel, why in EXEMPT_LINES.items()
              if not why or len((ROOT / rel).read_text().splitlines()) <= MAX_LINES]
    assert not found, _lines(found)


def test_no_private_name_imported_across_modules() -> None:
    found = private_imports()
    assert not found, _lines(found)


def test_layer_rules() -> None:
    found = layer_violations()
    assert not found, _lines(found)


def test_map_names_every_package_with_its_job() -> None:
    found = unmapped_packages()
    assert not found, _lines(found)


def test_map_names_no_missing_path() -> None:
    found = stale_map_paths()
    assert not found, _lines(found)


# ---------------------------------------------------------------- the checker's own cases

def test_cycles_finds_a_loop_and_ignores_a_chain() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_every_rbench_import_resolves_to_a_module() -> None:
    """Relative and ``from pkg import mod`` imports resolved wrongly would drop edges from the graph."""
    for module in python_modules():
        for imp in imports_of(module):
            if imp.target.startswith("rbench"):
                assert _internal(imp.target) is not None, imp


def test_path_tokens_are_paths_not_prose() -> None:
    text = "load.py (file → Workload), scalability/ (plan.py), progress/stop, run.json, ../shared/NOTES.md, docs/x.md"
    assert PATH_TOKEN.findall(text) == ["load.py", "scalability/", "plan.py", "../shared/NOTES.md", "docs/x.md"]


def test_map_reader_sees_the_entries() -> None:
    entries = map_entries()
    assert "cli.py" in entries and "commands/" in entries
    assert entries["cli.py"].text


if __name__ == "__main__":
    g = import_graph()
    report = {
        "import cycles": [_cycle_report(c, g) for c in cycles(g)],
        f"over {MAX_LINES} lines": [f"{f}: {n}" for f, n in oversized()],
        "private names imported": private_imports(),
        "layer rules": layer_violations(),
        "packages not on the map": unmapped_packages(),
        "stale paths on the map": stale_map_paths(),
    }
    for title, found in report.items():
        print(f"{title}: {len(found)}")
        for line in found:
            print(f"  {line}")
