/* Declarations shared by the sources of offheap.treemap._pages, the compiled leaf-page codec
 * (layer 6, pure: bytes in, Python lists out, no IO).
 *
 * stream.c     page readers and writers: varints, bit streams, int64 delta and frame blocks
 * strings.c    front coding and the str/bytes column of offheap.store.serializers
 * _pages.c     int64 key blocks, the value columns, and the module (encode/decode of leaf bodies)
 * descent.c    the compiled read path of the B+tree (type Descent) over the node cache and store
 * forms.c      compact forms of cached inner nodes, which the descent bisects, and their table
 * columns.c    the key columns of decoded leaves: array('q') for int64 keys, else lists
 * fields.c     attributes of the tree's objects read at their __slots__ offsets
 * slots.c      TreeSlots, the base type whose slots run a TreeMap's m[k], get, `in` and m[k] = v
 * ranges.c     RangeItems, the item-by-item iteration of a range, leaf by leaf
 *
 * The byte layouts are those of offheap.kernels.packing, offheap.store.serializers and
 * offheap.treemap.page, which specify them; this code follows them byte for byte.
 *
 * Untrusted input. A PageReader reads a page that may be damaged: every read checks the bytes
 * left before it dereferences anything, every count was bounded by PAGE_MAX_ENTRIES before it
 * sizes an allocation, and every length is compared with the bytes left before it is used, so a
 * damaged page raises CorruptionError and never reads out of bounds or allocates more than a
 * small multiple of what the page holds.
 *
 * Every function here runs with the GIL held (they build Python objects or set exceptions).
 * Functions returning int return 0 on success and -1 with an exception set; the encoders that
 * may decline a value return PAGE_NOT_HANDLED (1), with no exception set, so that the caller
 * runs the Python reference instead.
 */
#ifndef OFFHEAP_TREEMAP_PAGES_H
#define OFFHEAP_TREEMAP_PAGES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "lock_api.h"

#define PAGE_MAX_ENTRIES 4096      /* offheap.treemap.page.MAX_NODE_SIZE (a test holds them equal) */
#define PAGE_MAX_VARINT_BYTES 10
#define PAGE_FRAME_WIDTH_FLAG 0x80 /* offheap.kernels.packing.FRAME_WIDTH_FLAG */
#define PAGE_NOT_HANDLED 1

/* offheap.errors.CorruptionError, a strong reference taken at module init and kept for the life
 * of the process (the module cannot be unloaded). */
extern PyObject *page_corruption_error;

/* Sets CorruptionError with a printf-style message and returns -1. */
int page_corrupt(const char *format, ...);
/* fields.c: an attribute of the tree's Python objects (a node's lists, the cursor's hint, the
 * tree's counters) kept in a __slots__ member, read and written at its offset in the object.
 * `type` is the class the offset was found in (a strong reference, NULL before the first
 * object); `offset` is -1 when the name is no writable object member there, or the class
 * customizes attribute access: the attribute protocol then. `name` is interned at first use.
 * Declare one per place of use (static SlotField f = SLOT_FIELD("keys");). */
typedef struct {
    const char *text;
    PyObject *name;
    PyTypeObject *type;
    Py_ssize_t offset;
} SlotField;
#define SLOT_FIELD(text) {text, NULL, NULL, -1}

/* The offset at which instances of `type` keep the writable object slot (a __slots__ member)
 * `name`, to be read and written without the attribute protocol; -1 when `name` is anything
 * else there or the type overrides attribute access. */
Py_ssize_t member_offset(PyTypeObject *type, PyObject *name);
/* object.<field>: a new reference, or NULL with an exception (AttributeError when unset). */
PyObject *field_get(SlotField *field, PyObject *object);
/* object.<field> = value: 0, or -1 with an exception. */
int field_set(SlotField *field, PyObject *object, PyObject *value);
/* field_get of a list attribute of a cached node, CorruptionError if it is not a list. */
PyObject *node_list(PyObject *node, SlotField *field);
/* field_get of a leaf's key column (columns.c), CorruptionError if it is neither kind. */
PyObject *node_key_column(PyObject *node, SlotField *field);

/* columns.c: the key column of a decoded leaf, as offheap.treemap.page.key_column makes it: an
 * array('q') of int64 keys (is_int64_column), a list of str or bytes keys. */
