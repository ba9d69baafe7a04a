/* The record store's free space and page rewrite in C (layer 4): the twin of
 * offheap/store/freespace.py (type FreeSpace) and of the common cases of RecordStore.update
 * (offheap/store/records.py), which are their reference.
 *
 * FreeSpace. The same pieces, the same merging and the same choices as the reference, so both
 * give the same addresses in the same order: a piece is a slot of a pool; `starts` and `ends`
 * are hash tables from its start address and its end address to its slot (linear probing,
 * deletion by backward shift); the pieces of one size form a doubly linked list in the order
 * they became free, whose tail is the one `take` hands out (the reference's
 * next(reversed(bucket))); the sizes that have pieces are kept ascending in `sizes`, with each
 * list's head and tail beside them (bisect for a best fit, O(n) to add or drop a size, as the
 * reference's insort). `pieces()` lists them by address (the reference: in the order made).
 *
 * update(store, recid, data). RecordStore.update to data that is neither empty nor large, of a
 * record that is not large (an empty one gets its first chunk): rewritten in place (same small size class, same chunk, or grown into the
 * free bytes or the bump space right after it), else moved to an exact free piece, the bump
 * segment's next bytes or the best-fitting larger piece, the old chunk freed and merged (a free
 * run that ends at the bump pointer moves it back). A change that needs a new segment or any
 * other case is declined (False) before anything changes, and the reference makes it: only the
 * arena can fail to allocate, so this path never raises CapacityError. The same logic is
 * offered to other extensions (offheap/treemap/csrc/around.c) through the capsule
 * offheap.store._space._C_API (space_api.h), without a Python call per page.
 *
 * Thread safety: none; the store's owner serializes access, and every call holds the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "csrc/space_api.h"

#define EMPTY_KEY UINT64_MAX          /* records.FREE_ADDR: never the start or end of a piece */
#define LARGE_RECORD_BYTES (256 * 1024)
#define SMALL_CLASS_LIMIT 4096
#define SMALL_CLASS_BITS 2
#define POSITION_MASK 0xFFFFFFFFull

/* -- hash tables: uint64 address -> piece slot ---------------------------------------------------- */

typedef struct {
    uint64_t *keys;
    int32_t *slots;
    size_t mask;      /* capacity - 1 (a power of two), or 0 before the first insert */
    size_t used;
} Table;

static size_t
table_home(const Table *table, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & table->mask;
}

/* The slot of `key`, or -1. */
static int32_t
table_get(const Table *table, uint64_t key)
{
    if (table->mask == 0)
        return -1;
    for (size_t i = table_home(table, key);; i = (i + 1) & table->mask) {
        if (table->keys[i] == key)
            return table->slots[i];
        if (table->keys[i] == EMPTY_KEY)
            return -1;
    }
}

static int table_put(Table *table, uint64_t key, int32_t slot);

static int
table_grow(Table *table)
{
    size_t capacity = table->mask ? 2 * (table->mask + 1) : 64;
    Table grown = {PyMem_Malloc(capacity * sizeof(uint64_t)), PyMem_Malloc(capacity * sizeof(int32_t)),
                   capacity - 1, 0};
    if (grown.keys == NULL || grown.slots == NULL) {
        PyMem_Free(grown.keys);
        PyMem_Free(grown.slots);
        PyErr_NoMemory();
        return -1;
    }
    memset(grown.keys, 0xFF, capacity * sizeof(uint64_t));
    for (size_t i = 0; table->mask && i <= table->mask; i++)
        if (table->keys[i] != EMPTY_KEY)
            table_put(&grown, table->keys[i], table->slots[i]);
    PyMem_Free(table->keys);
    PyMem_Free(table->slots);
    *table = grown;
    return 0;
}

/* Map `key` (not present) to `slot`; 0, or -1 with MemoryError and nothing changed. */
static int
table_put(Table *table, uint64_t key, int32_t slot)
{
    if (2 * (table->used + 1) > table->mask + 1 && table_grow(table) < 0)
        return -1;
    size_t i = table_home(table, key);
    while (table->keys[i] != EMPTY_KEY)
        i = (i + 1) & table->mask;
    table->keys[i] = key;
    table->slots[i] = slot;
    table->used++;
    return 0;
}

