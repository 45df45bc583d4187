"""How deeply a YAML or JSON text nests, measured before any parser sees it: tree-sitter's
YAML scanner overflows (and the process dies) on a deep enough file."""

from __future__ import annotations

import re

from flexmatch.errors import ParseError

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