int init_key_columns(void);
int is_int64_column(PyObject *column);
/* A new array('q') of `count` words. */
PyObject *new_int64_column(const uint64_t *words, Py_ssize_t count);
/* The words of an int64 column, read through its buffer: valid until key_words_close, which
 * must come before any Python code can run (the array cannot resize while it is open).
 * key_words_open raises CorruptionError for anything but an array('q'). */
typedef struct {
    Py_buffer view;
    const int64_t *words;
    Py_ssize_t count;
} KeyWords;
int key_words_open(PyObject *column, KeyWords *out);
void key_words_close(KeyWords *words);
/* len(column), column[i] (a new reference; IndexError outside), column.insert(at, key): for
 * either kind of column. */
Py_ssize_t key_column_size(PyObject *column);
PyObject *key_column_item(PyObject *column, Py_ssize_t i);
int key_column_insert(PyObject *column, Py_ssize_t at, PyObject *key);

/* A read position in a page body. `data` is borrowed from the caller's Py_buffer and valid for
 * the one call that reads it; `pos` never passes `size`. */
typedef struct {
    const uint8_t *data;
    Py_ssize_t size;
    Py_ssize_t pos;
} PageReader;

/* The bytes of a page being written, owned by the writer (PyMem), released by writer_free or
 * handed to a bytes object by writer_finish. */
typedef struct {
    uint8_t *data;
    Py_ssize_t size;
    Py_ssize_t capacity;
} PageWriter;

int read_byte(PageReader *reader, uint8_t *out, const char *what);
int read_varint(PageReader *reader, uint64_t *out);
int read_varints(PageReader *reader, Py_ssize_t count, uint64_t *out);
/* Fills the `count` slots of `out` from the column at the reader: the int64 delta block, or the
 * frame block when the byte after its first varint carries PAGE_FRAME_WIDTH_FLAG (count > 1). */
int read_int64_column(PageReader *reader, Py_ssize_t count, uint64_t *out);
/* `count` values of `width` (0..64) bits at the reader (the packing layout), each plus `base`
 * (wrapping) into out: `base` alone at width 0. */
int read_above(PageReader *reader, Py_ssize_t count, int width, uint64_t base, uint64_t *out);
int read_int64_deltas(PageReader *reader, Py_ssize_t count, uint64_t *out);
/* The delta block after its first varint (width, base, gaps), out[0] holding the first value. */
int read_int64_gaps(PageReader *reader, Py_ssize_t count, uint64_t *out);

void writer_free(PageWriter *writer);
/* The written bytes as a new bytes object (NULL on error); the writer is freed either way. */
PyObject *writer_finish(PageWriter *writer);
int write_byte(PageWriter *writer, uint8_t byte);
int write_bytes(PageWriter *writer, const void *bytes, Py_ssize_t size);
int write_varint(PageWriter *writer, uint64_t value);
Py_ssize_t varint_size(uint64_t value);
int write_int64_deltas(PageWriter *writer, const uint64_t *values, Py_ssize_t count);
/* The delta block of `count` >= 1 values without its first varint (width, base, gaps). */
int write_int64_gaps(PageWriter *writer, const uint64_t *values, Py_ssize_t count);
/* values[i] - base, each below 2**width (0..64), bit-packed (the packing layout; nothing at
 * width 0). */
int write_packed(PageWriter *writer, const uint64_t *values, Py_ssize_t count, int width,
                 uint64_t base);
/* The shorter of the delta and the frame block of `count` >= 1 values, deltas on a tie. */
int write_int64_column(PageWriter *writer, const uint64_t *values, Py_ssize_t count);

/* `count` <= PAGE_MAX_ENTRIES front-coded strings as a new list of bytes (as_text 0) or str
 * decoded from UTF-8 with surrogatepass (as_text 1). */
PyObject *read_front_coded(PageReader *reader, Py_ssize_t count, int as_text);
/* The one value of a str/bytes column in the constant form (form byte 00), a new reference,
 * the reader moved past the column; Py_None (a new reference), the reader unmoved, for the
 * other forms. */
PyObject *read_constant_string(PageReader *reader, int as_text);
/* The str/bytes column (form byte and body) of `count` values, as a new list. */
PyObject *read_string_column(PageReader *reader, Py_ssize_t count, int as_text);

