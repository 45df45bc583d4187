"""Property-based tests (Hypothesis) of the code that meets hostile input first: the
parsers, the record renderer, the prompt fence and boundary, and the filter parser.

Each property holds for every generated input: no exception but the documented ones,
and the guarantee the code exists for. Bounded: a fixed number of examples each."""

from __future__ import annotations

import json
import re
from html import escape as html_escape
from html import unescape as html_unescape
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexmatch.config import SourceConfig
from flexmatch.engine.points import FILTERABLE_FIELDS, METADATA_PREFIX, search_filters
from flexmatch.errors import FilterError, ParseError
from flexmatch.inputs.parsing import parse_text
from flexmatch.inputs.parsing.html import parse_html_bytes
from flexmatch.inputs.sources.records import load_template, record_document
from flexmatch.templates import TAG_NAMES, boundary_for, fence
from tests.conftest import examples

BOUNDED = settings(
    max_examples=examples(ci=50, explore=150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TAG = re.compile(r"<\s*/?\s*(" + "|".join(TAG_NAMES) + r")(?=[\s>/-]|$)", re.I)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)
tag_soup = st.lists(
    st.sampled_from(
        ["<", ">", "/", " ", "\n", "\u200b", "\uff1c", "\uff1e", "\u00ad", "-", "a", "é", "x"]
        + list(TAG_NAMES)
        + [t.upper() for t in TAG_NAMES]
    ),
    max_size=40,
).map("".join)


@BOUNDED
@given(st.text(max_size=2000))
def test_parse_text_gives_clean_elements_or_says_empty(text: str) -> None:
    try:
        parsed = parse_text(text, title="t")
    except ParseError:
        assert not any(ch.isalnum() for ch in text)  # only a text without words is refused
        return
    assert parsed.elements and all(e.text.strip() == e.text and e.text for e in parsed.elements)


@BOUNDED
@given(st.binary(max_size=3000) | st.text(max_size=3000).map(str.encode))
def test_any_bytes_parse_as_html_or_fail_clearly(data: bytes) -> None:
    try:
        parsed = parse_html_bytes(data, base_title="page")
    except ParseError as exc:
        assert "page" in str(exc)
        return
    assert all(e.text for e in parsed.elements)


@BOUNDED
@given(
    st.recursive(
        st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20).map(html_escape),
        lambda inner: st.tuples(
            st.sampled_from(["div", "span", "p", "li", "ul", "table", "tr", "td", "h2", "pre"]),
            st.lists(inner, max_size=3),
        ).map(lambda t: f"<{t[0]}>{''.join(t[1])}</{t[0]}>"),
        max_leaves=30,
    )
)
def test_generated_html_keeps_its_words(html: str) -> None:
    inline_joined = re.sub(r"</?span>", "", html)  # an inline tag does not split a word
    words = set(
        re.findall(r"[A-Za-z0-9]{3,}", html_unescape(re.sub(r"<[^>]*>", " ", inline_joined)))
    )
    try:
        parsed = parse_html_bytes(f"<html><body>{html}</body></html>".encode())
    except ParseError:
        assert not words  # only a page without any text is refused
        return
    text = " ".join(e.text for e in parsed.elements)
    assert words <= set(re.findall(r"[A-Za-z0-9]{3,}", text))


def test_preformatted_text_breaks_at_its_blocks() -> None:
    """Found by the property above: ``<pre>0<div>000</div></pre>`` read as "0000"."""
    parsed = parse_html_bytes(b"<html><body><pre>0<div>000</div>  x  y</pre></body></html>")
    assert [e.text for e in parsed.elements if e.kind == "code"] == ["0\n000\n  x  y"]


_TEMPLATE = load_template(SourceConfig(type="records"), None)


@BOUNDED
@given(json_values, st.none() | st.text(max_size=10))
def test_records_render_or_fail_with_a_clear_error(record: Any, key: str | None) -> None:
    try:
        document = record_document(key, record, "r.jsonl:1", "facts", SourceConfig(), _TEMPLATE)
    except ParseError as exc:
        assert str(exc).startswith("r.jsonl:1: ")
        return
    assert document.text.strip() and document.source == "facts"
    leaves = [v for v in _leaves(record) if isinstance(v, str) and v.strip() and "\n" not in v]
    for leaf in leaves:
        assert leaf.strip() in document.text


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


@BOUNDED
@given(st.text(max_size=300) | tag_soup)
def test_fenced_text_never_holds_one_of_our_tags(text: str) -> None:
    fenced = fence(text)
    assert TAG.search(fenced) is None
    assert fence(fenced) == fenced  # fencing twice changes nothing more


@BOUNDED
@given(json_values)
def test_the_boundary_is_never_inside_the_data(data: Any) -> None:
    context = {"data": data}
    assert boundary_for(context) not in json.dumps(context, default=str, ensure_ascii=False)


@BOUNDED
@given(st.dictionaries(st.text(max_size=20) | st.sampled_from(FILTERABLE_FIELDS), json_values))
def test_filters_are_checked_or_refused(filters: dict[str, Any]) -> None:
    try:
        checked = search_filters(filters)
    except FilterError:
        return
    for field, value in checked.items():
        assert field in FILTERABLE_FIELDS or field.startswith(METADATA_PREFIX)
        values = value if isinstance(value, list) else [value]
        assert all(isinstance(v, str | int) for v in values)
        assert all(-(2**63) <= v < 2**63 for v in values if isinstance(v, int))
