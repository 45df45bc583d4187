"""E-mail messages (.eml) via the standard library's modern ``email`` API.

The plain-text body is preferred (it is what the sender wrote); the HTML body goes through
the HTML parser only when there is no plain one. A body's lines are not the message
file's (headers, MIME parts and transfer encodings come between), so its elements carry no
location.

Attachments are read by their own parsers, chosen like a file's (the ``parsers`` setting,
the file name, else the content type), and indexed as part of the message: each under a
heading naming it, every element's location naming it (``Location.attachment``; an
attachment of an attached message is ``inner.eml › report.pdf``). The byte cap applies to
each attachment (decompressed too) and to all of them together, at every level, at most
``MAX_ATTACHMENTS`` are read, and attachments inside attachments ``MAX_DEPTH`` deep. One
that cannot be read (unsupported type, too large, broken) does not fail the message: it
stays listed in ``attachments`` and its reason is in ``attachments_not_read``.
"""

from __future__ import annotations

import mimetypes
import re
import tempfile
from contextvars import ContextVar
from email.message import EmailMessage, Message
from pathlib import Path
from typing import Any

from flexmatch.errors import EmptyDocumentError, FlexMatchError, ParseError
from flexmatch.inputs.parsing._common import (
    ElementBuilder,
    clean_inline,
    finish,
    parse_errors,
    short_reason,
)
from flexmatch.models import Element, Location, ParsedDocument

MAX_DEPTH = 3  # attachments inside attachments are read this many levels deep
MAX_ATTACHMENTS = 50  # read of one message, all levels together; the rest are listed
_DEPTH: ContextVar[int] = ContextVar("email_depth", default=0)
# what the outermost message's attachments may still take, all levels together: bytes
# and attachments (ten attachments a level, each holding ten more, must stay within one
# message's cap, not grow as ten to the depth)
_BUDGET: ContextVar[list[int] | None] = ContextVar("email_budget", default=None)
_UNSAFE = re.compile(r"[^\w.\- ()+,@]+")


def parse_email(path: Path) -> ParsedDocument:
    """Parse an .eml file: Subject is the title, From/To/Cc/Date go to metadata."""
    if _BUDGET.get() is not None:  # an attached message: its outermost one's budget
        return _parse_email(path)
    from flexmatch.inputs.parsing import current_reading

    token = _BUDGET.set([current_reading().max_bytes, MAX_ATTACHMENTS])
    try:
        return _parse_email(path)
    finally:
        _BUDGET.reset(token)


def _parse_email(path: Path) -> ParsedDocument:
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
        attachments: list[str] = []
        not_read: dict[str, str] = {}
        for part in _attachment_parts(message, bodies):
            name = _attachment_name(part, len(attachments) + 1)
            attachments.append(name)
            try:
                parsed = _read_attachment(part, name)
            except FlexMatchError as exc:
                not_read[name] = str(exc)
                continue
            inner = parsed.metadata.get("attachments_not_read") or {}
            not_read.update({f"{name} › {key}": value for key, value in inner.items()})
            elements = [_under(element, name) for element in parsed.elements]
            builder.add("heading", name, level=1, location=Location(attachment=name))
            builder.elements.extend(elements)
        metadata["attachments"] = attachments
        if not_read:
            metadata["attachments_not_read"] = not_read
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


def _attachment_parts(message: EmailMessage, bodies: list[Any]) -> list[Message]:
    """The message's attachments in order: named parts and those marked as attachments,
    the body parts excepted; an attached message is one part (not walked into)."""
    parts: list[Message] = []
    stack: list[Message] = [message]
    while stack:
        part = stack.pop()
        if part is not message and part.get_content_type() == "message/rfc822":
            parts.append(part)
        elif isinstance(children := part.get_payload(), list):  # what is_multipart() asks
            stack.extend(child for child in reversed(children) if isinstance(child, Message))
        elif not any(part is body for body in bodies) and (
            part.get_filename() or part.get_content_disposition() == "attachment"
        ):
            parts.append(part)
    return parts