/* One string of a list to encode: borrowed from the list's item (a bytes object, or a str's
 * cached UTF-8), valid while the list holds the item and no Python code runs. */
typedef struct {
    const char *data;
    Py_ssize_t size;
} PageString;

/* The strings of the exact str (as_text 1) or exact bytes items of `items`, in `out` (room for
 * `count`); PAGE_NOT_HANDLED for any other item or a str that is not valid UTF-8 (surrogates). */
int borrow_strings(PyObject **items, Py_ssize_t count, int as_text, PageString *out);
int write_front_coded(PageWriter *writer, const PageString *strings, Py_ssize_t count);
int write_string_column(PageWriter *writer, const PageString *strings, Py_ssize_t count);

/* Leaf bodies (_pages.c). read_int64_key_words fills `out` with the `count` keys of an int64
 * key block (shift byte and delta block), checked as page.decode_keys checks them.
 * read_values returns the value column of `count` entries as a new list, or Py_None (a new
 * reference) for an object column that the reference must decode (its constant and mixed
 * forms); read_value_at returns its value at `index` < `count` alone (the whole column is read
 * and checked, so a damaged column fails as read_values fails), or Py_None likewise. Kinds are
 * those of _pages.c; `scratch` has room for `count` words. */
int read_int64_key_words(PageReader *reader, Py_ssize_t count, uint64_t *out);
PyObject *read_values(PageReader *reader, Py_ssize_t count, int value_kind, uint64_t *scratch);
PyObject *read_value_at(PageReader *reader, Py_ssize_t count, int value_kind, Py_ssize_t index,
                        uint64_t *scratch);

/* Compact forms of inner nodes (forms.c, whose header comment states their invariant). A form
 * holds an Inner's `n` child record ids and its n - 1 separators as words (int64 values, or the
 * 8-byte big-endian prefixes of str/bytes keys, with the key objects themselves), and a strong
 * reference to the Inner for its live entry counts. */
typedef struct {
    Py_ssize_t refs;              /* the table's reference and those of the reads using it */
    int64_t recid;
    PyObject *node;               /* strong: the cached Inner it was made from */
    Py_ssize_t n;                 /* children */
    Py_ssize_t bytes;             /* the block's size */
    Py_ssize_t n_separators_held; /* separators[:n_separators_held] are strong references */
    int64_t *children;            /* n record ids */
    uint64_t *words;              /* n - 1 separator words */
    PyObject **separators;        /* str/bytes trees: n - 1 separators; NULL for int64 */
    int64_t data[];               /* children, then words, then separators */
} InnerForm;

/* Forms by record id; zeroed memory is an empty table. */
typedef struct {
    InnerForm **slots;
    Py_ssize_t capacity;          /* slots, a power of two (0 before the first form) */
    Py_ssize_t count;
    Py_ssize_t form_bytes;        /* the bytes of the forms held */
} FormTable;

/* The 8-byte big-endian, zero-padded prefix of a bytes key, and of a str key's UTF-8. */
uint64_t bytes_prefix(const unsigned char *bytes, Py_ssize_t size);
uint64_t str_prefix(PyObject *text);
/* The form of Inner `node` of record `recid` (refs 1), NULL with CorruptionError if its lists are
 * not those of an inner node of the key kind. */
InnerForm *form_make(int64_t recid, PyObject *node, int key_kind);
size_t form_bytes(Py_ssize_t n, int key_kind);
/* Drop one reference (NULL: nothing); the last frees the form. */
void form_release(InnerForm *form);
/* A borrowed form, or NULL. */
InnerForm *form_table_find(const FormTable *table, int64_t recid);
/* Take over the table's reference to `form`, replacing any form of its recid; -1 on no memory. */
int form_table_insert(FormTable *table, InnerForm *form);
void form_table_forget(FormTable *table, int64_t recid);
/* A structural change edited the cached inner node `recid` of an int64 tree: its separator `at`
 * became `separator` (set_separator), or `separator` went in before separator `at` and `child`
 * after child `at` (insert_child, as a split of child `at` adds its right half). The form, if
 * there is one, follows the edit in place; one a read holds, or of a str/bytes tree, is dropped
 * instead (so is one that cannot grow without memory). */
void form_table_set_separator(FormTable *table, int64_t recid, Py_ssize_t at, int64_t separator);
void form_table_insert_child(FormTable *table, int64_t recid, Py_ssize_t at, int64_t separator,
                             int64_t child);
