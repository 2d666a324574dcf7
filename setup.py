"""Cython extensions, named after the package that owns them.

Every ``ext/OWNER/NAME.pyx`` becomes ``rbench.OWNER._NAME``: the folder says whose code it is
(``ext/codec/amqp10.pyx`` -> ``rbench.codec._amqp10``, ``ext/runtime/recorder.pyx`` ->
``rbench.runtime._recorder``), so a new extension is added by dropping its file in its owner's
folder, with no list to edit. A large extension is one such file that ``include``s its parts
from ``ext/OWNER/NAME/*.pxi`` (not globbed, not modules of their own), so calls between parts
stay C calls inside one module. ``ext/include/*.pxd`` hold the primitives every extension
cimports (byte order, clock, write buffer, read cursor) as inline functions.
"""
import os
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
EXT = HERE / "ext"
SHARED = EXT / "include"
loose = sorted(str(p.relative_to(HERE)) for p in EXT.glob("*.pyx"))
if loose:   # a source outside an owner folder would silently not be built
    raise SystemExit(f"{', '.join(loose)}: move into ext/OWNER/ (e.g. ext/codec/, ext/drivers/); "
                     "see docs/codec.md, 'The ext/ layout'")
orphans = sorted(str(p.relative_to(HERE)) for p in EXT.glob("*/*.pyx")
                 if not (HERE / "rbench" / p.parent.name / "__init__.py").exists())
if orphans:  # the folder must name an rbench package: it becomes the module's package
    raise SystemExit(f"{', '.join(orphans)}: ext/OWNER/ must name a package rbench/OWNER/")
extensions = [
    Extension(
        f"rbench.{pyx.parent.name}._{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        include_dirs=[str(SHARED.relative_to(HERE))],
        extra_compile_args=["-O3"],
    )
    for pyx in sorted(EXT.glob("*/*.pyx"))
]

# `make venv` installs rbench (editable) while the extensions compile in place beside it (`make build`, two
# jobs): RBENCH_EXTENSIONS=inplace keeps pip's own build from compiling them a second time, one file at a time.
setup(
    ext_modules=[] if os.environ.get("RBENCH_EXTENSIONS") == "inplace" else cythonize(
        extensions,
        include_path=[str(SHARED.relative_to(HERE))],
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False,
                             "cdivision": True, "initializedcheck": False},
    ),
)
