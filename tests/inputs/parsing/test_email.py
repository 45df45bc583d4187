"""The e-mail (.eml) parser: the sample messages and an HTML-only message."""

from __future__ import annotations

from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path

from flexmatch.inputs.parsing import parse_file
from flexmatch.inputs.parsing.email import MAX_DEPTH
from flexmatch.models import Element, Location, cite
from tests.inputs.parsing.samples import DOCS, of_kind, parse_doc


def test_eml_subject_headers_and_body() -> None:
    doc = parse_doc("fake-email.eml")
    assert doc.title == "Test Email"
    assert doc.metadata["from"] == "Matthew Robinson <mrobinson@unstructured.io>"
    assert "NotMatthew@notunstructured.com" in doc.metadata["to"]
    assert "2022" in doc.metadata["date"]
    assert doc.metadata["attachments"] == []
    assert [e.text for e in of_kind(doc, "list_item")] == ["Roses are red", "Violets are blue"]
    assert "<div" not in doc.text  # the plain part was used


def test_eml_attachment_is_parsed_as_part_of_the_message() -> None:
    doc = parse_doc("eml_fake-email-attachment.eml")
    assert doc.title == "Fake email with attachment"
    assert doc.metadata["attachments"] == ["fake-attachment.txt"]
    assert "Here's the attachments!" in doc.text
    where = Location(attachment="fake-attachment.txt")
    heading, text = doc.elements[-2:]
    assert heading == Element(kind="heading", text="fake-attachment.txt", level=1, location=where)
    assert text.text == "Hey this is a fake attachment!"
    assert text.location == Location(attachment="fake-attachment.txt", line_start=1, line_end=1)
    assert all(e.location is None for e in doc.elements[:-2])  # the body has no place


def _message(subject: str, body: str) -> EmailMessage:
    message = EmailMessage()
    message["Subject"], message["From"] = subject, "a@example.com"
    message.set_content(body)
    return message


def test_eml_attachments_by_their_own_parsers(tmp_path: Path) -> None:
    """A PDF keeps its pages, a Word file its headings (one level down), an attached
    message its own attachment; a type no parser reads does not fail the message."""
    message = _message("Quarterly pack", "See the attached files.")
    memo = (DOCS / "pdf_fake-memo.pdf").read_bytes()
    message.add_attachment(memo, maintype="application", subtype="pdf", filename="memo.pdf")
    docx = (DOCS / "simple.docx").read_bytes()
    message.add_attachment(
        docx,
        maintype="application",
        subtype="vnd.openxmlformats-officedocument.wordprocessingml.document",
        filename="things.docx",
    )
    forwarded = BytesParser(policy=policy.default).parsebytes(
        (DOCS / "eml_fake-email-attachment.eml").read_bytes()
    )
    message.add_attachment(forwarded)  # message/rfc822, named by its subject
    message.add_attachment(bytes(range(256)) * 8, maintype="application", subtype="octet-stream")
    path = tmp_path / "pack.eml"
    path.write_bytes(message.as_bytes())

    doc = parse_file(path)
    assert doc.metadata["attachments"] == [
        "memo.pdf",
        "things.docx",
        "Fake email with attachment.eml",
        "attachment-4.bin",
    ]
    assert "attachment-4.bin" in doc.metadata["attachments_not_read"]
    memo_text = [e for e in doc.elements if e.location and e.location.attachment == "memo.pdf"]
    assert memo_text[0].kind == "heading" and memo_text[0].text == "memo.pdf"
    assert {e.location.page for e in memo_text[1:]} == {1}  # the PDF's own page, kept
    assert any("Mallori" in e.text or "memo" in e.text.lower() for e in memo_text[1:])
    word = [e for e in doc.elements if e.location and e.location.attachment == "things.docx"]
    assert (word[1].kind, word[1].level) == ("heading", 2)  # under the attachment's heading
    assert "- Hockey" in [e.text for e in word]
    nested = "Fake email with attachment.eml › fake-attachment.txt"
    heading, inner = [e for e in doc.elements if e.location and e.location.attachment == nested]
    assert (heading.kind, heading.level, heading.text) == ("heading", 2, "fake-attachment.txt")
    assert inner.text == "Hey this is a fake attachment!"
    assert cite("pack.eml", "Quarterly pack", inner.location) == f"pack.eml › {nested}:1"