/* Drop `key` (present), shifting back the entries of its probe run. */
static void
table_drop(Table *table, uint64_t key)
{
    size_t i = table_home(table, key);
    while (table->keys[i] != key)
        i = (i + 1) & table->mask;
    for (size_t j = (i + 1) & table->mask; table->keys[j] != EMPTY_KEY; j = (j + 1) & table->mask) {
        size_t home = table_home(table, table->keys[j]);
        /* entry j may fill hole i when its home does not lie in (i, j] (cyclically) */
        if (((j - home) & table->mask) >= ((j - i) & table->mask)) {
            table->keys[i] = table->keys[j];
            table->slots[i] = table->slots[j];
            i = j;
        }
    }
    table->keys[i] = EMPTY_KEY;
    table->used--;
}

/* -- FreeSpace ---------------------------------------------------------------------------------- */

typedef struct {
    uint64_t addr, size;
    int32_t prev, next;   /* in the list of its size (-1 at the ends); `next` chains unused slots */
} Piece;

typedef struct {
    PyObject_HEAD
    Piece *pool;
    int32_t pool_size, pool_used, unused;  /* `unused`: the first unused slot below pool_used */
    Table starts, ends;
    uint64_t *sizes;            /* the sizes that have pieces, ascending */
    int32_t *heads, *tails;     /* the first and last piece of each */
    Py_ssize_t n_sizes, sizes_room;
    uint64_t nbytes;
} FreeSpace;

static PyTypeObject FreeSpaceType;

static Py_ssize_t
size_index(const FreeSpace *self, uint64_t size)  /* bisect_left */
{
    Py_ssize_t low = 0, high = self->n_sizes;
    while (low < high) {
        Py_ssize_t mid = low + (high - low) / 2;
        if (self->sizes[mid] < size)
            low = mid + 1;
        else
            high = mid;
    }
    return low;
}

/* Room for one more piece, one more size and one more key in each table, so that an insert
 * that follows cannot fail: 0, or -1 with MemoryError and nothing changed. */
static int
space_reserve(FreeSpace *self)
{
    if (self->unused < 0 && self->pool_used == self->pool_size) {
        int32_t room = self->pool_size ? 2 * self->pool_size : 64;
        Piece *pool = PyMem_Realloc(self->pool, (size_t)room * sizeof(Piece));
        if (pool == NULL)
            goto no_memory;
        self->pool = pool;
        self->pool_size = room;
    }
    if (self->n_sizes == self->sizes_room) {
        Py_ssize_t room = self->sizes_room ? 2 * self->sizes_room : 64;
        uint64_t *sizes = PyMem_Realloc(self->sizes, (size_t)room * sizeof(uint64_t));
        if (sizes != NULL)
            self->sizes = sizes;
        int32_t *heads = sizes ? PyMem_Realloc(self->heads, (size_t)room * sizeof(int32_t)) : NULL;
        if (heads != NULL)
            self->heads = heads;
        int32_t *tails = heads ? PyMem_Realloc(self->tails, (size_t)room * sizeof(int32_t)) : NULL;
        if (tails == NULL)
            goto no_memory;
        self->tails = tails;
        self->sizes_room = room;
    }
    if ((2 * (self->starts.used + 1) > self->starts.mask + 1 && table_grow(&self->starts) < 0)
            || (2 * (self->ends.used + 1) > self->ends.mask + 1 && table_grow(&self->ends) < 0))
        return -1;
    return 0;
no_memory:
    PyErr_NoMemory();
    return -1;
}

/* FreeSpace._insert, after space_reserve (cannot fail). */
static void
space_insert(FreeSpace *self, uint64_t addr, uint64_t size)
{
    int32_t slot = self->unused;
    if (slot >= 0)
        self->unused = self->pool[slot].next;
    else
        slot = self->pool_used++;
    Piece *piece = &self->pool[slot];
    piece->addr = addr;
    piece->size = size;
    piece->next = -1;
    table_put(&self->starts, addr, slot);
    table_put(&self->ends, addr + size, slot);
    Py_ssize_t i = size_index(self, size);
    if (i == self->n_sizes || self->sizes[i] != size) {
        memmove(self->sizes + i + 1, self->sizes + i, (size_t)(self->n_sizes - i) * sizeof(uint64_t));
        memmove(self->heads + i + 1, self->heads + i, (size_t)(self->n_sizes - i) * sizeof(int32_t));
        memmove(self->tails + i + 1, self->tails + i, (size_t)(self->n_sizes - i) * sizeof(int32_t));
        self->n_sizes++;
        self->sizes[i] = size;
        self->heads[i] = slot;
        piece->prev = -1;
    }
    else {
        piece->prev = self->tails[i];
        self->pool[self->tails[i]].next = slot;
    }
    self->tails[i] = slot;
    self->nbytes += size;
}

