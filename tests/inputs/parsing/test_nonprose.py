"""Text that is no prose, recognised by its content whatever its name: PostScript, symbol
tables, minified code, generated data, base64. Refused by the parsers of prose with the
reason a folder walk counts; prose that only looks like it in places is read."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from flexmatch.errors import NotProseError, UnsupportedFormatError
from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.inputs.parsing import parse_file
from flexmatch.inputs.parsing.sniff import NOT_PROSE, NOT_PROSE_SAMPLE, not_prose
from tests.conftest import REPO

NONPROSE = REPO / "tests" / "data" / "nonprose"
# each file of tests/data/nonprose/skipped and why it is no prose
SKIPPED = {
    "manual.ps.gz": "PostScript",
    "libstdc++_symbols.txt.amd64": "symbol table",
    "libz.nm.txt": "symbol table",
    "app.min.js": "minified",
    "searchindex.js": "generated data",
    "key.b64": "encoded data",
}
PROSE = sorted((NONPROSE / "prose").iterdir())


def test_the_fixtures_are_the_ones_named_here() -> None:
    assert {p.name for p in (NONPROSE / "skipped").iterdir()} == set(SKIPPED)
    assert set(SKIPPED.values()) == set(NOT_PROSE)  # every reason has its fixture


@pytest.mark.parametrize("name", sorted(SKIPPED))
def test_non_prose_is_refused_naming_the_file_and_why(name: str) -> None:
    path = NONPROSE / "skipped" / name
    with pytest.raises(NotProseError) as info:
        parse_file(path)
    assert info.value.reason == SKIPPED[name]
    assert isinstance(info.value, UnsupportedFormatError)
    message = str(info.value)
    assert message.startswith(f"{path}")
    assert NOT_PROSE[SKIPPED[name]] in message and "ingest.parsers" in message


def test_a_compressed_file_is_named_with_what_it_holds() -> None:
    path = NONPROSE / "skipped" / "manual.ps.gz"
    with pytest.raises(NotProseError, match=r"manual\.ps\.gz \(manual\.ps\): PostScript page"):
        parse_file(path)


@pytest.mark.parametrize("path", PROSE, ids=[p.name for p in PROSE])
def test_prose_that_quotes_symbols_or_long_lines_is_read(path: Path) -> None:
    """A README of unwrapped paragraphs, a changelog naming mangled and versioned symbols,
    notes quoting a PostScript header, code with a generated table, a list of flags."""
    document = parse_file(path)
    assert document.elements


def test_the_parsers_setting_reads_it_anyway(tmp_path: Path) -> None:
    path = NONPROSE / "skipped" / "libz.nm.txt"
    document = parse_file(path, parsers={"*.nm.txt": "text"})
    assert "deflateInit_" in " ".join(e.text for e in document.elements)


def test_the_reason_comes_back_from_a_parsing_worker() -> None:
    error = NotProseError("x.ps: PostScript page code", "PostScript")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.reason) == (NotProseError, str(error), "PostScript")
    pool = IsolatedPool(workers=1, timeout=30)
    try:
        with pytest.raises(NotProseError) as info:
            pool.run(parse_file, NONPROSE / "skipped" / "app.min.js", label="app.min.js")
    finally:
        pool.close()
    assert info.value.reason == "minified"


@pytest.mark.parametrize(
    ("sample", "reason"),
    [
        (b"\x04%!PS-Adobe-2.0\n", "PostScript"),
        (b"%!\n/inch {72 mul} def\n", "PostScript"),
        (b"".join(b"%016x T sym_%d\n" % (i * 64, i) for i in range(30)), "symbol table"),
        (b"".join(b"                 U undefined_%d\n" % i for i in range(30)), "symbol table"),
        (b"".join(b" _ZN3foo3barE%dv@Base 1.2\n" % i for i in range(30)), "symbol table"),
        (b"".join(b"%s\n" % (b"0f1e2d3c" * 8) for _ in range(30)), "encoded data"),
        (b"x" * 3000, "minified"),
        (b"[" + b", ".join(b"%d.5" % i for i in range(800)) + b"]", "generated data"),
    ],
)
def test_each_kind_is_recognised(sample: bytes, reason: str) -> None:
    assert not_prose(sample) == reason


@pytest.mark.parametrize(
    "sample",
    [
        b"",
        b"%PS is not a header unless it starts the file\n" * 30,
        b"".join(b"- item %d\n" % i for i in range(40)),  # a list, not symbols
        b"".join(b"a b\n" for _ in range(40)),
        ("word " * 400).encode(),  # one long line of prose
        b"".join(b"user%d@example.org\n" % i for i in range(30)),
        b"0123456789abcdef" * 10 + b"\n",  # one key in a note is not a dump
    ],
)
def test_prose_like_samples_are_not_taken_for_it(sample: bytes) -> None:
    assert not_prose(sample) is None


def test_a_sample_cut_mid_line_is_judged_on_its_whole_lines() -> None:
    """The last line of a full sample may be cut: a long line of prose whose first part
    only has no space is still prose."""
    prose = b"".join(b"Line %d of a plain text file, with words.\n" % i for i in range(1600))
    cut = (prose + b"x" * NOT_PROSE_SAMPLE)[:NOT_PROSE_SAMPLE]
    assert not_prose(cut) is None
