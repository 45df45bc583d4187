"""Source code and config files, read with tree-sitter grammars (the ``code`` extra).

A file becomes a title element (its name), then, in reading order, one heading per
definition (a function, class, method, struct, impl, …; a top-level key or table of a
config file) at the depth it is nested, each followed by its code. A class's own code
(its header, docstring and members that are not definitions) comes right after its
heading, its methods one level deeper. Code between definitions stays where it is; it is
preceded by the heading of the scope it belongs to again (the title for file-level
code), so a reader that follows headings, like the ``structure`` chunker, never files it
under the definition above it. Comments right above a definition (doc comments, Rust
attributes) belong to it; docstrings stay in their code.

``outline`` is the same reading for any piece of code, so chains can find the symbols,
signatures and docstrings of a chunk again.

The package: ``grammars`` (languages, what a definition is in each), ``nesting`` (the
depth check before parsing), ``outline`` (definitions read from a syntax tree) and
``document`` (``parse_code``: a file as elements).
"""

from __future__ import annotations

from flexmatch.inputs.parsing.code.document import parse_code
from flexmatch.inputs.parsing.code.grammars import (
    CONFIG_LANGUAGES,
    FUNCTIONS,
    GRAMMARS,
    LANGUAGES,
    Grammar,
    language_of,
    symbol_name,
    syntax_tree,
)
from flexmatch.inputs.parsing.code.nesting import MAX_NESTING, check_nesting, nesting_depth
from flexmatch.inputs.parsing.code.outline import Definition, Outline, Visit, outline

__all__ = [
    "CONFIG_LANGUAGES",
    "FUNCTIONS",
    "GRAMMARS",
    "LANGUAGES",
    "MAX_NESTING",
    "Definition",
    "Grammar",
    "Outline",
    "Visit",
    "check_nesting",
    "language_of",
    "nesting_depth",
    "outline",
    "parse_code",
    "symbol_name",
    "syntax_tree",
]
