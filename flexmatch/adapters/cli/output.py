"""Stored and user text on the operator's terminal, shown as the text it is.

A document title, a key name, a file name or an error quoting one is tenant text: printed
raw, ``[red]`` or ``[link=…]`` would be read as Rich markup, and an escape sequence
(``\\x1b]52;…`` writes the clipboard, ``\\x1b[2J`` clears the screen, a carriage return
overwrites the line, U+202E reverses it) would be obeyed by the terminal. Every CLI print
of such text goes through ``shown``.
"""

from __future__ import annotations

import re

from rich.markup import escape

# C0 and C1 controls, DEL, and the invisible marks that reorder text (bidi overrides and
# isolates, the left-to-right and right-to-left marks).
_ONE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(value: object, *, lines: bool = False) -> str:
    """``value`` as Rich markup that prints exactly as its text: markup escaped, control
    characters written out visibly (``\\x1b``). Newlines and tabs stay with ``lines=True``
    (a chunk's text); otherwise they are written out too (a name, a table cell)."""
    text = (_LINES if lines else _ONE_LINE).sub(_visible, str(value))
    return escape(text)
