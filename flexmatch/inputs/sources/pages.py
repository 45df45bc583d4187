"""A fetched page → a document: its main content read (HTML, plain text, or a file type
a parser reads, PDF, Word, …), and what a crawl reads of a page (links, robots meta tags,
sitemaps). This runs in the same killable worker processes as fetching and parsing
(``isolation``).
"""

from __future__ import annotations

import mimetypes
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit, urlunsplit

from flexmatch.errors import EmptyDocumentError, FlexMatchError, ParseError, UnsupportedFormatError
from flexmatch.inputs.sources.fetch import FetchedPage
from flexmatch.inputs.sources.web_policy import ROBOT_NAME
from flexmatch.models import Document, Element, ParsedDocument

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", ""})


def _file_suffix(content_type: str) -> str | None:
    """The file suffix a parser reads pages of this type as (``application/pdf`` → .pdf)."""
    from flexmatch.inputs.parsing import SUPPORTED_SUFFIXES

    suffix = mimetypes.guess_extension(content_type) if content_type else None
    return suffix if suffix in SUPPORTED_SUFFIXES else None


def parseable(content_type: str) -> bool:
    """Whether ``parse_page`` can read a page of this content type."""
    return (
        content_type in HTML_TYPES
        or content_type.startswith("text/")
        or _file_suffix(content_type) is not None
    )


def parse_page(page: FetchedPage) -> ParsedDocument:
    """The main content of a fetched page: HTML, plain text, or a file type a parser
    reads (PDF, Word, …)."""
    from flexmatch.inputs.parsing import parse_file, parse_text
    from flexmatch.inputs.parsing.html import parse_html_bytes

    suffix = _file_suffix(page.content_type)
    if page.content_type in HTML_TYPES:
        parsed = parse_html_bytes(page.body, base_title=page.url)
    elif page.content_type.startswith("text/"):
        parsed = parse_text(page.body.decode("utf-8", errors="replace"), title=page.url)
    elif suffix is not None:
        stem = Path(urlsplit(page.url).path).stem[:80] or "page"
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"{stem}{suffix}"
            path.write_bytes(page.body)
            try:
                parsed = parse_file(path)
            except FlexMatchError as exc:  # named by its URL, not the temporary file
                raise type(exc)(str(exc).replace(str(path), page.url)) from None
    else:
        kind = page.content_type
        raise UnsupportedFormatError(f"{page.url}: cannot import content of type '{kind}'")
    metadata = {
        **parsed.metadata,
        "url": page.url,
        "fetched_at": page.fetched_at,
        **page.validators,
    }
    return parsed.model_copy(update={"metadata": metadata})


def page_document(parsed: ParsedDocument, *, document_id: str, uri: str, source: str) -> Document:
    """A fetched page's document: its title first (the URL when it has none)."""
    elements = parsed.elements
    if parsed.title and not any(e.kind == "title" for e in elements):
        elements = [Element(kind="title", text=parsed.title), *elements]
    return Document(
        id=document_id,
        uri=uri,
        source=source,
        title=parsed.title or parsed.metadata.get("url") or uri,
        elements=elements,
        metadata=parsed.metadata,
    )


# -- crawling: links, robots meta tags, sitemaps (run in worker processes) ----------------
_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_url(url: str) -> str | None:
    """``url`` in one spelling (scheme and host lower case, default port, credentials and
    fragment dropped, an empty path as ``/``), or None when it is not an http(s) URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


@dataclass(frozen=True)
class CrawledPage:
    """A fetched page read for a crawl: its content (None: ``noindex``, or ``error``) and
    the links to follow (none for ``nofollow``)."""

    parsed: ParsedDocument | None
    links: list[str] = field(default_factory=list)
    error: str | None = None
    empty: bool = False  # no text of its own (a page of links): nothing to import, no error
    more_links: bool = False  # the page had more links than were kept


MAX_LINKS = 1_000  # links kept from one page, unless the caller says otherwise


def read_crawled(page: FetchedPage, max_links: int = MAX_LINKS) -> CrawledPage:
    """Links (``<a href>``, ``<link rel=canonical>``; the first ``max_links``), then the
    main content: a page whose content cannot be read (an index of links only, say) still
    gives its links."""
    links, index, follow, more = _links_and_directives(page, max_links)
    if not follow:
        links, more = [], False
    if not index:
        return CrawledPage(None, links, more_links=more)
    try:
        parsed = parse_page(page)
    except EmptyDocumentError as exc:
        return CrawledPage(None, links, str(exc), empty=True, more_links=more)
    except FlexMatchError as exc:
        return CrawledPage(None, links, str(exc), more_links=more)
    return CrawledPage(parsed, links, more_links=more)


def _links_and_directives(
    page: FetchedPage, max_links: int = MAX_LINKS
) -> tuple[list[str], bool, bool, bool]:
    """(links, index, follow, more) of an HTML page: its first ``max_links`` distinct
    links (``more``: it had others), and what its robots meta tags say of index and
    follow. Links are gathered only up to the cap, so a page of a quarter of a million
    links costs no more than one of ``max_links``."""
    if page.content_type not in HTML_TYPES or not page.body.strip():
        return [], True, True, False
    import lxml.html
    from lxml import etree

    try:
        root = lxml.html.document_fromstring(page.body)
    except (etree.ParserError, ValueError):
        return [], True, True, False
    directives: set[str] = set()
    for meta in root.iter("meta"):
        if (meta.get("name") or "").strip().lower() in ("robots", ROBOT_NAME.lower()):
            content = (meta.get("content") or "").lower()
            directives.update(word.strip() for word in content.split(","))
    base = page.url
    for element in root.iter("base"):
        if element.get("href"):
            base = urljoin(page.url, element.get("href", "").strip())
            break
    links: dict[str, None] = {}  # in page order, each once
    more = False
    for element in root.iter("a", "link"):
        href = (element.get("href") or "").strip()
        rel = (element.get("rel") or "").lower().split()
        if not href or (element.tag == "link" and "canonical" not in rel):
            continue
        url = normalise_url(urljoin(base, href))
        if url is None or url in links:
            continue
        if len(links) >= max_links:
            more = True
            break
        links[url] = None
    index = not directives & {"noindex", "none"}
    follow = not directives & {"nofollow", "none"}
    return list(links), index, follow, more


def sitemap_urls(body: bytes, max_bytes: int) -> tuple[list[str], list[str]]:
    """(pages, sitemaps) a sitemap (or sitemap index) lists; gzip-compressed or not.
    Entities are never expanded, no DTD or network is read."""
    from lxml import etree

    if body[:2] == b"\x1f\x8b":
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        body = inflate.decompress(body, max_bytes)
        if inflate.unconsumed_tail:
            raise ParseError(f"the sitemap is over the {max_bytes:,}-byte cap unpacked")
    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, recover=True
    )
    try:
        root = etree.fromstring(body, parser)
    except etree.XMLSyntaxError as exc:
        raise ParseError(f"the sitemap is not XML: {exc}") from None
    pages: list[str] = []
    sitemaps: list[str] = []
    if root is None:
        return pages, sitemaps
    for loc in root.iter("{*}loc"):
        parent = loc.getparent()
        kind = etree.QName(parent).localname if parent is not None else ""
        url = normalise_url(loc.text or "")
        if url is not None and kind in ("url", "sitemap"):
            (pages if kind == "url" else sitemaps).append(url)
    return pages, sitemaps
