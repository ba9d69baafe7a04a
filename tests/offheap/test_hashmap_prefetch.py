"""The compiled LongHashMap core's prefetches survive compilation.

GCC deletes every call to a function that does nothing but prefetch (it judges it free of side
effects), so a prefetch helper that is not always inlined compiles to nothing and the probes and
bulk loops wait on every random read again, with no test failing and only the timings showing it.
The core's helpers are declared ``PREFETCHING`` (``offheap/hashmap/csrc/core.h``) against this;
the test counts the prefetch instructions in the built module (x86-64, where ``objdump`` is
there): 2 when the helpers were dropped, about 20 with them.
"""

from __future__ import annotations

import platform
import shutil
import subprocess

import pytest

import offheap

FEWEST_PREFETCHES = 10


@pytest.mark.skipif(not offheap.compiled, reason="the compiled core is not built or not selected")
@pytest.mark.skipif(shutil.which("objdump") is None or platform.machine() != "x86_64",
                    reason="needs objdump on x86-64")
def test_the_probe_and_bulk_loop_prefetches_are_in_the_built_core():
    import offheap.hashmap._core as core
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", core.__file__],
                             capture_output=True, text=True, check=True).stdout
    prefetches = sum("prefetcht0" in line for line in listing.splitlines())
    assert prefetches >= FEWEST_PREFETCHES
