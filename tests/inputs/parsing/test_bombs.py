"""Decompression bombs fail naming the cap that stopped them, in a parse worker as an
ingest runs them: a zip container whose parts unpack past the memory cap is refused
before one is read, and a parse that runs out of memory names that cap too."""

from __future__ import annotations

import gzip
import io
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from flexmatch.errors import DocumentTooLargeError
from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.inputs.parsing import parse_file

CAP_MB = 64  # the workers' ingest.parse_memory_mb here: small, so the bombs stay small
PARAGRAPH = b"<w:p><w:r><w:t>a</w:t></w:r></w:p>"


def docx_bomb(path: Path, megabytes: int) -> Path:
    """A real Word document whose body is ``megabytes`` MB of one-letter paragraphs,
    compressed about 150 times (a 100 MB body is a 0.6 MB file)."""
    import docx

    blank = io.BytesIO()
    docx.Document().save(blank)
    with zipfile.ZipFile(blank) as source, zipfile.ZipFile(path, "w") as bomb:
        for info in source.infolist():
            data = source.read(info)
            if info.filename != "word/document.xml":
                bomb.writestr(info, data)
                continue
            head, tail = data.split(b"<w:body>")
            piece = PARAGRAPH * ((1 << 20) // len(PARAGRAPH))
            part = zipfile.ZipInfo("word/document.xml")
            part.compress_type = zipfile.ZIP_DEFLATED
            with bomb.open(part, "w") as out:
                out.write(head + b"<w:body>")
                for _ in range(megabytes):
                    out.write(piece)
                out.write(tail)
    return path


@pytest.fixture(scope="module")
def pool() -> Iterator[IsolatedPool]:
    workers = IsolatedPool(workers=1, memory_mb=CAP_MB)
    yield workers
    workers.close()


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Word document whose parts unpack to about 100 MB: over the cap."""
    return docx_bomb(tmp_path_factory.mktemp("bomb") / "bomb.docx", 100)


def test_a_docx_bomb_is_refused_naming_the_memory_cap(pool: IsolatedPool, bomb: Path) -> None:
    assert bomb.stat().st_size < 2_000_000
    with pytest.raises(DocumentTooLargeError) as raised:
        pool.run(parse_file, bomb, label=str(bomb))
    message = str(raised.value)
    assert message.startswith(f"{bomb}: its parts unpack to 10")
    assert message.endswith(
        f" bytes, more than the {CAP_MB} MB a parse may use (ingest.parse_memory_mb); not read"
    )


@pytest.mark.parametrize("suffix", [".pptx", ".xlsx", ".odt", ".epub"])
def test_every_zip_container_is_held_to_the_memory_cap(
    pool: IsolatedPool, bomb: Path, tmp_path: Path, suffix: str
) -> None:
    copy = tmp_path / f"bomb{suffix}"
    shutil.copy(bomb, copy)
    with pytest.raises(DocumentTooLargeError, match=r"parts unpack to .*parse_memory_mb"):
        pool.run(parse_file, copy, label=str(copy))


def test_a_gzipped_docx_bomb_names_the_file_and_the_cap(
    pool: IsolatedPool, bomb: Path, tmp_path: Path
) -> None:
    packed = tmp_path / "bomb.docx.gz"
    packed.write_bytes(gzip.compress(bomb.read_bytes()))
    with pytest.raises(DocumentTooLargeError) as raised:
        pool.run(parse_file, packed, label=str(packed))
    assert str(raised.value).startswith(f"{packed} (bomb.docx): its parts unpack to")
    assert "(ingest.parse_memory_mb)" in str(raised.value)


def test_a_parse_that_runs_out_of_memory_names_the_cap(pool: IsolatedPool, tmp_path: Path) -> None:
    """Under the cap as it unpacks (40 MB of 64), over it as a parsed tree."""
    small = docx_bomb(tmp_path / "tree.docx", 40)
    with pytest.raises(DocumentTooLargeError) as raised:
        pool.run(parse_file, small, label=str(small))
    assert str(raised.value) == (
        f"{small}: parsing the Word (.docx) file needs more than the {CAP_MB} MB a parse "
        "may use (ingest.parse_memory_mb); not read"
    )


def test_a_container_within_the_cap_parses(pool: IsolatedPool, tmp_path: Path) -> None:
    import docx

    path = tmp_path / "fine.docx"
    document = docx.Document()
    document.add_paragraph("The harbour opens at dawn.")
    document.save(str(path))
    assert "harbour" in pool.run(parse_file, path, label=str(path)).text
