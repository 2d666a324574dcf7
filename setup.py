"""Cython extensions: every ext/NAME.pyx becomes rbench.codec._NAME.

Globbing keeps pyproject free of a list that each new codec would have to edit.
"""
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
extensions = [
    Extension(
        f"rbench.codec._{pyx.stem}",
        [str(pyx.relative_to(HERE))],
        include_dirs=["ext"],
        extra_compile_args=["-O3"],
    )
    for pyx in sorted((HERE / "ext").glob("*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        include_path=["ext"],
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False,
                             "cdivision": True, "initializedcheck": False},
    ),
)
