"""The query panel of a long chunk shows the part that matched, not only its start."""

from __future__ import annotations

from flexmatch import ResultItem
from flexmatch.adapters.cli.output import console
from flexmatch.adapters.cli.query import PANEL_CHARS, _print_results, excerpt

FILLER = " ".join(f"Paragraph {n} says nothing of interest here." for n in range(60))
ANSWER = "The exit code 4 means that file system errors were left uncorrected."
AFTER = "Code 8 is an operational error."  # beside the answer, not in what matched
CHUNK = f"{FILLER} {ANSWER} {AFTER} {FILLER}"


def test_the_part_holding_the_matched_text_is_shown() -> None:
    shown = excerpt(CHUNK, ANSWER, "what does exit code 4 mean")
    assert ANSWER in shown and AFTER in shown
    assert shown.startswith("…") and shown.endswith("…") and " says nothing " in shown
    assert len(shown) <= PANEL_CHARS + 2
    assert CHUNK.index(ANSWER) > PANEL_CHARS  # the old cut would have missed it


def test_a_question_that_matched_shows_where_its_words_are() -> None:
    """A matched question is not in the chunk: the words it shares with it lead."""
    shown = excerpt(CHUNK, "Which errors are left uncorrected?", "exit code 4")
    assert ANSWER in shown


def test_a_short_chunk_is_whole_and_a_chunk_without_the_words_starts_at_its_start() -> None:
    assert excerpt(ANSWER, ANSWER, "exit") == ANSWER
    shown = excerpt(CHUNK, "zebra crossing", "giraffes")
    assert shown.startswith("Paragraph 0 says") and shown.endswith("…")


def test_the_panel_shows_the_matched_part() -> None:
    item = ResultItem(
        rank=1,
        source="docs",
        document_id="d",
        chunk_id="c",
        uri="/usr/share/man/man8/fsck.8.gz",
        title="fsck",
        heading_path=["EXIT CODES"],
        qualifying_text="",
        content=CHUNK,
        matched_text=ANSWER,
        score=0.9,
    )
    with console.capture() as captured:
        _print_results("exit code 4", None, [item])
    shown = "".join(captured.get().replace("│", "").split())  # the panel wraps lines
    assert "".join(AFTER.split()) in shown