/* FreeSpace.remove of the piece in `slot`: its size. */
static uint64_t
space_remove(FreeSpace *self, int32_t slot)
{
    Piece *piece = &self->pool[slot];
    uint64_t size = piece->size;
    table_drop(&self->starts, piece->addr);
    table_drop(&self->ends, piece->addr + size);
    Py_ssize_t i = size_index(self, size);
    if (piece->prev >= 0)
        self->pool[piece->prev].next = piece->next;
    else
        self->heads[i] = piece->next;
    if (piece->next >= 0)
        self->pool[piece->next].prev = piece->prev;
    else
        self->tails[i] = piece->prev;
    if (self->heads[i] < 0) {
        self->n_sizes--;
        memmove(self->sizes + i, self->sizes + i + 1, (size_t)(self->n_sizes - i) * sizeof(uint64_t));
        memmove(self->heads + i, self->heads + i + 1, (size_t)(self->n_sizes - i) * sizeof(int32_t));
        memmove(self->tails + i, self->tails + i + 1, (size_t)(self->n_sizes - i) * sizeof(int32_t));
    }
    piece->next = self->unused;
    self->unused = slot;
    self->nbytes -= size;
    return size;
}

/* FreeSpace.add: 0 with the merged piece in *start and *size, or -1 with MemoryError and
 * nothing changed. */
static int
space_add(FreeSpace *self, uint64_t addr, uint64_t nbytes, uint64_t *start, uint64_t *size)
{
    if (space_reserve(self) < 0)
        return -1;
    int32_t before = table_get(&self->ends, addr);
    if (before >= 0) {
        addr = self->pool[before].addr;
        nbytes += space_remove(self, before);
    }
    int32_t after = table_get(&self->starts, addr + nbytes);
    if (after >= 0)
        nbytes += space_remove(self, after);
    space_insert(self, addr, nbytes);
    *start = addr;
    *size = nbytes;
    return 0;
}

/* FreeSpace.take_at: 1 taken, 0 not, -1 with MemoryError and nothing changed. */
static int
space_take_at(FreeSpace *self, uint64_t addr, uint64_t nbytes)
{
    int32_t slot = table_get(&self->starts, addr);
    if (slot < 0 || self->pool[slot].size < nbytes)
        return 0;
    if (space_reserve(self) < 0)
        return -1;
    uint64_t size = space_remove(self, slot);
    if (size > nbytes)
        space_insert(self, addr + nbytes, size - nbytes);
    return 1;
}

/* FreeSpace.take: 1 with the address in *addr, 0 when there is none, -1 with MemoryError and
 * nothing changed. */
static int
space_take(FreeSpace *self, uint64_t nbytes, int split, uint64_t *addr)
{
    Py_ssize_t i = size_index(self, nbytes);
    if (i < self->n_sizes && self->sizes[i] == nbytes) {
        *addr = self->pool[self->tails[i]].addr;
        space_remove(self, self->tails[i]);
        return 1;
    }
    if (!split || i == self->n_sizes)
        return 0;
    *addr = self->pool[self->tails[i]].addr;
    return space_take_at(self, *addr, nbytes);
}

static PyObject *
FreeSpace_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) || (kwargs != NULL && PyDict_GET_SIZE(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "FreeSpace() takes no arguments");
        return NULL;
    }
    FreeSpace *self = (FreeSpace *)type->tp_alloc(type, 0);
    if (self != NULL)
        self->unused = -1;
    return (PyObject *)self;
}

static void
FreeSpace_dealloc(FreeSpace *self)
{
    PyMem_Free(self->pool);
    PyMem_Free(self->starts.keys);
    PyMem_Free(self->starts.slots);
    PyMem_Free(self->ends.keys);
    PyMem_Free(self->ends.slots);
    PyMem_Free(self->sizes);
    PyMem_Free(self->heads);
    PyMem_Free(self->tails);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Whether a method got `n` positional arguments (else TypeError). */
static int
arguments(const char *name, Py_ssize_t nargs, Py_ssize_t n)
{
    if (nargs == n)
        return 1;
    PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, n, nargs);
    return 0;
}

