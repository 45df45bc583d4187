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
"""

from __future__ import annotations

import bisect
import functools
import inspect
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from flexmatch.errors import ParseError
from flexmatch.extras import require
from flexmatch.inputs.parsing._common import ElementBuilder, finish, parse_errors
from flexmatch.models import Location, ParsedDocument

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
_MAX_DEPTH = 4  # namespace › class › inner class › method
_MAX_NAME = 120
_MAX_SIGNATURE = 300


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


_OPENER_SPACE = re.compile(r"([(\[{])\s+")
_CLOSER_SPACE = re.compile(r",?\s+([)\]}])")


@dataclass
class Definition:
    """One definition found in a piece of code."""

    label: str  # its heading: "def parse_file", "class Foo", "[server]"
    name: str  # "parse_file"
    signature: str  # "def parse_file(path: Path | str) -> ParsedDocument"
    doc: str  # its docstring or the comments right above it, without comment markers
    start: int  # byte span, attached comments included, widened to whole lines
    end: int
    children: list[Definition] = field(default_factory=list)
    container: bool = False


Visit = tuple[list[str], Definition]  # a definition and the names of those around it


@dataclass
class Outline:
    """The definitions of a piece of code, and its own docstring (Python modules)."""

    doc: str
    definitions: list[Definition]

    def walk(self) -> Iterator[Visit]:
        """Every definition, nested ones too, in reading order, with its parents' names."""

        def visit(parents: list[str], items: list[Definition]) -> Iterator[Visit]:
            for item in items:
                yield parents, item
                yield from visit([*parents, item.name], item.children)

        yield from visit([], self.definitions)


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


# -- nesting -----------------------------------------------------------------------------

MAX_NESTING = 100
"""Levels a YAML or JSON file may nest. tree-sitter's YAML scanner overflows its state
(and the process dies) past about 250 indentation levels; no real file comes near 100."""

_YAML_INDICATOR = re.compile(r"[-?](?:[ \t]+|$)")
_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def nesting_depth(text: str, language: str) -> int:
    """How deeply ``text`` nests, counted without parsing it (the parser is what a deep
    input breaks): YAML's block indentation levels, JSON's brackets; 0 for others."""
    if language == "yaml":
        return _yaml_depth(text)
    if language == "json":
        return _json_depth(text)
    return 0


def _yaml_depth(text: str) -> int:
    """The deepest stack of block indentation columns, as the YAML scanner keeps it: each
    more-indented line opens a level, and so does each ``- `` or ``? `` on a line."""
    stack: list[int] = []
    deepest = 0
    for line in text.split("\n"):
        body = line.lstrip(" ")
        if not body.strip() or body.startswith("#"):
            continue
        column = len(line) - len(body)
        while stack and stack[-1] > column:
            stack.pop()
        if not stack or stack[-1] < column:
            stack.append(column)
        while (indicator := _YAML_INDICATOR.match(body)) and indicator.end() < len(body):
            column += indicator.end()
            body = body[indicator.end() :]
            stack.append(column)
        deepest = max(deepest, len(stack))
        if deepest > MAX_NESTING:
            break
    return deepest


def _json_depth(text: str) -> int:
    """The deepest bracket nesting outside strings."""
    depth = deepest = 0
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def check_nesting(text: str, language: str, where: str) -> None:
    """Refuse a YAML or JSON text nested deeper than ``MAX_NESTING`` levels, naming ``where``."""
    if nesting_depth(text, language) > MAX_NESTING:
        raise ParseError(f"{where}: nested too deeply (over {MAX_NESTING} levels)")


# -- reading definitions -----------------------------------------------------------------


_BLANK_BYTES = frozenset(b" \t\r\x0b\x0c")
_NEWLINE = ord("\n")
_LINE_REST = re.compile(rb"[ \t\r;,]*(?:\n|\Z)")


