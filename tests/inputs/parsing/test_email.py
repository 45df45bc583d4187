"""The e-mail (.eml) parser: the shared sample messages and an HTML-only message."""

from __future__ import annotations

from pathlib import Path

from flexmatch.inputs.parsing import parse_file
from tests.inputs.parsing.samples import of_kind, parse_doc


def test_eml_subject_headers_and_body() -> None:
    doc = parse_doc("fake-email.eml")
    assert doc.title == "Test Email"
    assert doc.metadata["from"] == "Matthew Robinson <mrobinson@unstructured.io>"
    assert "NotMatthew@notunstructured.com" in doc.metadata["to"]
    assert "2022" in doc.metadata["date"]
    assert doc.metadata["attachments"] == []
    assert [e.text for e in of_kind(doc, "list_item")] == ["Roses are red", "Violets are blue"]
    assert "<div" not in doc.text  # the plain part was used


def test_eml_attachments_are_listed_not_parsed() -> None:
    doc = parse_doc("eml_fake-email-attachment.eml")
    assert doc.title == "Fake email with attachment"
    assert doc.metadata["attachments"] == ["fake-attachment.txt"]
    assert "fake attachment" not in doc.text
    assert "Here's the attachments!" in doc.text


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
