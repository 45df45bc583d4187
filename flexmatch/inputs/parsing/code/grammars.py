"""The tree-sitter grammars: which file suffix is read with which, what counts as a
definition in each language and how definitions nest, and the syntax tree of a source."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flexmatch.errors import ParseError
from flexmatch.extras import require
from flexmatch.inputs.parsing.code.nesting import check_nesting

if TYPE_CHECKING:
    from tree_sitter import Language, Node

LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".java": "java",
    ".rs": "rust",
    ".c": "c",
    ".h": "cpp",  # C and C++ headers share the suffix; the C++ grammar reads both
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".sh": "bash",
    ".bash": "bash",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".json": "json",
}
"""File suffix → tree-sitter grammar (the document's ``language`` metadata)."""

CONFIG_LANGUAGES = frozenset({"yaml", "toml", "json"})


@dataclass(frozen=True)
class Grammar:
    """What counts as a definition in one language, and how definitions nest."""

    definitions: dict[str, str]  # node type → the word its heading starts with
    containers: frozenset[str] = frozenset()  # definitions whose body holds definitions
    wrappers: frozenset[str] = frozenset()  # nodes around one definition (decorators, export)
    transparent: frozenset[str] = frozenset()  # walked through at the same depth
    leading: frozenset[str] = frozenset({"comment"})  # attached to the definition below
    requires_body: frozenset[str] = frozenset()  # a declaration without a body is not one
    docstrings: bool = False  # Python: the first string of a body documents it


_JS_DEFINITIONS = {
    "function_declaration": "function",
    "generator_function_declaration": "function*",
    "class_declaration": "class",
    "method_definition": "method",
    "lexical_declaration": "",  # const f = () => …: its word is const/let
    "variable_declaration": "",
}
_TS_DEFINITIONS = {
    **_JS_DEFINITIONS,
    "abstract_class_declaration": "abstract class",
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
    "internal_module": "namespace",
    "module": "module",
}
_TS = Grammar(
    definitions=_TS_DEFINITIONS,
    containers=frozenset(
        {"class_declaration", "abstract_class_declaration", "internal_module", "module"}
    ),
    wrappers=frozenset({"export_statement", "expression_statement", "ambient_declaration"}),
)
_C_DEFINITIONS = {
    "function_definition": "function",
    "struct_specifier": "struct",
    "union_specifier": "union",
    "enum_specifier": "enum",
    "type_definition": "typedef",
}
_PREPROCESSOR = frozenset(
    {"preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif", "preproc_elifdef"}
)

GRAMMARS: dict[str, Grammar] = {
    "python": Grammar(
        definitions={"function_definition": "def", "class_definition": "class"},
        containers=frozenset({"class_definition"}),
        wrappers=frozenset({"decorated_definition"}),
        docstrings=True,
    ),
    "javascript": Grammar(
        definitions=_JS_DEFINITIONS,
        containers=frozenset({"class_declaration"}),
        wrappers=frozenset({"export_statement"}),
    ),
    "typescript": _TS,
    "tsx": _TS,
    "go": Grammar(
        definitions={
            "function_declaration": "func",
            "method_declaration": "func",
            "type_declaration": "type",
        },
    ),
    "java": Grammar(
        definitions={
            "class_declaration": "class",
            "interface_declaration": "interface",
            "enum_declaration": "enum",
            "record_declaration": "record",
            "annotation_type_declaration": "@interface",
            "method_declaration": "method",
            "constructor_declaration": "constructor",
            "compact_constructor_declaration": "constructor",
        },
        containers=frozenset(
            {
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
            }
        ),
        transparent=frozenset({"enum_body_declarations"}),
        leading=frozenset({"line_comment", "block_comment"}),
        requires_body=frozenset({"method_declaration"}),
    ),
    "rust": Grammar(
        definitions={
            "function_item": "fn",
            "struct_item": "struct",
            "enum_item": "enum",
            "union_item": "union",
            "trait_item": "trait",
            "impl_item": "impl",
            "mod_item": "mod",
            "macro_definition": "macro_rules!",
            "type_item": "type",
        },
        containers=frozenset({"impl_item", "trait_item", "mod_item"}),
        leading=frozenset({"line_comment", "block_comment", "attribute_item"}),
        requires_body=frozenset({"mod_item"}),
    ),
    "c": Grammar(
        definitions=_C_DEFINITIONS,
        transparent=_PREPROCESSOR,
        requires_body=frozenset({"struct_specifier", "union_specifier", "enum_specifier"}),
    ),
    "cpp": Grammar(
        definitions={
            **_C_DEFINITIONS,
            "class_specifier": "class",
            "namespace_definition": "namespace",
        },
        containers=frozenset({"class_specifier", "struct_specifier", "namespace_definition"}),
        wrappers=frozenset({"template_declaration"}),
        transparent=_PREPROCESSOR | {"linkage_specification", "declaration_list"},
        requires_body=frozenset(
            {"struct_specifier", "union_specifier", "enum_specifier", "class_specifier"}
        ),
    ),
    "bash": Grammar(definitions={"function_definition": "function"}),
    "yaml": Grammar(
        definitions={"block_mapping_pair": "", "flow_pair": ""},
        transparent=frozenset(
            {"document", "block_node", "block_mapping", "flow_node", "flow_mapping"}
        ),
    ),
    "toml": Grammar(definitions={"table": "", "table_array_element": ""}),
    "json": Grammar(definitions={"pair": ""}, transparent=frozenset({"object"})),
}

FUNCTIONS = frozenset(  # values that make ``const f = …`` a definition
    {"arrow_function", "function_expression", "function", "generator_function", "class"}
)


def language_of(path: Path | str) -> str | None:
    """The grammar a file is read with, from its suffix (None for other files)."""
    return LANGUAGES.get(Path(path).suffix.lower())


@functools.cache
def _language(name: str) -> Language:
    pack = require("tree_sitter_language_pack", "code", "parsing source code")
    return pack.get_language(name)


def syntax_tree(source: bytes, language: str) -> Node:
    """The tree-sitter root node of ``source`` (a fresh parser: parsers are not shared)."""
    if language not in GRAMMARS:
        raise ParseError(f"no grammar for language '{language}'")
    check_nesting(source.decode("utf-8", "replace"), language, f"the {language} code")
    grammar = _language(language)  # first: a missing extra is named by ``require``
    from tree_sitter import Parser  # installed with tree_sitter_language_pack

    return Parser(grammar).parse(source).root_node


def symbol_name(label: str, language: str) -> str:
    """The name in a definition's heading: ``def parse_file`` → ``parse_file``."""
    words = {word for word in GRAMMARS[language].definitions.values() if word}
    words |= {"async def", "const", "let", "var"}
    for word in sorted(words, key=len, reverse=True):
        if label.startswith(word + " "):
            return label[len(word) + 1 :]
    return label