class _Reader:
    def __init__(self, source: bytes, language: str) -> None:
        self.source = source
        self.language = language
        self.grammar = GRAMMARS[language]

    def text(self, node: Node | None) -> str:
        if node is None:
            return ""
        return self.source[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def outline(self) -> Outline:
        root = syntax_tree(self.source, self.language)
        return Outline(doc=self._docstring(root), definitions=self.definitions(root, 1))

    def _scope_children(self, node: Node) -> Iterator[Node]:
        for child in node.children:
            if child.type in self.grammar.transparent:
                yield from self._scope_children(child)
            else:
                yield child

    def definitions(self, scope: Node, depth: int) -> list[Definition]:
        found: list[Definition] = []
        pending: list[Node] = []  # comments (and attributes) that may belong to what follows
        for child in self._scope_children(scope):
            if child.type in self.grammar.leading:
                if pending and not self._adjacent(pending[-1], child):
                    pending = []
                pending.append(child)
                continue
            core = self._core(child)
            if core is None:
                pending = []
                continue
            attached = [n for n in pending if self._own_line(n)]
            if attached and not self._adjacent(attached[-1], child):
                attached = []
            if attached and self._text_starts(attached[0], "#!"):
                attached = attached[1:]
            found.append(self._definition(child, core, attached, depth))
            pending = []
        return found

    def _core(self, node: Node) -> Node | None:
        """The definition ``node`` is or wraps, or None."""
        grammar = self.grammar
        if node.type in grammar.wrappers:
            inner = node.child_by_field_name("definition") or node.child_by_field_name(
                "declaration"
            )
            candidates = [inner] if inner is not None else list(reversed(node.named_children))
            for candidate in candidates:
                core = self._core(candidate)
                if core is not None:
                    return core
            return None
        if node.type not in grammar.definitions:
            return None
        if node.type in grammar.requires_body and node.child_by_field_name("body") is None:
            return None
        if node.type in ("lexical_declaration", "variable_declaration"):
            return node if self._function_value(node) is not None else None
        if not self._name(node):
            return None
        return node

    def _function_value(self, node: Node) -> Node | None:
        for declarator in node.named_children:
            value = declarator.child_by_field_name("value")
            if declarator.type == "variable_declarator" and value and value.type in FUNCTIONS:
                return value
        return None

    def _name(self, node: Node) -> str:
        kind = node.type
        if kind in ("lexical_declaration", "variable_declaration"):
            value = self._function_value(node)
            declarator = value.parent if value is not None else None
            return self.text(declarator.child_by_field_name("name") if declarator else None)
        if kind == "impl_item":
            trait, target = node.child_by_field_name("trait"), node.child_by_field_name("type")
            return f"{self.text(trait)} for {self.text(target)}" if trait else self.text(target)
        if kind == "method_declaration" and self.language == "go":
            receiver = node.child_by_field_name("receiver")
            return f"{self.text(receiver)} {self.text(node.child_by_field_name('name'))}"
        if kind == "type_declaration":
            specs = [c.child_by_field_name("name") for c in node.named_children]
            return ", ".join(self.text(s) for s in specs if s is not None)
        if kind in ("function_definition", "type_definition") and self.language in ("c", "cpp"):
            declarator = node.child_by_field_name("declarator")
            while declarator is not None and declarator.child_by_field_name("declarator"):
                declarator = declarator.child_by_field_name("declarator")
            return self.text(declarator)
        if kind in ("table", "table_array_element"):
            key = next((c for c in node.named_children if c.type.endswith("key")), None)
            brackets = ("[[", "]]") if kind == "table_array_element" else ("[", "]")
            return f"{brackets[0]}{self.text(key)}{brackets[1]}" if key else ""
        if kind in ("block_mapping_pair", "flow_pair", "pair"):
            name = self.text(node.child_by_field_name("key")).strip()
            quoted = len(name) >= 2 and name[0] == name[-1] and name[0] in "\"'"
            return name[1:-1] if quoted else name
        return self.text(node.child_by_field_name("name"))

    def _word(self, node: Node) -> str:
        word = self.grammar.definitions.get(node.type, "")
        if node.type in ("lexical_declaration", "variable_declaration"):
            return self.text(node.children[0]) if node.children else ""
        if word == "def" and any(c.type == "async" for c in node.children):
            return "async def"
        return word

    def _definition(self, outer: Node, core: Node, attached: list[Node], depth: int) -> Definition:
        name = " ".join(self._name(core).split())[:_MAX_NAME]
        word = self._word(core)
        label = f"{word} {name}" if word else name
        docstring = self._docstring(core) if self.grammar.docstrings else ""
        doc = docstring or _comment_text([self.text(n) for n in attached if "comment" in n.type])
        first = attached[0] if attached else outer
        definition = Definition(
            label=label,
            name=name,
            signature=self._signature(core, label),
            doc=doc,
            start=self._line_start(first.start_byte),
            end=self._line_end(outer.end_byte),
            container=core.type in self.grammar.containers,
        )
        body = core.child_by_field_name("body")
        if definition.container and body is not None and depth < _MAX_DEPTH:
            definition.children = self.definitions(body, depth + 1)
        return definition

    def _signature(self, core: Node, label: str) -> str:
        if self.language in CONFIG_LANGUAGES:
            return label
        value = self._function_value(core) if core.type.endswith("_declaration") else None
        body = (value or core).child_by_field_name("body")
        end = body.start_byte if body is not None else core.end_byte
        parts, position = [], core.start_byte
        for child in core.children:  # comments between the header's parts are left out
            if child.type in self.grammar.leading and child.end_byte <= end:
                parts.append(self.source[position : child.start_byte])
                position = child.end_byte
        parts.append(self.source[position:end])
        text = b"".join(parts).decode("utf-8", "replace")
        if body is None:
            text = text.split("\n", 1)[0]
        text = " ".join(text.split()).rstrip("{:=> ").strip()
        text = _CLOSER_SPACE.sub(r"\1", _OPENER_SPACE.sub(r"\1", text))  # "( a, b, )" → "(a, b)"
        return text if len(text) <= _MAX_SIGNATURE else text[: _MAX_SIGNATURE - 1] + "…"

    def _docstring(self, node: Node) -> str:
        """A Python docstring: the first statement of a module or body, if it is a string."""
        if self.language != "python":
            return ""
        body = node if node.type == "module" else node.child_by_field_name("body")
        statements = body.named_children if body is not None else []
        first = next((c for c in statements if c.type != "comment"), None)
        if first is not None and first.type == "expression_statement" and first.named_children:
            first = first.named_children[0]
        if first is None or first.type != "string":
            return ""
        content = "".join(self.text(c) for c in first.named_children if c.type == "string_content")
        return inspect.cleandoc(content)

    def _adjacent(self, above: Node, below: Node) -> bool:
        """No blank line between ``above`` and ``below``."""
        return below.start_point[0] - above.end_point[0] <= 1

    def _own_line(self, node: Node) -> bool:
        return not self.source[self._line_start(node.start_byte) : node.start_byte].strip()

    def _text_starts(self, node: Node, prefix: str) -> bool:
        return self.text(node).startswith(prefix)

    # Both look only at the blanks next to ``offset``, never at the rest of its line: a
    # minified file is one line, and reading it for every definition on it was quadratic.
    def _line_start(self, offset: int) -> int:
        """The start of ``offset``'s line when only blanks come before it there, else ``offset``."""
        start = offset
        while start > 0 and self.source[start - 1] in _BLANK_BYTES:
            start -= 1
        return start if start == 0 or self.source[start - 1] == _NEWLINE else offset

    def _line_end(self, offset: int) -> int:
        """Past the end of ``offset``'s line when only blanks (or ``;`` and ``,``) follow it
        there, else ``offset``."""
        rest = _LINE_REST.match(self.source, offset)
        return rest.end() if rest is not None else offset


def _comment_text(comments: list[str]) -> str:
    """Comment blocks without their markers (``//``, ``#``, ``/** … */``, ``///``)."""
    lines: list[str] = []
    for comment in comments:
        for line in comment.strip().splitlines():
            line = line.strip().removesuffix("*/").rstrip()
            for marker in ("/**", "/*!", "/*", "///", "//!", "//", "#", "*"):
                if line.startswith(marker):
                    line = line[len(marker) :]
                    break
            lines.append(line.strip())
    return inspect.cleandoc("\n".join(lines))


def symbol_name(label: str, language: str) -> str:
    """The name in a definition's heading: ``def parse_file`` → ``parse_file``."""
    words = {word for word in GRAMMARS[language].definitions.values() if word}
    words |= {"async def", "const", "let", "var"}
    for word in sorted(words, key=len, reverse=True):
        if label.startswith(word + " "):
            return label[len(word) + 1 :]
    return label


def outline(source: bytes | str, language: str) -> Outline:
    """The definitions in ``source`` (any piece of code: a whole file or one chunk)."""
    data = source.encode("utf-8") if isinstance(source, str) else source
    return _Reader(data, language).outline()


# -- the document ------------------------------------------------------------------------


def _has_words(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def _code(source: bytes, start: int, end: int) -> str:
    return textwrap.dedent(source[start:end].decode("utf-8", "replace").expandtabs(4))


class _Lines:
    """Line numbers of byte offsets in one source, from its line breaks found once (a
    count from the start for every piece was quadratic: minutes for a minified file of
    100,000 definitions on one line)."""

    def __init__(self, source: bytes) -> None:
        self._breaks = [match.start() for match in re.finditer(b"\n", source)]

    def at(self, start: int) -> Location:
        """Where code starting at byte ``start`` is: its first line (the builder finds the
        rest from the code's own lines)."""
        return Location(line_start=bisect.bisect_left(self._breaks, start) + 1)


def _add_scope(
    builder: ElementBuilder,
    source: bytes,
    lines: _Lines,
    span: tuple[int, int],
    items: list[Definition],
    depth: int,
    heading: str,
) -> None:
    """The code of one scope (the file, or a class) with its definitions in place."""
    position, first = span[0], True

    def add_gap(end: int) -> None:
        gap = _code(source, position, end)
        if _has_words(gap):
            if not first:  # back in this scope after a definition: say so
                builder.add("title" if depth == 0 else "heading", heading, level=depth)
            builder.add("code", gap, location=lines.at(position))

    for item in items:
        add_gap(item.start)
        first = False
        builder.add("heading", item.label, level=depth + 1, location=lines.at(item.start))
        if item.children:
            inner = (item.start, item.end)
            _add_scope(builder, source, lines, inner, item.children, depth + 1, item.label)
        else:
            code = _code(source, item.start, item.end)
            builder.add("code", code, location=lines.at(item.start))
        position = item.end
    add_gap(span[1])


def parse_code(path: Path) -> ParsedDocument:
    """Parse a source or config file (the grammar chosen by its suffix)."""
    from flexmatch.inputs.parsing.text import decode_text, looks_binary

    language = language_of(path)
    if language is None:
        raise ParseError(f"{path}: no grammar for '{path.suffix}' files")
    data = path.read_bytes()
    if looks_binary(data):
        raise ParseError(f"{path}: looks like a binary file, not text")
    source = decode_text(data).replace("\r\n", "\n").replace("\r", "\n").encode("utf-8")
    check_nesting(source.decode("utf-8"), language, str(path))
    builder = ElementBuilder()
    builder.add("title", path.name)
    with parse_errors(path, language):
        found = outline(source, language)
        _add_scope(
            builder, source, _Lines(source), (0, len(source)), found.definitions, 0, path.name
        )
    if not any(e.kind == "code" for e in builder.elements):
        builder.elements.clear()
    return finish(path, builder, path.name, {"language": language}, "no code in the file")
