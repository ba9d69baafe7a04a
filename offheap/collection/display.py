"""How collections and DBs show themselves: the settings a repr names, and HTML tables (layer 6).

Every ``repr`` names the settings a user chose, where set: the ``limit``, the file's path and
the compression; ``_repr_html_`` (Jupyter) renders rows of figures as one table. Pure functions
over an arena's attributes, no IO.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from offheap.arena.arena import Arena, format_bytes


def setting_rows(arena: Arena, compression: str | None = None) -> list[tuple[str, str]]:
    """``(name, value)`` of the settings that were set: limit, path, compression.

    An unset setting (no limit, anonymous memory, no compression) has no row.
    """
    rows = []
    if arena.limit_bytes is not None:
        rows.append(("limit", format_bytes(arena.limit_bytes)))
    if arena.path is not None:
        rows.append(("path", repr(arena.path)))
    if compression:
        rows.append(("compression", compression))
    return rows


def settings_text(arena: Arena, compression: str | None = None) -> str:
    """The settings of ``setting_rows`` as repr text: ``", limit 1.0 MiB, path '/x'"`` or ``""``."""
    return "".join(f", {name} {value}" for name, value in setting_rows(arena, compression))


def html_table(title: str, rows: Iterable[tuple[str, object]]) -> str:
    """An HTML table captioned ``title``, one ``<th>name</th><td>value</td>`` row per pair.

    Names and values are escaped: a collection's name or a path is shown, never interpreted.
    """
    body = "".join(f"<tr><th style='text-align:left'>{html.escape(str(name))}</th>"
                   f"<td>{html.escape(str(value))}</td></tr>" for name, value in rows)
    return f"<table><caption><b>{html.escape(title)}</b></caption>{body}</table>"
