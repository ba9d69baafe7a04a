"""Build of the compiled extension modules; everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

NATIVE_SOURCES = ["sparkey/_native.c"] + [f"sparkey/csrc/{name}.c" for name in (
    "arguments", "lookups", "murmur", "entries", "table")]

setup(ext_modules=[
    Extension("sparkey._native", NATIVE_SOURCES, depends=["sparkey/csrc/native.h"],
              extra_compile_args=["-O2", "-Wall", "-Wextra"]),
])
