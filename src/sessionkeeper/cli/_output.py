"""
Human output for a terminal and for a pipe (issue 11: ``grep`` must find a key or id in the output).

On a terminal (rich's rule: stdout is a TTY, or ``TTY_COMPATIBLE=1`` / a non-empty ``FORCE_COLOR``), tables
are drawn by rich. Otherwise each table becomes plain records: a header line, then one line per row, the
cells separated by a tab, never wrapped or cut (no "…"); tabs, newlines and other control characters inside
a cell are written as escapes (``\\t``, ``\\n``, ``\\x1b``) so a record stays on one line. Other lines are
printed unwrapped too (``soft_wrap``), without colour codes.
"""

from __future__ import annotations

import re
from typing import Any

import click
from rich.console import Console
from rich.markup import render
from rich.table import Table
from rich.text import Text


__all__ = ("cell_text", "console_for_stdout", "escape_controls", "print_table", "record_line")

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def console_for_stdout(**options: Any) -> Console:
    """A console on stdout; when stdout is not a terminal, lines are never wrapped (``soft_wrap``)."""
    console = Console(**options)
    if not console.is_terminal:
        console.soft_wrap = True
    return console


def escape_controls(text: str) -> str:
    """``text`` with control characters written as escapes: ``\\t``, ``\\n``, ``\\r``, else ``\\xNN``."""
    return _CONTROL.sub(lambda m: _ESCAPES.get(m.group(), f"\\x{ord(m.group()):02x}"), text)


def cell_text(cell: Any) -> str:
    """The plain text of a table cell (a ``Text``, or a string read as rich markup), control chars escaped."""
    if isinstance(cell, Text):
        text = cell.plain
    elif isinstance(cell, str):
        try:
            text = render(cell).plain
        except Exception:  # not markup after all (an unbalanced "[/x]"): the string as written
            text = cell
    else:
        text = str(cell)
    return escape_controls(text)


def record_line(cells: list[Any]) -> str:
    """One record: the cells' plain text joined by tabs."""
    return "\t".join(cell_text(cell) for cell in cells)


def print_table(console: Console, table: Table, *, header: bool = True) -> None:
    """
    Draw ``table`` with rich on a terminal; otherwise print its title (if any) as a line, the column
    headers as a record (``header``), and one record per row (see the module docstring).
    """
    if console.is_terminal:
        console.print(table)
        return
    lines: list[str] = []
    if table.title:
        lines.append(cell_text(table.title))
    if header and table.show_header:
        lines.append(record_line([column.header for column in table.columns]))
    columns = [list(column.cells) for column in table.columns]
    lines.extend(record_line([cells[row] for cells in columns]) for row in range(table.row_count))
    if lines:
        click.echo("\n".join(lines))
