/* Compact forms of a TreeMap's cached inner nodes, and the table that holds them (layer 6).
 *
 * The compiled descent (descent.c) bisects one of these per level instead of the Inner's Python
 * lists: a form is one PyMem block holding the node's child record ids as int64 and its
 * separators as 64-bit words, so a level costs a probe of the table and a bisect over a few
 * contiguous cache lines, not a comparison of PyLong objects scattered over the heap.
 *
 * Words. For an int64 tree a separator's word is its value. For a str or bytes tree it is the
 * first 8 bytes of the key (of its UTF-8 for str, surrogates encoded as any other code point),
 * big-endian and zero-padded: UTF-8 orders as code points do, so a prefix below another's means
 * the key is below the other key, and only equal prefixes need the key objects compared (the
 * form holds them too).
 *
 * Invariant (what makes a stale form impossible): a form exists only for an inner node in the
 * NodeCache, and says what that node's separators and children are. It is made from the cached
 * Inner by a read, and dropped (Descent.forget / forget_all, called by offheap.treemap.nodecache)
 * when the node leaves the cache (eviction, discard, clear, replacement) and when a structural
 * change edited its separators or children (NodeWriter.commit, through NodeCache.changed), but
 * for the edits of the compiled write-around (around.c), which the form follows in place
 * (form_table_set_separator, form_table_insert_child) in the same call that edits the Inner. The
 * entry counts, which every insert and delete changes along its path, are not copied: the form
 * holds the Inner itself (a strong reference), whose counts the positional reads read live.
 *
 * Memory: a form is a 72-byte header plus 16 bytes per child (24 for str/bytes trees), on the
 * Python heap outside the store's limit; there is at most one per cached inner node, so a tree
 * holds at most cache_size of them (plus the few an operation adds before the next trim), and
 * the table at most 8 slot pointers per form (it doubles past half full and halves below an
 * eighth), 16 at least.
 *
 * Ownership: a form is reference-counted in C (`refs`): the table holds one reference and every
 * descent level reading it another, so a form dropped during a read stays valid until that read
 * ends. Thread safety: none; the GIL and the tree's lock cover every call.
 */
#include "pages.h"

#define TABLE_MIN_SLOTS 16

enum { FORM_KEY_INT64 = 0, FORM_KEY_STR = 1 };  /* key kinds as _pages numbers them; 2 bytes */

/* -- forms ----------------------------------------------------------------------------------- */

uint64_t
bytes_prefix(const unsigned char *bytes, Py_ssize_t size)
{
    uint64_t word = 0;
    for (Py_ssize_t i = 0; i < 8 && i < size; i++)
        word |= (uint64_t)bytes[i] << (56 - 8 * i);
    return word;
}

uint64_t
str_prefix(PyObject *text)
{
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    unsigned char bytes[8 + 3];  /* room for the last code point's spill */
    int filled = 0;
    for (Py_ssize_t i = 0; i < length && filled < 8; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x80)
            bytes[filled++] = (unsigned char)c;
        else if (c < 0x800) {
            bytes[filled++] = (unsigned char)(0xC0 | c >> 6);
            bytes[filled++] = (unsigned char)(0x80 | (c & 0x3F));
        }
        else if (c < 0x10000) {
            bytes[filled++] = (unsigned char)(0xE0 | c >> 12);
            bytes[filled++] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
            bytes[filled++] = (unsigned char)(0x80 | (c & 0x3F));
        }
        else {
            bytes[filled++] = (unsigned char)(0xF0 | c >> 18);
            bytes[filled++] = (unsigned char)(0x80 | (c >> 12 & 0x3F));
            bytes[filled++] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
            bytes[filled++] = (unsigned char)(0x80 | (c & 0x3F));
        }
    }
    return bytes_prefix(bytes, filled < 8 ? filled : 8);
}

static SlotField form_keys = SLOT_FIELD("keys"), form_children = SLOT_FIELD("children");