static int
unsigned_arg(PyObject *arg, uint64_t *out)
{
    *out = PyLong_AsUnsignedLongLong(arg);
    return *out == (uint64_t)-1 && PyErr_Occurred() ? -1 : 0;
}

static PyObject *
FreeSpace_add(FreeSpace *self, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t addr, nbytes, start, size;
    if (!arguments("add", nargs, 2) || unsigned_arg(args[0], &addr) < 0
            || unsigned_arg(args[1], &nbytes) < 0)
        return NULL;
    if (nbytes == 0) {
        PyErr_SetString(PyExc_ValueError, "a free piece holds at least one byte");
        return NULL;
    }
    if (space_add(self, addr, nbytes, &start, &size) < 0)
        return NULL;
    return Py_BuildValue("(KK)", (unsigned long long)start, (unsigned long long)size);
}

static PyObject *
FreeSpace_take(FreeSpace *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"nbytes", "split", NULL};
    PyObject *nbytes_arg, *split_arg = Py_True;
    uint64_t nbytes, addr;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:take", keywords, &nbytes_arg, &split_arg)
            || unsigned_arg(nbytes_arg, &nbytes) < 0)
        return NULL;
    int split = PyObject_IsTrue(split_arg);
    if (split < 0)
        return NULL;
    int taken = space_take(self, nbytes, split, &addr);
    if (taken < 0)
        return NULL;
    if (!taken)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(addr);
}

static PyObject *
FreeSpace_take_at(FreeSpace *self, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t addr, nbytes;
    if (!arguments("take_at", nargs, 2) || unsigned_arg(args[0], &addr) < 0
            || unsigned_arg(args[1], &nbytes) < 0)
        return NULL;
    int taken = space_take_at(self, addr, nbytes);
    return taken < 0 ? NULL : PyBool_FromLong(taken);
}

