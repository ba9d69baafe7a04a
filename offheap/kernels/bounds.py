"""The int64 range (layer 2): the bounds every int64 key and value is checked against.

A key or value of an ``int64`` column is a Python int ``k`` with ``INT64_MIN <= k <= INT64_MAX``;
a larger int is an OverflowError for int64 keys, and goes to the object serializer's big-int
form for values.
"""

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
