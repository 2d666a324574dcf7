"""`make dist`: pack rbench and its dependencies into dist/rbench-env.tar.gz for spark-submit --archives.

Why not pack the development venv: rbench is installed there in editable mode (a path back to
the checkout), which venv-pack refuses and executors could not follow anyway. So this builds a
wheel of the checkout (compiled extensions included), installs it into a venv of its own under
build/pack/, and packs that venv with venv-pack.

pyspark and py4j are never installed in it: executors (and a cluster-mode driver) import the
pyspark of the cluster's own Spark distribution, which spark-submit puts on their PYTHONPATH and
which must match the cluster's JVM side anyway; that saves ~450 MB. `--with-pyspark` keeps them.
The libraries' bundled test suites and C headers are pruned (~65 MB unpacked).

The venv's interpreter is linked, not copied: the nodes need the same Python at the same path
(`--python`, default the interpreter behind the one running this script; docs/cluster.md).

Rebuilds are incremental: the archive is reused while a hash of its inputs (sources,
pyproject.toml, setup.py, conf/costs.yaml, options) is unchanged (dist/rbench-env.inputs), and
the dependencies' venv is reused while the requirements are, so a source change costs a wheel
build and a re-pack.

    python scripts/pack_env.py [--out dist/rbench-env.tar.gz] [--python /usr/bin/python3.11] [--with-pyspark] [--force]
"""
from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ["pyproject.toml", "setup.py", "rbench", "ext", "conf/costs.yaml"]
SOURCE_SUFFIXES = {".py", ".pyx", ".pxd", ".pyi", ".h", ".c", ".properties", ".typed", ".toml"}
DROPPED = ["pyspark", "py4j"]


def inputs_hash(with_pyspark: bool, python: str) -> str:
    """Hash of every file the archive is built from, so an unchanged checkout reuses it."""
    digest = hashlib.sha256(f"{python}|pyspark={with_pyspark}".encode())
    for name in INPUTS:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES
                                                      and "__pycache__" not in p.parts)
        for f in files:
            if f.suffix == ".c" and f.with_suffix(".pyx").exists():
                continue                       # generated from the .pyx, hashed already
            digest.update(str(f.relative_to(ROOT)).encode())
            digest.update(f.read_bytes())
    return digest.hexdigest()


def wheel_requirements(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist lines, less those of optional extras."""
    with zipfile.ZipFile(wheel) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        lines = zf.read(meta).decode().splitlines()
    reqs = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]
    return [r for r in reqs if "extra ==" not in r]


def requirement_name(req: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0].lower().replace("_", "-")


def prune(venv: Path) -> None:
    """Drop what no import needs: bundled test suites and C/C++ headers (~60 MB unpacked)."""
    (site,) = venv.glob("lib/python3*/site-packages")
    dropped = [site / pkg / sub for pkg in ("pyarrow", "pandas", "numpy", "matplotlib") for sub in ("tests", "include", "src")]
    dropped += [p for p in site.glob("numpy/*/tests")]
    size = 0
    for path in dropped:
        if path.is_dir():
            size += sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            shutil.rmtree(path)
    print(f"pruned {size / 2**20:.0f} MB of tests and headers")


def run(cmd: list[str], **kwargs: object) -> None:
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)  # type: ignore[call-overload]


def build(out: Path, with_pyspark: bool, python: str) -> None:
    work = ROOT / "build" / "pack"
    wheels, venv, deps_stamp = work / "wheels", work / "venv", work / "venv.deps"
    shutil.rmtree(wheels, ignore_errors=True)
    wheels.mkdir(parents=True)
    # the build environment is the current one (it has Cython): no isolated re-download, and
    # build/ keeps compiled objects, so an unchanged extension is not compiled again
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", str(wheels), str(ROOT)])
    (wheel,) = wheels.glob("rbench-*.whl")
    requirements = sorted(r for r in wheel_requirements(wheel) if with_pyspark or requirement_name(r) not in DROPPED)
    # this script's pip installs into the packed venv (pip --python), so the venv needs no pip of its own
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--disable-pip-version-check"]
    deps_key = "\n".join([python, *requirements])
    if not (venv.exists() and deps_stamp.exists() and deps_stamp.read_text() == deps_key):
        # dependencies changed (or first build): a new venv; otherwise only rbench is replaced below
        shutil.rmtree(venv, ignore_errors=True)
        deps_stamp.unlink(missing_ok=True)
        run([python, "-m", "venv", "--without-pip", str(venv)])
        run([*pip, *requirements])
        prune(venv)                                  # the libraries' own test suites and C headers
        deps_stamp.write_text(deps_key)
    run([*pip, "--no-deps", "--force-reinstall", str(wheel)])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name("partial-" + out.name)        # venv-pack picks the format from the suffix
    tmp.unlink(missing_ok=True)
    run([sys.executable, "-m", "venv_pack", "-p", str(venv), "-o", str(tmp), "-q"])
    tmp.chmod(0o644)
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "dist" / "rbench-env.tar.gz"))
    parser.add_argument("--with-pyspark", action="store_true", help="keep pyspark and py4j in the archive")
    parser.add_argument("--python", default=getattr(sys, "_base_executable", sys.executable),
                        help="interpreter of the packed venv; executors need this same Python at this same path "
                             "(default: the base interpreter of the one running this script)")
    parser.add_argument("--force", action="store_true", help="rebuild even when the inputs are unchanged")
    args = parser.parse_args(argv)
    out = Path(args.out)
    stamp = out.with_suffix("").with_suffix(".inputs")
    key = inputs_hash(args.with_pyspark, args.python)
    if not args.force and out.exists() and stamp.exists() and stamp.read_text().strip() == key:
        print(f"{out}: up to date ({out.stat().st_size / 2**20:.0f} MiB)")
        return 0
    t0 = time.monotonic()
    build(out, args.with_pyspark, args.python)
    stamp.write_text(key + "\n")
    print(f"{out}: {out.stat().st_size / 2**20:.0f} MiB in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
