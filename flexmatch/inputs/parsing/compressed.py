"""Single compressed files (``.gz``, ``.bz2``, ``.xz``): read as the file they hold; and
the cap on what a zip container (``.docx``, ``.pptx``, ``.xlsx``, ``.odt``, ``.epub``) unpacks to.

The stream is decompressed in pieces and stopped one byte past the byte cap, so the cap
(``ingest.max_document_bytes``) applies to what the file holds, not to its compressed
size: a decompression bomb (a few kilobytes that expand to gigabytes) is one clear
failure, never a worker's whole memory. A zip container's parts are what its parser
holds in memory (python-docx and python-pptx load every part): when they unpack to more
than a parse may use (``ingest.parse_memory_mb``), the file is refused before one is
read, naming that cap (their sizes are in the zip's directory, and the zip reader stops
at the size a part declares).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

from flexmatch.errors import DocumentTooLargeError, ParseError
from flexmatch.inputs.isolation import memory_cap_mb
from flexmatch.inputs.parsing._common import memory_cap

_Opener = Callable[[Path], io.BufferedIOBase]
_OPENERS: dict[str, tuple[str, _Opener]] = {
    ".gz": ("gzip", gzip.GzipFile),
    ".bz2": ("bzip2", bz2.BZ2File),
    ".xz": ("xz", lzma.LZMAFile),
}
COMPRESSED: frozenset[str] = frozenset(_OPENERS)
"""The suffixes of the compressed single files read as what they hold."""

_PIECE = 1 << 20


def inner_name(path: Path) -> str:
    """The name of the file a compressed one holds: ``NEWS.gz`` → ``NEWS``."""
    return path.name[: -len(path.suffix)] or "file"


def decompressed(path: Path, max_bytes: int) -> bytes:
    """The bytes ``path`` holds, at most ``max_bytes`` of them: past that, the file is
    refused (reading stops one byte past the cap)."""
    kind, opener = _OPENERS[path.suffix.lower()]
    pieces: list[bytes] = []
    size = 0
    try:
        with opener(path) as stream:
            while size <= max_bytes:
                piece = stream.read(min(_PIECE, max_bytes + 1 - size))
                if not piece:
                    break
                pieces.append(piece)
                size += len(piece)
    except (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError) as exc:
        raise ParseError(f"{path}: could not decompress {kind} file: {exc}") from None
    if size > max_bytes:
        raise DocumentTooLargeError(
            f"{path}: decompresses to over {max_bytes:,} bytes, over the byte cap "
            "(ingest.max_document_bytes); not read"
        )
    return b"".join(pieces)


ZIP_PARSERS = frozenset({"docx", "pptx", "xlsx", "odt", "epub"})
"""The built-in parsers whose files are zip containers."""


def check_unpacked(path: Path, label: str) -> None:
    """Refuse a zip container whose parts unpack to more than a parse may use (in a parse
    worker, whose cap is known); a file that is no zip is left to its parser to name."""
    megabytes = memory_cap_mb()
    if megabytes is None:
        return
    try:
        with zipfile.ZipFile(path) as container:
            total = sum(info.file_size for info in container.infolist())
    except (OSError, zipfile.BadZipFile, ValueError):
        return
    if total > megabytes * 1024 * 1024:
        raise DocumentTooLargeError(
            f"{label}: its parts unpack to {total:,} bytes, {memory_cap()}; not read"
        )