static PyObject *
FreeSpace_remove(FreeSpace *self, PyObject *arg)
{
    uint64_t addr;
    if (unsigned_arg(arg, &addr) < 0)
        return NULL;
    int32_t slot = table_get(&self->starts, addr);
    if (slot < 0) {
        PyErr_SetObject(PyExc_KeyError, arg);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(space_remove(self, slot));
}

static int
by_address(const void *a, const void *b)
{
    uint64_t x = ((const Piece *)a)->addr, y = ((const Piece *)b)->addr;
    return (x > y) - (x < y);
}

/* The live pieces, by address (a PyMem array of starts.used, or NULL with MemoryError). */
static Piece *
space_pieces(const FreeSpace *self)
{
    Piece *pieces = PyMem_Malloc((self->starts.used + 1) * sizeof(Piece));
    if (pieces == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; self->starts.mask && i <= self->starts.mask; i++)
        if (self->starts.keys[i] != EMPTY_KEY)
            pieces[n++] = self->pool[self->starts.slots[i]];
    qsort(pieces, n, sizeof(Piece), by_address);
    return pieces;
}

static PyObject *
FreeSpace_pieces(FreeSpace *self, PyObject *Py_UNUSED(ignored))
{
    Piece *pieces = space_pieces(self);
    PyObject *list = pieces == NULL ? NULL : PyList_New((Py_ssize_t)self->starts.used);
    for (size_t i = 0; list != NULL && i < self->starts.used; i++) {
        PyObject *item = Py_BuildValue("(KK)", (unsigned long long)pieces[i].addr,
                                       (unsigned long long)pieces[i].size);
        if (item == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    PyMem_Free(pieces);
    PyObject *iterator = list == NULL ? NULL : PyObject_GetIter(list);
    Py_XDECREF(list);
    return iterator;
}

#define CHECK(condition, ...) do { if (!(condition)) { \
    PyErr_Format(PyExc_AssertionError, __VA_ARGS__); goto done; } } while (0)

static PyObject *
FreeSpace_check(FreeSpace *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *result = NULL;
    Piece *pieces = space_pieces(self);
    if (pieces == NULL)
        return NULL;
    size_t n = self->starts.used, listed = 0;
    uint64_t total = 0;
    CHECK(self->ends.used == n, "%zu ends for %zu pieces", self->ends.used, n);
    for (size_t i = 0; i < n; i++) {
        const Piece *piece = &pieces[i];
        CHECK(piece->size > 0, "an empty piece at %#llx", (unsigned long long)piece->addr);
        CHECK(i == 0 || pieces[i - 1].addr + pieces[i - 1].size < piece->addr,
              "free pieces touch or overlap at %#llx", (unsigned long long)piece->addr);
        int32_t end = table_get(&self->ends, piece->addr + piece->size);
        CHECK(end >= 0 && self->pool[end].addr == piece->addr, "piece %#llx: no end entry",
              (unsigned long long)piece->addr);
        total += piece->size;
    }
    for (Py_ssize_t i = 0; i < self->n_sizes; i++) {
        CHECK(i == 0 || self->sizes[i - 1] < self->sizes[i], "sizes out of order");
        CHECK(self->heads[i] >= 0, "size %llu has no pieces", (unsigned long long)self->sizes[i]);
        int32_t prev = -1;
        for (int32_t slot = self->heads[i]; slot >= 0; slot = self->pool[slot].next, listed++) {
            CHECK(self->pool[slot].size == self->sizes[i] && self->pool[slot].prev == prev
                  && table_get(&self->starts, self->pool[slot].addr) == slot,
                  "the list of size %llu is broken", (unsigned long long)self->sizes[i]);
            prev = slot;
        }
        CHECK(self->tails[i] == prev, "the tail of size %llu", (unsigned long long)self->sizes[i]);
    }
    CHECK(listed == n, "%zu pieces listed by size, %zu by address", listed, n);
    CHECK(total == self->nbytes, "nbytes %llu, pieces %llu", (unsigned long long)self->nbytes,
          (unsigned long long)total);
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(pieces);
    return result;
}

static PyObject *
FreeSpace_get_nbytes(FreeSpace *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLongLong(self->nbytes);
}

static PyMethodDef FreeSpace_methods[] = {
    {"add", (PyCFunction)(void (*)(void))FreeSpace_add, METH_FASTCALL,
     "Free nbytes (> 0) at addr, merged with the pieces around it; the (start, size) of the "
     "piece that now holds them."},
    {"take", (PyCFunction)(void (*)(void))FreeSpace_take, METH_VARARGS | METH_KEYWORDS,
     "take(nbytes, split=True): the address of nbytes taken from free space, or None."},
    {"take_at", (PyCFunction)(void (*)(void))FreeSpace_take_at, METH_FASTCALL,
     "Take nbytes at addr if a piece of at least that size starts there; whether it did."},
    {"remove", (PyCFunction)FreeSpace_remove, METH_O,
     "Take the whole piece at addr out of free space; its size (KeyError if none starts there)."},
    {"pieces", (PyCFunction)FreeSpace_pieces, METH_NOARGS,
     "(start address, size) of every piece, by address."},
    {"_check", (PyCFunction)FreeSpace_check, METH_NOARGS,
     "Assert the invariants: the indexes agree, no two pieces touch, the total."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef FreeSpace_getset[] = {
    {"nbytes", (getter)FreeSpace_get_nbytes, NULL, "The bytes of all pieces.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject FreeSpaceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "offheap.store._space.FreeSpace",
    .tp_doc = "The free pieces of one record store (offheap.store.freespace.FreeSpace, in C).",
    .tp_basicsize = sizeof(FreeSpace),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = FreeSpace_new,
    .tp_dealloc = (destructor)FreeSpace_dealloc,
    .tp_methods = FreeSpace_methods,
    .tp_getset = FreeSpace_getset,
};

/* -- RecordStore.update ------------------------------------------------------------------------- */

static PyObject *str_free, *str_addr_at, *str_size_at, *str_views, *str_bump_seg, *str_bump_pos,
    *str_live_bytes, *str_chunk_bytes;

static uint64_t
chunk_bytes(uint64_t size)  /* records.chunk_bytes */
{
    if (size <= SMALL_CLASS_LIMIT)
        return (size + 3) & ~(uint64_t)3;
    int bits = 64 - __builtin_clzll(size);
    uint64_t step = (uint64_t)1 << (bits - 5);
    return (size + step - 1) / step * step;
}

/* Attribute `name` of the store, read from its instance dict `attrs` (its attributes are plain
 * ones: no type lookup per read); borrowed, or NULL with AttributeError. */
static PyObject *
store_attr(PyObject *attrs, PyObject *name)
{
    PyObject *value = PyDict_GetItemWithError(attrs, name);
    if (value == NULL && !PyErr_Occurred())
        PyErr_SetObject(PyExc_AttributeError, name);
    return value;
}

/* An int attribute of the store (-1 with an exception). */
static int
int_attr(PyObject *attrs, PyObject *name, long long *out)
{
    PyObject *value = store_attr(attrs, name);
    if (value == NULL)
        return -1;
    *out = PyLong_AsLongLong(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int
set_int_attr(PyObject *attrs, PyObject *name, long long value)
{
    PyObject *number = PyLong_FromLongLong(value);
    int status = number == NULL ? -1 : PyDict_SetItem(attrs, name, number);
    Py_XDECREF(number);
    return status;
}

/* The length of live segment `seg_no`'s view (-1 with an exception). */
static Py_ssize_t
segment_length(PyObject *views, long long seg_no)
{
    PyObject *view = seg_no < PyList_GET_SIZE(views) ? PyList_GET_ITEM(views, seg_no) : Py_None;
    if (view == Py_None) {
        PyErr_Format(PyExc_RuntimeError, "the record store names segment %lld, which it does not "
                     "hold", seg_no);
        return -1;
    }
    return PyObject_Length(view);
}

/* Copy `size` bytes to `addr` of the store's segments. */
static int
write_at(PyObject *views, uint64_t addr, const uint8_t *data, Py_ssize_t size)
{
    long long seg_no = (long long)(addr >> 32);
    Py_ssize_t pos = (Py_ssize_t)(addr & POSITION_MASK);
    PyObject *view = seg_no < PyList_GET_SIZE(views) ? PyList_GET_ITEM(views, seg_no) : Py_None;
    Py_buffer segment;
    if (view == Py_None || PyObject_GetBuffer(view, &segment, PyBUF_WRITABLE) < 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError, "the record store names segment %lld, which it "
                         "does not hold", seg_no);
        return -1;
    }
    int status = 0;
    if (pos > segment.len || size > segment.len - pos) {
        PyErr_Format(PyExc_RuntimeError, "a record of %zd bytes at %zd passes the end of segment "
                     "%lld", size, pos, seg_no);
        status = -1;
    }
    else
        memcpy((uint8_t *)segment.buf + pos, data, (size_t)size);
    PyBuffer_Release(&segment);
    return status;
}

/* The free space state update reads and changes, taken from the store. */
typedef struct {
    PyObject *attrs;            /* the store's instance dict */
    FreeSpace *free;
    PyObject *views;
    Py_buffer addrs, sizes;
    long long bump_seg, bump_pos, live_bytes, chunk_bytes;
} StoreState;

static void
state_close(StoreState *state)
{
    if (state->addrs.obj)
        PyBuffer_Release(&state->addrs);
    if (state->sizes.obj)
        PyBuffer_Release(&state->sizes);
    Py_XDECREF(state->views);
    Py_XDECREF((PyObject *)state->free);
    Py_XDECREF(state->attrs);
}

/* 1 with `state` read from `store`, 0 when it is not the compiled store's (a reference
 * FreeSpace), -1 with an exception. */
static int
state_open(PyObject *store, StoreState *state)
{
    memset(state, 0, sizeof *state);
    if ((state->attrs = PyObject_GenericGetDict(store, NULL)) == NULL)
        return -1;
    PyObject *free = store_attr(state->attrs, str_free);
    if (free == NULL)
        return -1;
    state->free = (FreeSpace *)Py_NewRef(free);
    if (!Py_IS_TYPE(free, &FreeSpaceType))
        return 0;
    if ((state->views = Py_XNewRef(store_attr(state->attrs, str_views))) == NULL)
        return -1;
    if (!PyList_CheckExact(state->views)) {
        PyErr_SetString(PyExc_TypeError, "the record store's segment views are not a list");
        return -1;
    }
    PyObject *addrs = store_attr(state->attrs, str_addr_at);
    if (addrs == NULL || PyObject_GetBuffer(addrs, &state->addrs, PyBUF_WRITABLE) < 0)
        return -1;
    PyObject *sizes = store_attr(state->attrs, str_size_at);
    if (sizes == NULL || PyObject_GetBuffer(sizes, &state->sizes, PyBUF_WRITABLE) < 0)
        return -1;
    if (!PyBuffer_IsContiguous(&state->addrs, 'C') || !PyBuffer_IsContiguous(&state->sizes, 'C')) {
        PyErr_SetString(PyExc_TypeError, "the record store's index is not contiguous");
        return -1;
    }
    if (int_attr(state->attrs, str_bump_seg, &state->bump_seg) < 0
            || int_attr(state->attrs, str_bump_pos, &state->bump_pos) < 0
            || int_attr(state->attrs, str_live_bytes, &state->live_bytes) < 0
            || int_attr(state->attrs, str_chunk_bytes, &state->chunk_bytes) < 0)
        return -1;
    return 1;
}

static uint64_t
bump_addr(const StoreState *state)
{
    return state->bump_seg < 0 ? EMPTY_KEY : (uint64_t)state->bump_seg << 32 | (uint64_t)state->bump_pos;
}

/* Whether `grow` more bytes fit the bump segment (-1 with an exception). */
static int
bump_fits(const StoreState *state, uint64_t grow)
{
    if (state->bump_seg < 0)
        return 0;
    Py_ssize_t length = segment_length(state->views, state->bump_seg);
    return length < 0 ? -1 : (uint64_t)state->bump_pos + grow <= (uint64_t)length;
}

/* RecordStore._grow_in_place: 1 grown, 0 not, -1 with an exception (nothing changed). */
static int
grow_in_place(StoreState *state, uint64_t addr, uint64_t old_chunk, uint64_t chunk)
{
    uint64_t end = addr + old_chunk, grow = chunk - old_chunk;
    int fits = end == bump_addr(state) ? bump_fits(state, grow) : 0;
    if (fits < 0)
        return -1;
    if (fits)
        state->bump_pos += (long long)grow;
    else if ((fits = space_take_at(state->free, end, grow)) != 1)
        return fits;
    state->chunk_bytes += (long long)grow;
    return 1;
}

/* RecordStore._allocate_chunk without a new segment: 1 with the address, 0 when it needs one,
 * -1 with an exception (nothing changed either way). */
static int
allocate_chunk(StoreState *state, uint64_t chunk, uint64_t *addr)
{
    int found = space_take(state->free, chunk, 0, addr);
    if (found == 0 && (found = bump_fits(state, chunk)) == 1) {
        *addr = bump_addr(state);
        state->bump_pos += (long long)chunk;
    }
    if (found == 0)
        found = space_take(state->free, chunk, 1, addr);
    if (found == 1)
        state->chunk_bytes += (long long)chunk;
    return found;
}

/* RecordStore._release_chunk of a small chunk (its _free_gap): 0, or -1 with an exception. */
static int
release_chunk(StoreState *state, uint64_t addr, uint64_t chunk)
{
    uint64_t start, nbytes;
    if (space_add(state->free, addr, chunk, &start, &nbytes) < 0)
        return -1;
    if (start + nbytes == bump_addr(state)) {
        space_remove(state->free, table_get(&state->free->starts, start));
        state->bump_pos = (long long)(start & POSITION_MASK);
    }
    state->chunk_bytes -= (long long)chunk;
    return 0;
}

static int
state_save(const StoreState *state, long long bump_pos, long long chunk_bytes, long long live_bytes)
{
    if (state->bump_pos != bump_pos && set_int_attr(state->attrs, str_bump_pos, state->bump_pos) < 0)
        return -1;
    if (state->chunk_bytes != chunk_bytes
            && set_int_attr(state->attrs, str_chunk_bytes, state->chunk_bytes) < 0)
        return -1;
    if (state->live_bytes != live_bytes
            && set_int_attr(state->attrs, str_live_bytes, state->live_bytes) < 0)
        return -1;
    return 0;
}

static int
space_update(PyObject *store, Py_ssize_t recid, const uint8_t *data, Py_ssize_t size)
{
    StoreState state;
    int result = state_open(store, &state);
    if (result != 1)
        goto done;
    result = 0;
    if (space_reserve(state.free) < 0)  /* then no step below allocates memory */
        goto fail;
    Py_ssize_t n = state.addrs.len / 8 < state.sizes.len / 4 ? state.addrs.len / 8 : state.sizes.len / 4;
    if (recid <= 0 || recid >= n)  /* the reference raises KeyError (ClosedError when closed) */
        goto done;
    uint64_t *addrs = state.addrs.buf;
    uint32_t *sizes = state.sizes.buf;
    uint64_t old_addr = addrs[recid], old_size = sizes[recid];
    int empty = old_addr == EMPTY_KEY - 1;  /* records.EMPTY_ADDR: a reserved record, no chunk */
    if (old_addr == EMPTY_KEY || (empty && old_size) || old_size > LARGE_RECORD_BYTES || size == 0
            || size > LARGE_RECORD_BYTES)
        goto done;
    long long bump_pos = state.bump_pos, chunk_bytes_before = state.chunk_bytes,
        live_bytes = state.live_bytes;
    uint64_t chunk = chunk_bytes((uint64_t)size), old_chunk = chunk_bytes(old_size), addr = old_addr;
    int in_place = !empty && chunk == old_chunk;  /* also every same small size class */
    if (!in_place && !empty && chunk > old_chunk
            && (in_place = grow_in_place(&state, old_addr, old_chunk, chunk)) < 0)
        goto fail;
    if (!in_place) {
        int found = allocate_chunk(&state, chunk, &addr);
        if (found <= 0) {
            result = found;
            goto done;
        }
    }
    if (write_at(state.views, addr, data, size) < 0)
        goto fail;
    addrs[recid] = addr;
    sizes[recid] = (uint32_t)size;
    if (!in_place && !empty && release_chunk(&state, old_addr, old_chunk) < 0)
        goto fail;
    state.live_bytes += size - (long long)old_size;
    result = state_save(&state, bump_pos, chunk_bytes_before, live_bytes) < 0 ? -1 : 1;
    goto done;
fail:
    result = -1;
done:
    state_close(&state);
    return result;
}

static PyObject *
space_update_function(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (!arguments("update", nargs, 3))
        return NULL;
    Py_ssize_t recid = PyLong_AsSsize_t(args[1]);
    if (recid == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return NULL;
        PyErr_Clear();  /* the reference says which record does not exist */
        Py_RETURN_FALSE;
    }
    Py_buffer data;
    if (PyObject_GetBuffer(args[2], &data, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    int done = space_update(args[0], recid, data.buf, data.len);
    PyBuffer_Release(&data);
    return done < 0 ? NULL : PyBool_FromLong(done);
}

/* -- the module ---------------------------------------------------------------------------------- */

static PyMethodDef space_functions[] = {
    {"update", (PyCFunction)(void (*)(void))space_update_function, METH_FASTCALL,
     "update(store, recid, data): RecordStore.update to data neither empty nor large, of a "
     "record that is not large, when no new segment is needed: True done, False declined "
     "(nothing changed)."},
    {NULL, NULL, 0, NULL},
};

static const SpaceApi space_api = {space_update};

static int
space_exec(PyObject *module)
{
    static const char *names[] = {"_free", "_addr_at", "_size_at", "_views", "_bump_seg", "_bump_pos",
                                  "_live_bytes", "_chunk_bytes"};
    PyObject **slots[] = {&str_free, &str_addr_at, &str_size_at, &str_views, &str_bump_seg,
                          &str_bump_pos, &str_live_bytes, &str_chunk_bytes};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (*slots[i] == NULL && (*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    if (PyType_Ready(&FreeSpaceType) < 0
            || PyModule_AddObjectRef(module, "FreeSpace", (PyObject *)&FreeSpaceType) < 0)
        return -1;
    PyObject *capsule = PyCapsule_New((void *)&space_api, SPACE_API_CAPSULE, NULL);
    int status = capsule == NULL ? -1 : PyModule_AddObjectRef(module, "_C_API", capsule);
    Py_XDECREF(capsule);
    return status;
}

static PyModuleDef_Slot space_slots[] = {
    {Py_mod_exec, space_exec},
    {0, NULL},
};

static struct PyModuleDef space_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "offheap.store._space",
    .m_doc = "The record store's free space and the common cases of RecordStore.update, in C "
             "(offheap.store.freespace and offheap.store.records are the reference).",
    .m_size = 0,
    .m_methods = space_functions,
    .m_slots = space_slots,
};

PyMODINIT_FUNC
PyInit__space(void)
{
    return PyModuleDef_Init(&space_module);
}
