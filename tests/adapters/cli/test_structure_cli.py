"""Faithful structure through the real command: an e-mail's attachments are found and
cited by name, a slide's nested bullets come back as a Markdown list, an RTF heading is
in the heading path of what follows it."""

from __future__ import annotations

import json
import shutil
from email import policy
from email.parser import BytesParser
from pathlib import Path

from tests.conftest import run
from tests.inputs.parsing.samples import DOCS


def _query(kb: Path, text: str) -> dict:
    result = run("query", "--kb", str(kb), "--json", "--top-n", "3", text)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["results"][0]


def test_attachments_lists_and_rtf_headings_through_the_cli(tmp_path: Path) -> None:
    folder = tmp_path / "mail"
    folder.mkdir()
    message = BytesParser(policy=policy.default).parsebytes(
        b"Subject: Quarterly pack\r\nFrom: a@example.com\r\n\r\nSee the attached memo.\r\n"
    )
    memo = (DOCS / "pdf_fake-memo.pdf").read_bytes()
    message.add_attachment(memo, maintype="application", subtype="pdf", filename="memo.pdf")
    forwarded = (DOCS / "eml_fake-email-attachment.eml").read_bytes()
    message.add_attachment(BytesParser(policy=policy.default).parsebytes(forwarded))
    (folder / "pack.eml").write_bytes(message.as_bytes())
    shutil.copy(DOCS / "sample-presentation.pptx", folder)
    shutil.copy(DOCS / "fake-doc.rtf", folder)
    kb = tmp_path / "kb"
    assert run("init", str(kb)).returncode == 0
    ingest = run("ingest", "--kb", str(kb), "--json", str(folder))
    assert ingest.returncode == 0, ingest.stderr
    assert json.loads(ingest.stdout)["failed"] == []

    found = _query(kb, "Hey this is a fake attachment")
    nested = "Fake email with attachment.eml › fake-attachment.txt"
    assert found["location"] == {"attachment": nested, "line_start": 1, "line_end": 1}
    assert found["cite"] == f"pack.eml › {nested}:1"
    assert found["heading_path"][-1] == "fake-attachment.txt"

    memo_hit = _query(kb, "bottles of water, blankets and laptops delivered")
    assert memo_hit["location"]["attachment"] == "memo.pdf"
    assert memo_hit["cite"].startswith("pack.eml › memo.pdf p. 1")

    bullets = _query(kb, "sub-sub-bullet bulleted information")
    assert "- And a list of bulleted information\n\n  - With a sub-bullet" in bullets["content"]

    rtf = _query(kb, "My first paragraph")
    assert rtf["heading_path"][-1] == "My First Heading"