void form_table_clear(FormTable *table);
int form_table_traverse(const FormTable *table, visitproc visit, void *arg);

/* _pages.c: (keys, values) of the `count` entries of a leaf body at the reader, a new tuple of
 * the keys (a new key column with `key_column`, columns.c, else a new list) and a new list of
 * the values; Py_None (a new reference) when the reference must decode them (declined forms). */
PyObject *read_entries(PageReader *reader, Py_ssize_t count, int key_kind, int value_kind,
                       int key_column);

/* The compiled descent (descent.c): adds the type Descent to the module; 0, or -1 with an
 * exception set. */
int add_descent_type(PyObject *module);
/* Whether `object` is a Descent. */
int is_descent(PyObject *object);
/* The value of `key` (an object of the tree's key type) in the tree of the shape the Descent was
 * last given (set_shape), as its leaf holds it, or a new reference to `dflt`; NULL with an
 * exception. May call Python code (the node cache) when a node is not cached. */
PyObject *descent_lookup(PyObject *descent, PyObject *key, PyObject *dflt);

/* Copy the page of record `recid` (a Python int) of the RecordStore `store` out of it, through
 * the caller's `source` of the store's arrays (records.h; NULL: none kept): into `small` when
 * it has room (`small_size` bytes), else into a PyMem block the caller frees; in *page and
 * *size. 1 when it is not a raw leaf page (nothing copied: the reference reads it), 0 when
 * copied, -1 with an exception (KeyError for a free record, CorruptionError for an empty one or
 * one outside its segment). (descent.c) */
struct RecordSource;
int copy_record_page(PyObject *store, struct RecordSource *source, PyObject *recid,
                     uint8_t *small, Py_ssize_t small_size, uint8_t **page, Py_ssize_t *size);
/* The raw leaf page (flags 00, varint count, body) of `count` >= 1 int64 keys given as words
 * (ascending) and their `count` values, as _pages.encode_leaf writes it: a new bytes object,
 * Py_None (a new reference) when the reference must encode it, NULL with an exception.
 * (_pages.c) */
PyObject *encode_int64_leaf_page(const uint64_t *keys, Py_ssize_t count, PyObject **values,
                                 int value_kind);

#define MAX_HEIGHT 64           /* far above any tree of 2^63 entries at node_size >= 4 */

/* One level of a change's walk: an Inner (a strong reference) and the child index taken. */
typedef struct {
    PyObject *node;
    int64_t recid;               /* the node's record id */
    Py_ssize_t child;
} WalkStep;

/* The walk of a change (Cursor.descend's inner levels, as walk below and _walk do) by the
 * Descent's compact forms, from the root of the shape it was last given: the (Inner, child)
 * steps (room for MAX_HEIGHT) and the leaf's record id; with `touch` each inner node becomes
 * the most recently used in the cache as it is walked, as NodeCache.inner leaves it, else the
 * LRU order is left as it is and descent_walk_touch does the same later (a walk that may end in
 * no change: a TreeSet's add of a present element). `key` is an exact key of the tree's kind (an
 * int in int64's range for int64 trees). 1; 0 when an inner node on the way is not cached
 * (loading it may put the cache over capacity, which the reference trims before its walk: the
 * caller leaves the change to it), -1 with an exception; no step is held unless 1.
 * walk_steps_clear drops the first `n` steps' references. (descent.c) */
int descent_walk(PyObject *descent, PyObject *key, WalkStep *steps, Py_ssize_t *n_steps,
                 int64_t *leaf, int touch);
/* Make the inner nodes of a walk's `n` steps the most recently used, in order: 0, or -1 with an
 * exception. */
int descent_walk_touch(PyObject *descent, const WalkStep *steps, Py_ssize_t n);
/* Whether leaf `recid` holds `key` (an exact key of the tree's kind), read as NodeCache.read_leaf
 * reads it: the cached leaf, else its page (searched in place when the compiled codec reads
 * it), nothing cached or moved. 1, 0, or -1 with an exception. (descent.c) */
int descent_leaf_holds(PyObject *descent, int64_t recid, PyObject *key);
void walk_steps_clear(WalkStep *steps, Py_ssize_t n);
/* The Descent's form of inner node `recid` after a structural change edited the node: as
 * form_table_set_separator and form_table_insert_child (forms.c) say, or dropped. (descent.c) */
