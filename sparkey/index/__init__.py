"""Sparkey index files (IO layer): ``write_index`` builds a ``.spi``, ``HashIndex`` reads one.

Only this package and ``sparkey.log`` open Sparkey files. Modules: ``writer`` (write_index, its
options and the two canonical build methods, in memory and by sorting) and ``reader``
(HashIndex, read_index_header).
"""

from sparkey.index.reader import HashIndex, read_index_header
from sparkey.index.writer import (
    DEFAULT_MAX_MEMORY_BYTES, METHODS, check_index_options, write_index)

__all__ = ["DEFAULT_MAX_MEMORY_BYTES", "METHODS", "HashIndex", "check_index_options",
           "read_index_header", "write_index"]