/* Fill the words (and, for str/bytes, the separator objects) of `form` from `keys`. */
static int
form_fill_separators(InnerForm *form, PyObject *keys, int key_kind)
{
    for (Py_ssize_t i = 0; i < form->n - 1; i++) {
        PyObject *item = PyList_GET_ITEM(keys, i);
        if (key_kind == FORM_KEY_INT64) {
            int overflow;
            if (!PyLong_CheckExact(item))
                return page_corrupt("an int64 TreeMap node holds a %.100s key",
                                    Py_TYPE(item)->tp_name);
            long long value = PyLong_AsLongLongAndOverflow(item, &overflow);
            if (overflow)
                return page_corrupt("an int64 TreeMap node holds a key outside int64");
            if (value == -1 && PyErr_Occurred())
                return -1;
            form->words[i] = (uint64_t)value;
            continue;
        }
        int text = key_kind == FORM_KEY_STR;
        if (text ? !PyUnicode_CheckExact(item) : !PyBytes_CheckExact(item))
            return page_corrupt("a %s TreeMap node holds a %.100s key", text ? "str" : "bytes",
                                Py_TYPE(item)->tp_name);
        form->words[i] = text ? str_prefix(item)
                              : bytes_prefix((const unsigned char *)PyBytes_AS_STRING(item),
                                             PyBytes_GET_SIZE(item));
        form->separators[i] = Py_NewRef(item);
        form->n_separators_held = i + 1;
    }
    return 0;
}

InnerForm *
form_make(int64_t recid, PyObject *node, int key_kind)
{
    PyObject *keys = node_list(node, &form_keys);
    PyObject *children = keys ? node_list(node, &form_children) : NULL;
    InnerForm *form = NULL;
    if (children == NULL)
        goto done;
    Py_ssize_t n = PyList_GET_SIZE(children);
    if (n < 1 || n > PAGE_MAX_ENTRIES || PyList_GET_SIZE(keys) != n - 1) {
        page_corrupt("TreeMap inner node %lld has %zd children and %zd separators",
                     (long long)recid, n, PyList_GET_SIZE(keys));
        goto done;
    }
    size_t bytes = form_bytes(n, key_kind);
    if ((form = PyMem_Malloc(bytes)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    form->refs = 1;
    form->recid = recid;
    form->node = Py_NewRef(node);
    form->n = n;
    form->bytes = (Py_ssize_t)bytes;
    form->children = form->data;
    form->words = (uint64_t *)(form->data + n);
    form->separators = key_kind == FORM_KEY_INT64 ? NULL : (PyObject **)(form->words + n - 1);
    form->n_separators_held = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *child = PyList_GET_ITEM(children, i);
        long long value = PyLong_CheckExact(child) ? PyLong_AsLongLong(child) : -1;
        if (value <= 0) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_OverflowError)) {
                PyErr_Clear();
                page_corrupt("TreeMap inner node %lld names child %R, not a record id",
                             (long long)recid, child);
            }
            goto failed;
        }
        form->children[i] = value;
    }
    if (form_fill_separators(form, keys, key_kind) == 0)
        goto done;
failed:
    form_release(form);
    form = NULL;
done:
    Py_XDECREF(children);
    Py_XDECREF(keys);
    return form;
}

size_t
form_bytes(Py_ssize_t n, int key_kind)
{
    size_t per_child = key_kind == FORM_KEY_INT64 ? 16 : 24;
    return sizeof(InnerForm) + per_child * (size_t)n;
}

void
form_release(InnerForm *form)
{
    if (form == NULL || --form->refs > 0)
        return;
    for (Py_ssize_t i = 0; i < form->n_separators_held; i++)
        Py_DECREF(form->separators[i]);
    Py_DECREF(form->node);
    PyMem_Free(form);
}

/* -- the table ------------------------------------------------------------------------------- */

/* Linear probing over a power-of-two array of form pointers (NULL: free), at most half full;
 * deletion shifts the following run back, so no tombstones are left. */

static size_t
slot_of(const FormTable *table, int64_t recid)
{
    return (size_t)(((uint64_t)recid * UINT64_C(0x9E3779B97F4A7C15)) >> 32)
           & (size_t)(table->capacity - 1);
}

/* The table's slot holding the form of `recid`, or NULL. */
static InnerForm **
table_slot(const FormTable *table, int64_t recid)
{
    if (table->count == 0)
        return NULL;
    size_t mask = (size_t)table->capacity - 1;
    for (size_t i = slot_of(table, recid);; i = (i + 1) & mask) {
        InnerForm *form = table->slots[i];
        if (form == NULL)
            return NULL;
        if (form->recid == recid)
            return &table->slots[i];
    }
}

InnerForm *
form_table_find(const FormTable *table, int64_t recid)
{
    InnerForm **slot = table_slot(table, recid);
    return slot == NULL ? NULL : *slot;
}

/* Re-place every form in a table of `capacity` slots. */
static int
table_resize(FormTable *table, Py_ssize_t capacity)
{
    InnerForm **slots = PyMem_Calloc((size_t)capacity, sizeof(InnerForm *));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    InnerForm **old = table->slots;
    Py_ssize_t old_capacity = table->capacity;
    table->slots = slots;
    table->capacity = capacity;
    size_t mask = (size_t)capacity - 1;
    for (Py_ssize_t j = 0; j < old_capacity; j++) {
        if (old[j] == NULL)
            continue;
        size_t i = slot_of(table, old[j]->recid);
        while (slots[i] != NULL)
            i = (i + 1) & mask;
        slots[i] = old[j];
    }
    PyMem_Free(old);
    return 0;
}

