"""`make dist`: pack rbench and its dependencies into dist/rbench-env.tar.gz for spark-submit --archives.

Why not pack the development venv: rbench is installed there in editable mode (a path back to
the checkout), which venv-pack refuses and executors could not follow anyway. So this builds a
wheel of the checkout (compiled extensions included), installs it into a fresh venv under
build/, and packs that venv.

pyspark (and py4j) are removed from the packed venv: executors and a cluster-mode driver import
the pyspark of the cluster's own Spark distribution (spark-submit puts SPARK_HOME/python/lib on
their PYTHONPATH), which must match the cluster's JVM side anyway; leaving them out saves ~450 MB.
`--with-pyspark` keeps them (for a driver started from the unpacked archive outside spark-submit).

The archive is rebuilt only when its inputs change: a hash of the sources, pyproject.toml,
setup.py, the Python version and the options is kept next to it (dist/rbench-env.inputs).

    python scripts/pack_env.py [--out dist/rbench-env.tar.gz] [--with-pyspark] [--force]
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ["pyproject.toml", "setup.py", "rbench", "ext"]
SOURCE_SUFFIXES = {".py", ".pyx", ".pxd", ".pyi", ".h", ".c", ".properties", ".typed", ".toml"}
DROPPED = ["pyspark", "py4j"]


def inputs_hash(with_pyspark: bool) -> str:
    """Hash of every file the archive is built from, so an unchanged checkout reuses it."""
    digest = hashlib.sha256(f"{sys.version}|pyspark={with_pyspark}".encode())
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


def run(cmd: list[str], **kwargs: object) -> None:
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)  # type: ignore[call-overload]


def build(out: Path, with_pyspark: bool) -> None:
    work = ROOT / "build" / "pack"
    wheels, venv = work / "wheels", work / "venv"
    shutil.rmtree(work, ignore_errors=True)
    wheels.mkdir(parents=True)
    # the build environment is the current one (it has Cython): no isolated re-download, and
    # build/ keeps compiled objects, so an unchanged extension is not compiled again
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", str(wheels), str(ROOT)])
    (wheel,) = wheels.glob("rbench-*.whl")
    run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)])
    if not with_pyspark:
        run([str(py), "-m", "pip", "uninstall", "-q", "-y", *DROPPED])
    # the packed env needs no pip at run time; it is ~10 MB of the archive
    run([str(py), "-m", "pip", "uninstall", "-q", "-y", "pip"])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name("partial-" + out.name)        # venv-pack picks the format from the suffix
    tmp.unlink(missing_ok=True)
    run([sys.executable, "-m", "venv_pack", "-p", str(venv), "-o", str(tmp), "-q"])
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "dist" / "rbench-env.tar.gz"))
    parser.add_argument("--with-pyspark", action="store_true", help="keep pyspark and py4j in the archive")
    parser.add_argument("--force", action="store_true", help="rebuild even when the inputs are unchanged")
    args = parser.parse_args(argv)
    out = Path(args.out)
    stamp = out.with_suffix("").with_suffix(".inputs")
    key = inputs_hash(args.with_pyspark)
    if not args.force and out.exists() and stamp.exists() and stamp.read_text().strip() == key:
        print(f"{out}: up to date ({out.stat().st_size / 2**20:.0f} MiB)")
        return 0
    t0 = time.monotonic()
    build(out, args.with_pyspark)
    stamp.write_text(key + "\n")
    print(f"{out}: {out.stat().st_size / 2**20:.0f} MiB in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
