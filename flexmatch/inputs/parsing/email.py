"""E-mail messages (.eml) via the standard library's modern ``email`` API.

The plain-text body is preferred (it is what the sender wrote); the HTML body goes through
the HTML parser only when there is no plain one. Attachments are listed, not parsed. A
body's lines are not the message file's (headers, MIME parts and transfer encodings come
between), so its elements carry no location; an attachment's would name it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flexmatch.errors import EmptyDocumentError, ParseError
from flexmatch.inputs.parsing._common import ElementBuilder, clean_inline, finish, parse_errors
from flexmatch.models import Element, ParsedDocument


def parse_email(path: Path) -> ParsedDocument:
    """Parse an .eml file: Subject is the title, From/To/Cc/Date go to metadata."""
    from email import policy
    from email.parser import BytesParser

    from flexmatch.inputs.parsing.text import add_text_blocks, looks_binary

    data = path.read_bytes()
    if looks_binary(data):
        raise ParseError(f"{path}: looks like a binary file, not an e-mail message")
    builder = ElementBuilder()
    with parse_errors(path, "e-mail"):
        message = BytesParser(policy=policy.default).parsebytes(data)
        metadata: dict[str, Any] = {}
        for header in ("from", "to", "cc", "date"):
            value = message.get(header)
            if value is not None:
                metadata[header] = clean_inline(str(value))
        # The plain body is preferred; the HTML one is the fallback when plain holds nothing.
        bodies = [message.get_body(preferencelist=(kind,)) for kind in ("plain", "html")]
        for body in bodies:
            if body is None:
                continue
            if body.get_content_subtype() == "html":
                builder.elements.extend(_html_body(str(body.get_content())))
            else:
                add_text_blocks(builder, str(body.get_content()), first_line=None)
            if builder.elements:
                break
        attachments = []
        for part in message.walk():
            if part.is_multipart() or any(part is body for body in bodies):
                continue
            filename = part.get_filename()
            if filename or part.get_content_disposition() == "attachment":
                attachments.append(filename or "(unnamed)")
        metadata["attachments"] = attachments
        title = clean_inline(str(message.get("subject") or ""))
    return finish(path, builder, title or path.stem, metadata)


def _html_body(content: str) -> list[Element]:
    """Elements of an HTML body (already decoded to text), or none when it holds no text."""
    from flexmatch.inputs.parsing.html import parse_html_bytes

    try:
        data = b'<meta charset="utf-8">' + content.encode("utf-8")
        elements = parse_html_bytes(data, "e-mail body").elements
        # a fragment of the body is no place in the message a reader could open
        return [e.model_copy(update={"location": None}) for e in elements]
    except EmptyDocumentError:
        return []
