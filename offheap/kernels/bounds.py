"""The int64 range that keys and typed values must fall in (layer 2)."""

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