void descent_separator_set(PyObject *descent, int64_t recid, Py_ssize_t at, int64_t separator);
void descent_child_inserted(PyObject *descent, int64_t recid, Py_ssize_t at, int64_t separator,
                            int64_t child);
void descent_form_drop(PyObject *descent, int64_t recid);
/* The NodeCache's OrderedDicts of inner nodes and of leaves the Descent reads (borrowed: the
 * cache keeps the same two dicts for its lifetime). (descent.c) */
PyObject *descent_inner_nodes(PyObject *descent);
PyObject *descent_leaves(PyObject *descent);
/* Whether the cache's leaves are below their capacity, as NodeCache._leaf_cap computes it (from
 * NodeCache.leaf_cap_terms, read when the Descent was made, and the inner nodes cached now), so
 * that caching one more leaf keeps the cache within it. (descent.c) */
int descent_leaves_have_room(PyObject *descent);
/* The leaves the cache keeps beside the inner nodes cached now (NodeCache._leaf_cap), and whether
 * the inner nodes are past theirs (_inner_cap). (descent.c) */
Py_ssize_t descent_leaf_capacity(PyObject *descent);
int descent_inner_over_capacity(PyObject *descent);
/* Leaf `recid`, not cached, read into the cache as NodeCache.leaf reads it, from a raw page in C;
 * Py_None for a page the reference decodes. (descent.c) */
PyObject *descent_cache_leaf(PyObject *descent, PyObject *recid);

/* Range scans that walk the tree in C (ranges.c drives them, descent.c reads the leaves). A scan
 * remembers between two leaves only where the next one starts (`seek`, a key), so no node is held
 * while the map's lock is let go. */
typedef struct {
    PyObject *lo, *hi;           /* the range's bounds (strong), NULL where unbounded */
    int lo_inclusive, hi_inclusive, reverse;
    PyObject *seek;              /* the next leaf holds this key (strong); NULL: the near end */
    int seek_inclusive;
    int done;                    /* no leaf after the last one read holds a key of the range */
} ScanBounds;

/* The entries of one leaf that lie in the range, in scan order. */
typedef struct {
    PyObject *keys;              /* a new list; NULL: the keys are words[:count] (an int64 page) */
    PyObject *values;            /* a new list, or NULL when values were not asked for */
    uint64_t *words;             /* room for PAGE_MAX_ENTRIES words, owned by the scan */
    Py_ssize_t count;
} ScanChunk;

/* The next leaf of a scan (descent.c), as RangeScan.next_chunk reads it: its entries in the range
 * into `out` (count 0 when none; lists as the chunk's, which the caller clears), and `scan`
 * moved past it. The caller holds the map's lock; the Descent's shape (set_shape) is the tree's.
 * 0, or -1 with an exception. */
int descent_scan_leaf(PyObject *descent, ScanBounds *scan, int with_values, ScanChunk *out);

/* The map's lock (slots.c): lock_take calls acquire() (which may give up the GIL) and returns a
 * new reference to `release`; lock_give calls it (consumed), keeping an exception set before.
 * The bound methods of a MapLock (offheap.collection._lock) are not called: the lock is taken and
 * given through its C interface, which does the same without a Python call. */
PyObject *lock_take(PyObject *acquire, PyObject *release);
int lock_give(PyObject *release);

/* scan(descent, lock, lo, hi, lo_inclusive, hi_inclusive, reverse, what, source, name,
 * changed_error, scalar_types, fresh) (ranges.c): a RangeItems that walks the tree itself. */
PyObject *range_scan(PyObject *module, PyObject *args, PyObject *kwargs);

/* walk(inner_nodes, inner_of, root, levels, key) (walk.c): the inner levels of a change's
 * descent, as (path, lo, hi, leaf recid); METH_FASTCALL. */
PyObject *walk(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* The item slots of a TreeMap (slots.c): adds the base type TreeSlots to the module. */
int add_slots_type(PyObject *module);
/* The element slots of a TreeSet (setslots.c): adds the base type SetSlots to the module. */
int add_set_slots_type(PyObject *module);
/* The iteration of a range (ranges.c): adds the type RangeItems to the module. */
int add_range_type(PyObject *module);

#endif
