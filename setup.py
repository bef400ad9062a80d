"""Only the optional C extension; everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

# optional=True: without a C compiler the install still succeeds and winsample runs the numpy
# paths (same results, slower); `winsample --version` tells which you have.
setup(ext_modules=[Extension("winsample._fast", ["winsample/_fast.c"], optional=True,
                             extra_compile_args=["-O3"])])
