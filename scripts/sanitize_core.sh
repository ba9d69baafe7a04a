#!/usr/bin/env bash
# Run the tests of every compiled module (the collections' MapLock, the hash table core of LongHashMap and HashMap with its bulk build,
# the Cache's core, the record store's free space and update, TreeMap's page codec, compiled descent with its inner forms and read slots, TreeSet's element slots, sparkey's native
# lookups, reader slots and writer) with the extensions built under AddressSanitizer and UndefinedBehaviorSanitizer (gcc).
#
# The extensions are built into a temporary copy of the package, so the in-place build stays as it
# is. Python itself is not instrumented: libasan is preloaded, leaks are not reported (the
# interpreter keeps objects alive at exit), and PYTHONMALLOC=malloc lets ASan see every object
# allocation. Any finding aborts the run with its report (pytest captures at the sys level only,
# so the report reaches the terminal). Extra arguments go to pytest.
#
#   scripts/sanitize_core.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r offheap sparkey tests setup.py pyproject.toml README.md LICENSE "$work"/
find "$work" -name '*.so' -delete
cd "$work"
sanitizers="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
CFLAGS="-g $sanitizers" LDFLAGS="$sanitizers" python setup.py -q build_ext --inplace
LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" \
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
PYTHONMALLOC=malloc \
python -m pytest -q -p no:cacheprovider -p no:xdist --capture=sys \
    tests/offheap/test_hashmap_core.py tests/offheap/test_hashmap.py tests/offheap/test_hashmap_safety.py \
    tests/offheap/test_hashmap_bulk.py tests/offheap/test_hashmap_threads.py tests/offheap/test_hashset.py \
    tests/offheap/test_treemap_descent.py tests/offheap/test_treemap_forms.py \
    tests/offheap/test_treemap_positions.py tests/offheap/test_treemap_slots.py tests/offheap/test_treemap_ranges.py tests/offheap/test_treemap_threads.py \
    tests/offheap/test_treemap_walk.py tests/offheap/test_treemap_writearound.py tests/offheap/test_hashmap_keyslots.py \
    tests/offheap/test_keyed_core.py tests/offheap/test_keyed_hashmap.py tests/offheap/test_mapping_protocol.py \
    tests/offheap/test_cache.py tests/offheap/test_cache_core.py tests/offheap/test_treeset_slots.py tests/offheap/test_treemap_nodecache.py \
    tests/offheap/test_store_space.py tests/offheap/test_store_freespace.py tests/offheap/test_store.py \
    tests/offheap/test_page_codec.py tests/offheap/test_pages.py tests/sparkey/test_reader.py tests/sparkey/test_compiled_writer.py \
    tests/sparkey/test_golden_read.py tests/sparkey/test_golden_write.py \
    tests/sparkey/test_native.py tests/sparkey/test_compiled.py tests/sparkey/test_damaged_index.py \
    tests/sparkey/test_parallel_write.py "$@"
