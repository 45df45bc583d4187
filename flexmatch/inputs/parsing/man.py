"""Man pages (roff, ``.1``–``.9`` and gzipped), rendered by groff, read by their layout.

groff (Debian's ``groff-base``, on every Debian system that has ``man``) is the roff
reader: it runs every macro, escape, font and ``tbl`` table the way ``man`` shows them,
where a Python roff reader would handle a subset. Its plain-text rendering is regular: a
section heading (``NAME``, ``SYNOPSIS``…) starts at column 0, a subsection at column 3,
body text deeper, and blank lines separate paragraphs; that is read back into headings,
paragraphs and list items. The page's title is its NAME line (``ls - list directory
contents``). Rendered lines do not map to the source's lines, so elements carry none:
each says the section (and subsection) it is in instead, so a result is cited as ``man``
names the place (``fsck(8) › EXIT CODES``).

A page that only points to another one (``.so man3/other.3``) has no text of its own.

A page is untrusted input (an upload, a repository's file), and roff can read files:
``.so``, ``.mso``, ``.nx`` read one as input, ``.cf``/``.trf`` copy one into the output,
``\\V`` reads an environment variable, and groff's safer mode (``-S``) still allows all
of these. So groff runs with none of them: the macro package is loaded first (``-man`` or
``-mdoc`` in full, not the lazily loading ``-mandoc``), then a prologue *removes* every
request that reads, writes or runs anything (``.rm so mso ...``) before the page's first
line. A removed request has no name left to call it by: no alias (``.als``), rename
(``.rn``), changed escape or control character (``.ec``, ``.cc``) or interpolated string
brings it back, where a filter of the source text would have to foresee every spelling.
groff also runs with an empty environment (``PATH`` and the locale only: ``\\V`` finds
nothing, no ``GROFF_TMAC_PATH`` or ``HOME`` adds a folder to search) in an empty
temporary folder, in safer mode.

One way to open a file stays: groff 1.22 takes a font name as a path (``.ft ../../x``,
``\\f[../../x]``), and a font request cannot be removed; a page can then test whether
a file exists (``.if F``), or read a font file's numbers. So groff runs confined
(``confined``: Landlock, where the kernel has it): it reads only the system's programs
and data and its own empty folder. Its messages, which can quote what it read, are never
read (a failed page is said by its exit status), and a page that loops (a font of
``/dev/zero``) is ended with its whole process group at the timeout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from flexmatch.errors import EmptyDocumentError, MissingExtraError, ParseError
from flexmatch.inputs.parsing._common import (
    ElementBuilder,
    clean_inline,
    finish,
    parse_errors,
    split_list_lines,
)
from flexmatch.inputs.parsing.confined import run_confined
from flexmatch.inputs.parsing.text import add_text_blocks, decode_text, looks_binary
from flexmatch.models import Location, ParsedDocument

_COMMAND = [
    "groff",
    "-S",  # safer mode (groff's default, said here): no .pso, .sy, .open, .pi
    "-t",  # tbl tables
    "-Kutf-8",  # the input is given as UTF-8 (decoded here)
    "-Tutf8",
    "-P-cbou",  # plain text: no escape sequences, no overstriking
    "-rLL=250n",  # long lines: a paragraph is rarely wrapped
    "-rHY=0",  # no hyphenation
    "-dAD=l",  # no justification spaces
]
# the macro package, loaded whole before the page ("-mNAME" loads NAME.tmac): not
# -mandoc, -man or -mmdoc, which load it at the page's first .TH or .Dd, by the .mso
# the prologue removes
_MAN_MACROS = "-man-old"  # an-old.tmac: man(7) and its extensions (an-ext, man.local)
_MDOC_MACROS = "-mdoc"  # doc.tmac: mdoc(7) and its parts (mdoc/doc-common, ...)
_FIRST_MACRO = re.compile(r"^[.'][ \t]*(TH|Dd)\b", re.MULTILINE)
# requests that read a file (.so .mso .nx .cf .trf .hpf .psbb ...), write one
# (.open .opena) or run a command (.pso .pi .sy): removed before the page is read
# (names groff does not have, e.g. 1.23's .soquiet on 1.22, are removed silently)
FILE_REQUESTS = (
    "so",
    "soquiet",
    "mso",
    "msoquiet",
    "nx",
    "cf",
    "trf",
    "hpf",
    "hpfa",
    "psbb",
    "pso",
    "pi",
    "sy",
    "open",
    "opena",
)
_PROLOGUE = f".rm {' '.join(FILE_REQUESTS)}\n"
_SO_ONLY = re.compile(r"\A(?:\s*(?:[.']\\\".*)?\n)*\s*\.so\s+(\S+)\s*\Z")
_MACROS = re.compile(r"^[.'][ \t]*(?:TH|SH|Dd|Sh)\b", re.MULTILINE)
_SECTION_INDENT = 0
_SUBSECTION_INDENT = 3
TIMEOUT = 60.0


def render(text: str, label: Path | str) -> str:
    """groff's plain-text rendering of a man page."""
    groff = shutil.which("groff")
    if groff is None:
        raise MissingExtraError(
            f"{label}: reading man pages needs groff (Debian/Ubuntu: apt-get install groff-base)"
        )
    first = _FIRST_MACRO.search(text)
    macros = _MDOC_MACROS if first is not None and first[1] == "Dd" else _MAN_MACROS
    # nothing of the server's environment: only where groff's programs are, and the locale
    folders = dict.fromkeys([str(Path(groff).parent), "/usr/bin", "/bin"])
    env = {"PATH": os.pathsep.join(folders), "LC_ALL": "C.UTF-8", "GROFF_NO_SGR": "1"}
    source = (_PROLOGUE + text).encode("utf-8")
    try:
        with tempfile.TemporaryDirectory(prefix="flexmatch-groff-") as empty:
            status, out = run_confined(
                [groff, *_COMMAND[1:], macros, "-"],
                Path(empty),
                stdin=source,
                timeout=TIMEOUT,
                env=env,
            )
    except subprocess.TimeoutExpired:
        raise ParseError(f"{label}: groff took longer than {TIMEOUT:g}s") from None
    if status != 0 and not out.strip():
        raise ParseError(
            f"{label}: groff could not render the man page (exit status {status}; "
            "its messages are not shown, as a page can make them quote a file)"
        )
    return out.decode("utf-8", "replace")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def rendered_to_builder(rendered: str) -> tuple[ElementBuilder, str]:
    """Headings, paragraphs and list items of a rendered page, and its NAME line."""
    lines = rendered.replace("\u2010", "-").split("\n")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if len(filled) > 2:  # the running header and footer (``LS(1) ... LS(1)``)
        lines = lines[filled[0] + 1 : filled[-1]]
    builder = ElementBuilder()
    section = ""
    subsection = ""
    name = ""
    block: list[str] = []

    def where() -> Location | None:
        headings = [clean_inline(text) for text in (section, subsection) if text]
        return Location(section=" › ".join(headings)) if headings else None

    def flush() -> None:
        nonlocal name
        for kind, content in split_list_lines([line.strip() for line in block]):
            if section == "NAME" and not name:
                name = clean_inline(content)
            builder.add(kind, content, location=where())
        block.clear()

    for line in lines:
        if not line.strip():
            flush()
            continue
        indent = _indent(line)
        if indent == _SECTION_INDENT:
            flush()
            section, subsection = line.strip(), ""
            builder.add("heading", section, level=2, location=where())
        elif indent == _SUBSECTION_INDENT:
            flush()
            subsection = line.strip()
            builder.add("heading", subsection, level=3, location=where())
        else:
            block.append(line)
    flush()
    return builder, name


def parse_man(path: Path) -> ParsedDocument:
    """Parse a man page (roff source)."""
    data = path.read_bytes()
    if looks_binary(data):
        raise ParseError(f"{path}: looks like a binary file, not a man page")
    text = decode_text(data)
    link = _SO_ONLY.match(text)
    if link:
        raise EmptyDocumentError(f"{path}: no text found (a link to the man page {link[1]})")
    if not _MACROS.search(text):  # ``notes.1``: a man page's suffix on plain text
        builder = ElementBuilder()
        add_text_blocks(builder, text)
        return finish(path, builder, path.stem)
    with parse_errors(path, "man page"):
        builder, name = rendered_to_builder(render(text, path))
    return finish(path, builder, name or path.stem, {"format": "man"})