def test_eml_attachment_caps(tmp_path: Path) -> None:
    """The byte cap applies to each attachment; attached messages are read MAX_DEPTH deep."""
    message = _message("Level 0", "depth 0 words")
    for level in range(1, MAX_DEPTH + 2):
        outer = _message(f"Level {level}", f"depth {level} words")
        outer.add_attachment(message)
        message = outer
    large = b"large attachment words " * 400
    message.add_attachment(large, maintype="text", subtype="plain", filename="large.txt")
    message.add_attachment(b"small words", maintype="text", subtype="plain", filename="small.txt")
    path = tmp_path / "deep.eml"
    path.write_bytes(message.as_bytes())

    doc = parse_file(path, max_bytes=5_000)
    top = MAX_DEPTH + 1
    read = [f"depth {level} words" for level in range(top, 0, -1)]  # itself + MAX_DEPTH
    assert [t for t in read if t in doc.text] == read
    assert "depth 0 words" not in doc.text  # deeper than MAX_DEPTH
    (deepest,) = [e for e in doc.elements if e.text == "depth 1 words"]
    assert deepest.location is not None
    assert deepest.location.attachment == " › ".join(
        f"Level {n}.eml" for n in range(top - 1, 0, -1)
    )
    assert "small words" in doc.text and "large attachment words" not in doc.text
    not_read = doc.metadata["attachments_not_read"]
    assert "over the 5,000-byte cap" in not_read["large.txt"]
    deep_name = " › ".join(f"Level {n}.eml" for n in range(top - 1, -1, -1))
    assert sorted(not_read) == [deep_name, "large.txt"]
    assert f"nested deeper than {MAX_DEPTH} levels" in not_read[deep_name]
    (level_1,) = [e for e in doc.elements if e.text == "Level 1.eml"]
    assert level_1.kind == "heading"


def test_eml_html_only_body(tmp_path: Path) -> None:
    path = tmp_path / "html-only.eml"
    path.write_bytes(
        b"Subject: Hello\r\nFrom: a@example.com\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: text/html; charset="utf-8"\r\n\r\n'
        b"<html><body><h1>News</h1><p>Caf\xc3\xa9 opens</p></body></html>\r\n"
    )
    doc = parse_file(path)
    assert doc.title == "Hello"
    assert [(e.kind, e.text) for e in doc.elements] == [
        ("heading", "News"),
        ("paragraph", "Café opens"),
    ]


def _nested(level: int, fan: int) -> bytes:
    """A message with ``fan`` gzipped copies of the message one level down attached (as
    octet-stream ``.eml.gz`` files, not ``message/rfc822`` parts)."""
    import gzip

    message = EmailMessage()
    message["Subject"] = f"L{level}"
    message.set_content(f"body level {level}")
    if level > 0:
        inner = _nested(level - 1, fan)
        for i in range(fan):
            message.add_attachment(
                gzip.compress(inner, 9),
                maintype="application",
                subtype="octet-stream",
                filename=f"a{i}.eml.gz",
            )
    return bytes(message)


def test_attachments_nested_as_files_are_bounded_in_depth_and_count(tmp_path: Path) -> None:
    """Any attachment counts for the depth (a gzipped .eml nests as deep as an attached
    message), and a message's attachments at all levels share one count and one byte cap:
    7 levels of 3 once took 21 s for 6,559 elements; 5 levels of 10 would grow as 10^5."""
    from flexmatch.inputs.parsing.email import MAX_ATTACHMENTS

    for level, fan in ((7, 3), (5, 10)):
        path = tmp_path / f"n{level}_{fan}.eml"
        path.write_bytes(_nested(level, fan))
        parsed = parse_file(path)
        depths = [(e.location.attachment or "").count("›") for e in parsed.elements if e.location]
        assert max(depths) < MAX_DEPTH
        bodies = [e for e in parsed.elements if e.text.startswith("body level")]
        assert len(bodies) <= 1 + MAX_ATTACHMENTS
        not_read = parsed.metadata.get("attachments_not_read") or {}
        assert any("nested deeper" in why or "first" in why for why in not_read.values())
