from __future__ import annotations

from flexmatch.engine.chains.output import parse_json, parse_list, parse_text
from flexmatch.engine.chains.spec import OutputRules

RULES = OutputRules(format="json", key="questions", max_items=3, max_chars=60)


def test_plain_json_object() -> None:
    assert parse_list('{"questions": ["A?", "B?"]}', RULES) == ["A?", "B?"]


def test_fenced_json_with_chatter() -> None:
    raw = 'Sure!\n```json\n{"questions": ["What is X?"]}\n```\nHope that helps'
    assert parse_list(raw, RULES) == ["What is X?"]


def test_bare_list_and_non_strings() -> None:
    assert parse_list('["A?", 3, null, {"x": 1}, "B?"]', RULES) == ["A?", "B?"]


def test_broken_json_falls_back_to_lines() -> None:
    raw = 'Here are questions:\n1. What is A?\n- What is B?\n{"questions": ["broken'
    assert parse_list(raw, RULES) == ["Here are questions:", "What is A?", "What is B?"]


def test_bounds_dedupe_and_too_long() -> None:
    raw = '{"questions": ["A?", "a?", "' + "x" * 200 + '", "B?", "C?", "D?"]}'
    assert parse_list(raw, RULES) == ["A?", "B?", "C?"]


def test_parse_text_caps_length() -> None:
    rules = OutputRules(format="text", max_chars=20)
    assert parse_text("one two three four five six seven", rules) == "one two three four…"


def test_parse_json_none_on_garbage() -> None:
    assert parse_json("no json here {") is None
