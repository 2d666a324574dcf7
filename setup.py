"""Cython extensions, named after the package that owns them.

Every ``ext/OWNER/NAME.pyx`` becomes ``rbench.OWNER._NAME``: the folder says whose code it is
(``ext/codec/amqp10.pyx`` -> ``rbench.codec._amqp10``, ``ext/runtime/recorder.pyx`` ->
``rbench.runtime._recorder``), so a new extension is added by dropping its file in its owner's
folder, with no list to edit. A large extension is one such file that ``include``s its parts
from ``ext/OWNER/NAME/*.pxi`` (not globbed, not modules of their own), so calls between parts
stay C calls inside one module. ``ext/include/*.pxd`` hold the primitives every extension
cimports (byte order, clock, write buffer, read cursor) as inline functions.
"""
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
EXT = HERE / "ext"
SHARED = EXT / "include"
extensions = [
    Extension(
        f"rbench.{pyx.parent.name}._{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        include_dirs=[str(SHARED.relative_to(HERE))],
        extra_compile_args=["-O3"],
    )
    for pyx in sorted(EXT.glob("*/*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        include_path=[str(SHARED.relative_to(HERE))],
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False,
                             "cdivision": True, "initializedcheck": False},
    ),
)
