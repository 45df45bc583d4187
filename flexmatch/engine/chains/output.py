"""Defensive parsing of LLM output: it is data to bound and clean, never instructions."""

from __future__ import annotations

import json
import re
from typing import Any

from flexmatch.engine.chains.spec import OutputRules

_JSON_BLOCK = re.compile(r"(\{.*\}|\[.*\])", re.S)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def _load_json(raw: str) -> Any | None:
    candidates = [raw.strip()]
    fenced = re.search(r"```(?:json)?\s*(.*?)```", raw, re.S)
    if fenced:
        candidates.append(fenced.group(1))
    block = _JSON_BLOCK.search(raw)
    if block:
        candidates.append(block.group(1))
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
    return None


def parse_json(raw: str) -> Any | None:
    """The first JSON value found in ``raw`` (plain, fenced or embedded), else None."""
    return _load_json(raw)


def parse_list(raw: str, rules: OutputRules) -> list[str]:
    """A bounded, de-duplicated list of short strings from ``raw``.

    Accepts a JSON object with ``rules.key``, a bare JSON list, or, when the model
    ignored the format, one item per line (bullets and numbering stripped).
    """
    items: list[Any] = []
    data = _load_json(raw) if rules.format == "json" else None
    if isinstance(data, dict) and rules.key and isinstance(data.get(rules.key), list):
        items = data[rules.key]
    elif isinstance(data, list):
        items = data
    elif data is None:
        items = [_BULLET.sub("", line) for line in raw.splitlines()]
        items = [line for line in items if line and not line.strip().startswith(("{", "}", "["))]
    return clean_items(items, rules)


def clean_items(items: list[Any], rules: OutputRules) -> list[str]:
    """Strings only, whitespace folded, too long and repeated ones dropped, at most
    ``rules.max_items``."""
    seen: set[str] = set()
    result: list[str] = []
    for item in items:
        if not isinstance(item, str):
            continue
        text = " ".join(item.split())
        if not text or len(text) > rules.max_chars or text.lower() in seen:
            continue
        seen.add(text.lower())
        result.append(text)
        if len(result) >= rules.max_items:
            break
    return result


def parse_text(raw: str, rules: OutputRules) -> str:
    """A single bounded paragraph of text."""
    text = " ".join(raw.split())
    if len(text) > rules.max_chars:
        text = text[: rules.max_chars].rsplit(" ", 1)[0] + "…"
    return text
