"""The outline of a piece of code (a whole file or one chunk): its definitions, nested,
each with its heading, name, signature, doc comment or docstring and byte span."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flexmatch.inputs.parsing.code.grammars import (
    CONFIG_LANGUAGES,
    FUNCTIONS,
    GRAMMARS,
    syntax_tree,
)

if TYPE_CHECKING:
    from tree_sitter import Node

_MAX_DEPTH = 4  # namespace › class › inner class › method
_MAX_NAME = 120
_MAX_SIGNATURE = 300
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


def outline(source: bytes | str, language: str) -> Outline:
    """The definitions in ``source`` (any piece of code: a whole file or one chunk)."""
    data = source.encode("utf-8") if isinstance(source, str) else source
    return _Reader(data, language).outline()
