/* Attributes of the tree's Python objects read and written at their __slots__ offsets (layer 6).
 *
 * The compiled paths read a handful of attributes on every call: a node's keys, values,
 * children and counts, the cursor's hint, the node cache's over_capacity, the tree's counters.
 * The Python classes keep them in __slots__ members, and a SlotField reads such a member at its
 * offset in the object, which is what the member descriptor does, without the attribute lookup
 * before it (type and MRO dictionaries, descriptor call: about 25 ns, a tenth of a cached get).
 *
 * A SlotField remembers the last class it saw and the member's offset there; a class that
 * customizes attribute access, or has no writable object member of that name, is read through
 * the attribute protocol instead (offset -1), so any object with the attribute still works. One
 * field per place of use, so that each keeps seeing one class. Its name is interned at the first
 * use. Everything here runs with the GIL held.
 */
#include "pages.h"

#include <structmember.h>

Py_ssize_t
member_offset(PyTypeObject *type, PyObject *name)
{
    PyObject *descriptor = _PyType_Lookup(type, name);  /* borrowed */
    if (descriptor != NULL && Py_IS_TYPE(descriptor, &PyMemberDescr_Type)
            && type->tp_getattro == PyObject_GenericGetAttr
            && type->tp_setattro == PyObject_GenericSetAttr) {
        PyMemberDef *member = ((PyMemberDescrObject *)descriptor)->d_member;
        if (member->type == T_OBJECT_EX && !(member->flags & READONLY))
            return member->offset;
    }
    return -1;
}

/* The offset of `field` in `object`: -1 for the attribute protocol, -2 with an exception. */
static Py_ssize_t
field_offset(SlotField *field, PyObject *object)
{
    PyTypeObject *type = Py_TYPE(object);
    if (type == field->type)
        return field->offset;
    if (field->name == NULL && (field->name = PyUnicode_InternFromString(field->text)) == NULL)
        return -2;
    Py_XSETREF(field->type, (PyTypeObject *)Py_NewRef(type));
    field->offset = member_offset(type, field->name);
    return field->offset;
}

PyObject *
field_get(SlotField *field, PyObject *object)
{
    Py_ssize_t offset = field_offset(field, object);
    if (offset == -2)
        return NULL;
    if (offset >= 0) {
        PyObject *value = *(PyObject **)((char *)object + offset);
        if (value != NULL)
            return Py_NewRef(value);
    }
    return PyObject_GetAttr(object, field->name);
}

int
field_set(SlotField *field, PyObject *object, PyObject *value)
{
    Py_ssize_t offset = field_offset(field, object);
    if (offset == -2)
        return -1;
    if (offset < 0)
        return PyObject_SetAttr(object, field->name, value);
    Py_XSETREF(*(PyObject **)((char *)object + offset), Py_NewRef(value));
    return 0;
}

PyObject *
node_list(PyObject *node, SlotField *field)
{
    PyObject *list = field_get(field, node);
    if (list != NULL && !PyList_CheckExact(list)) {
        Py_DECREF(list);
        page_corrupt("a TreeMap node's %s is not a list", field->text);
        return NULL;
    }
    return list;
}

PyObject *
node_key_column(PyObject *node, SlotField *field)
{
    PyObject *column = field_get(field, node);
    if (column != NULL && !PyList_CheckExact(column) && !is_int64_column(column)) {
        Py_DECREF(column);
        page_corrupt("a TreeMap leaf's %s are neither a list nor an array('q')", field->text);
        return NULL;
    }
    return column;
}