int
form_table_insert(FormTable *table, InnerForm *form)
{
    if (2 * (table->count + 1) > table->capacity
            && table_resize(table, table->capacity ? 2 * table->capacity : TABLE_MIN_SLOTS) < 0)
        return -1;
    size_t mask = (size_t)table->capacity - 1, i = slot_of(table, form->recid);
    while (table->slots[i] != NULL && table->slots[i]->recid != form->recid)
        i = (i + 1) & mask;
    if (table->slots[i] != NULL) {
        table->form_bytes -= table->slots[i]->bytes;
        form_release(table->slots[i]);
        table->count--;
    }
    table->slots[i] = form;
    table->count++;
    table->form_bytes += form->bytes;
    return 0;
}

void
form_table_set_separator(FormTable *table, int64_t recid, Py_ssize_t at, int64_t separator)
{
    InnerForm **slot = table_slot(table, recid);
    if (slot == NULL)
        return;
    InnerForm *form = *slot;
    if (form->separators != NULL || at < 0 || at >= form->n - 1)
        form_table_forget(table, recid);
    else
        form->words[at] = (uint64_t)separator;
}

void
form_table_insert_child(FormTable *table, int64_t recid, Py_ssize_t at, int64_t separator,
                        int64_t child)
{
    InnerForm **slot = table_slot(table, recid);
    if (slot == NULL)
        return;
    InnerForm *form = *slot;
    Py_ssize_t n = form->n;
    /* a read holding the form (refs > 1) keeps it as it is: the table drops it instead */
    if (form->separators != NULL || form->refs != 1 || at < 0 || at >= n
            || n >= PAGE_MAX_ENTRIES) {
        form_table_forget(table, recid);
        return;
    }
    size_t bytes = form_bytes(n + 1, FORM_KEY_INT64);
    InnerForm *grown = PyMem_Realloc(form, bytes);
    if (grown == NULL) {  /* the form is unchanged: dropping it is all it takes */
        form_table_forget(table, recid);
        return;
    }
    *slot = form = grown;
    int64_t *children = form->data;
    uint64_t *words = (uint64_t *)(children + n + 1);  /* one child more: the words move up */
    memmove(words, children + n, (size_t)(n - 1) * sizeof(uint64_t));
    memmove(words + at + 1, words + at, (size_t)(n - 1 - at) * sizeof(uint64_t));
    words[at] = (uint64_t)separator;
    memmove(children + at + 2, children + at + 1, (size_t)(n - 1 - at) * sizeof(int64_t));
    children[at + 1] = child;
    form->children = children;
    form->words = words;
    form->n = n + 1;
    table->form_bytes += (Py_ssize_t)bytes - form->bytes;
    form->bytes = (Py_ssize_t)bytes;
}

void
form_table_forget(FormTable *table, int64_t recid)
{
    if (table->count == 0)
        return;
    size_t mask = (size_t)table->capacity - 1, i = slot_of(table, recid);
    while (table->slots[i] != NULL && table->slots[i]->recid != recid)
        i = (i + 1) & mask;
    InnerForm *form = table->slots[i];
    if (form == NULL)
        return;
    table->slots[i] = NULL;
    /* shift back the forms after it whose home slot is not in the cyclic range (i, j] */
    for (size_t j = (i + 1) & mask; table->slots[j] != NULL; j = (j + 1) & mask) {
        size_t home = slot_of(table, table->slots[j]->recid);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            table->slots[i] = table->slots[j];
            table->slots[j] = NULL;
            i = j;
        }
    }
    table->count--;
    table->form_bytes -= form->bytes;
    form_release(form);
    if (table->capacity > TABLE_MIN_SLOTS && 8 * table->count < table->capacity
            && table_resize(table, table->capacity / 2) < 0)
        PyErr_Clear();  /* keeping the larger table is harmless */
}

void
form_table_clear(FormTable *table)
{
    InnerForm **slots = table->slots;
    Py_ssize_t capacity = table->capacity;
    table->slots = NULL;
    table->capacity = table->count = table->form_bytes = 0;
    for (Py_ssize_t i = 0; i < capacity; i++)
        form_release(slots[i]);
    PyMem_Free(slots);
}

int
form_table_traverse(const FormTable *table, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; i < table->capacity; i++)
        if (table->slots[i] != NULL)
            Py_VISIT(table->slots[i]->node);
    return 0;
}