def _attachment_name(part: Message, number: int) -> str:
    """The attachment's own file name; an attached message without one is named by its
    subject; else ``attachment-N`` with the suffix its content type implies."""
    name = part.get_filename()
    if not name and part.get_content_type() == "message/rfc822":
        inner = _attached_message(part)
        subject = inner.get("subject") if inner is not None else None
        name = f"{clean_inline(str(subject or ''))[:80] or f'message-{number}'}.eml"
    if not name:
        suffix = mimetypes.guess_extension(part.get_content_type()) or ""
        name = f"attachment-{number}{suffix}"
    return clean_inline(str(name))


def _attached_message(part: Message) -> Message | None:
    """The message a ``message/rfc822`` part holds (None when it holds none)."""
    inner = part.get_payload()
    return inner[0] if isinstance(inner, list) and inner and isinstance(inner[0], Message) else None


def _attachment_bytes(part: Message) -> bytes:
    if part.get_content_type() == "message/rfc822":
        inner = _attached_message(part)
        return bytes(inner.as_bytes()) if inner is not None else b""
    payload = part.get_payload(decode=True)
    return payload if isinstance(payload, bytes) else b""


def _read_attachment(part: Message, name: str) -> ParsedDocument:
    """One attachment parsed by its own parser from a private copy named like it. Errors
    name the attachment, not the copy."""
    from flexmatch.errors import DocumentTooLargeError
    from flexmatch.inputs.parsing import current_reading, parse_file

    reading = current_reading()
    is_message = part.get_content_type() == "message/rfc822"
    if _DEPTH.get() >= MAX_DEPTH:  # any attachment: an .eml.gz nests as deep as a message
        raise ParseError(f"{name}: an attachment nested deeper than {MAX_DEPTH} levels")
    data = _attachment_bytes(part)
    budget = _BUDGET.get() or [reading.max_bytes, MAX_ATTACHMENTS]
    if budget[1] <= 0:
        raise ParseError(f"{name}: not read (a message's first {MAX_ATTACHMENTS} are)")
    if len(data) > budget[0]:
        raise DocumentTooLargeError(
            f"{name}: {len(data):,} bytes, over the {reading.max_bytes:,}-byte cap (what is "
            f"left of it for the message's attachments: {budget[0]:,})"
        )
    budget[0] -= len(data)
    budget[1] -= 1
    if not data.strip():
        raise EmptyDocumentError(f"{name}: no text found (the attachment is empty)")
    safe = _UNSAFE.sub("_", Path(name.replace("\\", "/")).name).strip(" .") or "attachment"
    if not Path(safe).suffix:
        safe += ".eml" if is_message else mimetypes.guess_extension(part.get_content_type()) or ""
    token = _DEPTH.set(_DEPTH.get() + 1)
    try:
        with tempfile.TemporaryDirectory(prefix="flexmatch-attachment-") as folder:
            copy = Path(folder) / safe
            copy.write_bytes(data)
            try:
                parsed = parse_file(copy, reading.max_bytes, reading.parsers)
            except FlexMatchError as exc:
                message = str(exc).replace(str(copy), name)
                shown = message if message.startswith(name) else f"{name}: {message}"
                raise type(exc)(shown) from None
            except Exception as exc:  # a parser bug: the message is still read
                raise ParseError(f"{name}: could not parse: {short_reason(exc)}") from exc
    finally:
        _DEPTH.reset(token)
    return parsed


def _under(element: Element, name: str) -> Element:
    """``element`` placed in the attachment ``name``: its location names the attachment
    (before any attachment it names itself), a heading or title goes one level down."""
    where = element.location
    inner = where.attachment if where is not None else None
    attachment = f"{name} › {inner}" if inner else name
    location = (where or Location()).model_copy(update={"attachment": attachment})
    update: dict[str, Any] = {"location": location}
    if element.kind == "title":
        update.update(kind="heading", level=2)
    elif element.kind == "heading":
        update["level"] = element.level + 1
    return element.model_copy(update=update)
