"""Exceptions raised by sparkey (bottom layer: imports nothing from the package).

Every class also inherits the built-in exception a caller would catch for the same failure, so
``except ValueError`` still sees a malformed file and ``except TypeError`` a key of the wrong type.
Format errors carry the name of the offending header field in ``field`` (``None`` when the problem
is not a single header field, e.g. a truncated entry in the log body).
"""

from __future__ import annotations

import errno


class SparkeyError(Exception):
    """Base class of every error raised by sparkey on purpose."""


class _FieldError(SparkeyError, ValueError):
    """A file failed validation; ``field`` names the header field at fault, if any."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class LogFormatError(_FieldError):
    """A ``.spl`` log file is not a valid Sparkey log: bad header, truncated or corrupt body."""


class IndexFormatError(_FieldError):
    """A ``.spi`` index file is not a valid Sparkey index, or does not fit its log."""


class FileIdentifierMismatch(SparkeyError, ValueError):
    """The index was built from another log: the two headers carry different file identifiers."""


class ChecksumError(SparkeyError, ValueError):
    """A byte range of a store's log or index does not match the crc32 its checksum sidecar
    recorded (the file is damaged there), or the sidecar itself is damaged. ``filename`` is
    the damaged file, ``start`` and ``stop`` the byte range."""

    def __init__(self, message: str, filename: str, start: int, stop: int) -> None:
        super().__init__(message)
        self.filename, self.start, self.stop = filename, start, stop


class StaleChecksumsError(SparkeyError, ValueError):
    """The checksum sidecar describes another version of the log or index than the one beside
    it (rewritten or appended to after the checksums were written): not damage, but nothing
    was verified. ``filename`` is the sidecar."""

    def __init__(self, message: str, filename: str) -> None:
        super().__init__(message)
        self.filename = filename


class MissingChecksumsError(SparkeyError, FileNotFoundError):
    """Verification was asked for a store that has no checksum sidecar; ``errno`` is ENOENT and
    ``filename`` the sidecar's path."""

    def __init__(self, message: str, filename: str) -> None:
        super().__init__(errno.ENOENT, message, filename)

    def __str__(self) -> str:
        return str(self.strerror)


class ClosedError(SparkeyError, ValueError):
    """The reader or writer was closed."""


class EntryTypeError(SparkeyError, TypeError):
    """A key or value is not ``bytes``, ``bytearray``, ``memoryview`` or ``str``."""


class EntrySizeError(SparkeyError, ValueError):
    """A key or value is longer than every Sparkey reader accepts (2**31 - 1 bytes)."""


class StoreExistsError(SparkeyError, FileExistsError):
    """A store is already at the target path and the writer was not told to replace it.

    Raised by ``Writer`` in mode ``"x"`` (its ``filename`` is the file found) and by the
    sharded builders without ``overwrite=True``.
    """
