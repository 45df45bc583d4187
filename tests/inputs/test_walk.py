"""A folder walk on real material: every file stored or skipped with a reason, skips
counted (never failures), an unreadable folder one failure while the walk goes on; and a
file named on its own that cannot be read stays a failure. Through the loader and the
real ``flexmatch ingest`` command."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
from pathlib import Path

import pytest

from flexmatch.inputs.sources.files import LoadTask, discover, load
from flexmatch.models import Document, FailedDocument
from tests.conftest import REPO, run
from tests.inputs.parsing.test_formats import MAN_PAGE, RST


def make_folder(root: Path) -> Path:
    """What a real docs folder holds: compressed changelogs and man pages, files named
    without a suffix, reStructuredText, a CSV, empty package markers and binary blobs."""
    (root / "pkg" / "doc").mkdir(parents=True)
    (root / "pkg" / "README").write_text("Frob\n\nFrob twiddles the bits of a file.\n")
    (root / "pkg" / "copyright").write_text("Files: *\nCopyright: 2024 Frob authors\n")
    (root / "pkg" / "README.Debian").write_text("frob for Debian\n\n* built without X\n")
    (root / "pkg" / "changelog.Debian.gz").write_bytes(
        gzip.compress(b"frob (2.0-1) unstable; urgency=low\n\n  * New upstream release.\n")
    )
    (root / "pkg" / "frob.1.gz").write_bytes(gzip.compress(MAN_PAGE.encode()))
    (root / "pkg" / "doc" / "guide.rst").write_text(RST)
    (root / "pkg" / "doc" / "flags.csv").write_text("flag,meaning\n-v,verbose\n-q,quiet\n")
    (root / "pkg" / "__init__.py").write_bytes(b"")
    (root / "pkg" / "blank.md").write_text("  \n\n")
    (root / "pkg" / "libfrob.so.6").write_bytes(b"\x7fELF" + random.Random(1).randbytes(3000))
    (root / "pkg" / "frob.mo").write_bytes(b"\xde\x12\x04\x95" + bytes(500))
    (root / "pkg" / "junk.txt").write_bytes(b"\x00\x01\x02" * 400)
    return root


READ = {
    "README",
    "copyright",
    "README.Debian",
    "changelog.Debian.gz",
    "frob.1.gz",
    "guide.rst",
    "flags.csv",
}
SKIPPED = {
    "__init__.py": "empty",
    "blank.md": "empty",
    "libfrob.so.6": "binary file",
    "frob.mo": "unsupported type",
    "junk.txt": "binary file",
}


def walk(root: Path, parsers: dict[str, str] | None = None) -> list[Document | FailedDocument]:
    tasks, failures = discover([root])
    items: list[Document | FailedDocument] = list(failures)
    for task in tasks:
        items.extend(load(task, "docs", 10_000_000, parsers=parsers))
    return items


def test_a_walk_stores_or_skips_every_file_with_a_reason(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "docs")
    items = walk(root)
    stored = {Path(i.uri).name for i in items if isinstance(i, Document)}
    skipped = {
        Path(i.uri).name: i.skipped for i in items if isinstance(i, FailedDocument) and i.skipped
    }
    failed = [i.error for i in items if isinstance(i, FailedDocument) and not i.skipped]
    assert (stored, skipped, failed) == (READ, SKIPPED, [])
    man = next(i for i in items if isinstance(i, Document) and i.uri.endswith("frob.1.gz"))
    assert man.title == "frob - twiddle the bits of a file"
    assert man.metadata["path"] == "pkg/frob.1.gz"


def test_a_file_named_on_its_own_that_cannot_be_read_is_a_failure(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "docs")
    for name in SKIPPED:
        (item,) = load(LoadTask(root / "pkg" / name), "docs", 10_000_000)
        assert isinstance(item, FailedDocument) and item.skipped is None, name
        assert name in item.error


def test_the_parsers_setting_reads_what_would_be_skipped(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "docs")
    items = walk(root, parsers={"*.Debian": "markdown", "frob.mo": "text"})
    mo = next(i for i in items if i.uri.endswith("frob.mo"))
    assert isinstance(mo, FailedDocument) and mo.skipped is None  # the user asked: a failure
    assert mo.error.endswith("frob.mo: looks like a binary file, not text")
    debian = next(i for i in items if isinstance(i, Document) and i.uri.endswith(".Debian"))
    assert [e.kind for e in debian.elements] == ["paragraph", "list_item"]


def test_an_unreadable_folder_is_one_failure_and_the_walk_goes_on(tmp_path: Path) -> None:
    """A folder whose path is too long to name (PATH_MAX) cannot be read, even by root."""
    root = make_folder(tmp_path / "docs")
    descriptor = os.open(root / "pkg", os.O_RDONLY)
    for _ in range(20):  # 20 x 250 characters: past the 4,096 a path may have
        os.mkdir("d" * 250, dir_fd=descriptor)
        deeper = os.open("d" * 250, os.O_RDONLY, dir_fd=descriptor)
        os.close(descriptor)
        descriptor = deeper
    os.close(descriptor)
    items = walk(root)
    failed = [i for i in items if isinstance(i, FailedDocument) and not i.skipped]
    assert len(failed) == 1 and failed[0].error.endswith("not read (File name too long)")
    assert {Path(i.uri).name for i in items if isinstance(i, Document)} == READ


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a folder whatever its mode")
def test_a_folder_without_permission_is_one_failure(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "docs")
    locked = root / "pkg" / "locked"
    locked.mkdir()
    (locked / "secret.txt").write_text("never read")
    locked.chmod(0)
    try:
        items = walk(root)
    finally:
        locked.chmod(0o755)
    failed = [i.error for i in items if isinstance(i, FailedDocument) and not i.skipped]
    assert failed == [f"{locked}: folder not read (Permission denied)"]


def test_the_cli_counts_skips_by_reason_and_exits_0(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "docs")
    kb = tmp_path / "kb"
    assert run("init", str(kb)).returncode == 0
    result = run("ingest", "--kb", str(kb), "--json", str(root))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["added"] == len(READ) and report["failed"] == []
    assert report["skipped"] == {"empty": 2, "binary file": 2, "unsupported type": 1}
    assert {Path(f["uri"]).name for f in report["skipped_files"]} == set(SKIPPED)
    again = run("ingest", "--kb", str(kb), str(root))  # unchanged: the console says it
    assert again.returncode == 0, again.stderr
    lines = " ".join(again.stderr.split())
    assert "skipped (empty): 2 files: __init__.py, blank.md" in lines
    assert "skipped (binary file): 2 files: junk.txt, libfrob.so.6" in lines
    assert "skipped (unsupported type): 1 file [.mo 1]: frob.mo" in lines
    assert lines.count("read: .1, .2") == 1  # the readable suffixes, said once
    named = run("ingest", "--kb", str(kb), str(root / "pkg" / "frob.mo"))
    assert named.returncode == 2 and "frob.mo: unsupported file type '.mo'" in named.stderr


def test_the_cli_refuses_an_unknown_parser_naming_the_known_ones(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    assert run("init", str(kb)).returncode == 0
    config = kb / "flexmatch.yaml"
    config.write_text(config.read_text() + "\ningest:\n  parsers:\n    '*.Debian': txt\n")
    docs = make_folder(tmp_path / "docs")
    result = run("ingest", "--kb", str(kb), str(docs))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    message = " ".join(result.stderr.split())
    assert "ingest.parsers: '*.Debian': no parser 'txt' (known parsers: code, csv" in message


# --- real material: this machine's own docs and man pages ----------------------------------

REAL_ROOTS = (Path("/usr/share/doc"), Path("/usr/share/man"))


def real_sample(target: Path, count: int = 80, max_bytes: int = 60_000) -> list[Path]:
    """A fixed-seed sample of this machine's docs and man pages (small files, so the test
    stays quick), copied at test time (never committed)."""
    found = sorted(
        p
        for root in REAL_ROOTS
        if root.is_dir()
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and 0 < p.stat().st_size <= max_bytes
    )
    if len(found) < count:
        pytest.skip("this machine has too few docs and man pages")
    chosen = random.Random(22).sample(found, count)
    copies = []
    for path in chosen:
        copy = target / path.relative_to("/usr/share")
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy)
        copies.append(copy)
    return copies


def test_a_real_docs_folder_is_read_or_skipped_with_no_failure(tmp_path: Path) -> None:
    copies = real_sample(tmp_path / "share")
    items = walk(tmp_path / "share")
    failed = [i.error for i in items if isinstance(i, FailedDocument) and not i.skipped]
    assert failed == []
    assert len(items) == len(copies)
    stored = [i for i in items if isinstance(i, Document)]
    assert len(stored) >= len(copies) * 3 // 4  # most of it is text a parser reads
    assert any(d.metadata.get("compressed") for d in stored)


def test_a_report_counts_skips_apart_from_failures() -> None:
    from flexmatch.models import IngestReport

    first, second = IngestReport(), IngestReport()
    first.record_failed(FailedDocument(uri="a.so", error="a.so: binary", skipped="binary file"))
    first.record_failed(FailedDocument(uri="b.pdf", error="b.pdf: PDF is encrypted"))
    second.record_failed(FailedDocument(uri="c.so", error="c.so: binary", skipped="binary file"))
    second.record_failed(FailedDocument(uri="d", error="d: no text", skipped="empty"))
    both = IngestReport.combined([first, second])
    assert both.skipped == {"binary file": 2, "empty": 1}
    assert [f.uri for f in both.failed] == ["b.pdf"]
    assert [o.input for o in both.outcomes] == ["b.pdf"]  # skips are not outcomes
    assert both.processed == 4  # but they are done: a progress bar reaches its end


# --- what is text but no prose, and what is over the byte cap: skipped by reason -----------

NONPROSE = REPO / "tests" / "data" / "nonprose"


def test_a_walk_skips_text_that_is_no_prose_by_its_reason(tmp_path: Path) -> None:
    from tests.inputs.parsing.test_nonprose import SKIPPED as NOT_PROSE

    root = shutil.copytree(NONPROSE, tmp_path / "docs")
    items = walk(root)
    skipped = {Path(i.uri).name: i.skipped for i in items if isinstance(i, FailedDocument)}
    stored = {Path(i.uri).name for i in items if isinstance(i, Document)}
    assert skipped == NOT_PROSE
    assert stored == {p.name for p in (NONPROSE / "prose").iterdir()}
    (named,) = load(LoadTask(root / "skipped" / "manual.ps.gz"), "docs", 10_000_000)
    assert isinstance(named, FailedDocument) and named.skipped is None  # named: a failure
    assert "manual.ps.gz (manual.ps): PostScript page code" in named.error


def test_a_walk_skips_a_file_over_the_byte_cap_and_a_named_one_fails(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "docs")
    (root / "big.txt").write_text("A long note. " * 100)
    (root / "big.log.gz").write_bytes(gzip.compress(b"A long log line.\n" * 100))
    tasks, _ = discover([root])
    items = [item for task in tasks for item in load(task, "docs", 1000)]
    skipped = {Path(i.uri).name: i.skipped for i in items if isinstance(i, FailedDocument)}
    assert skipped["big.txt"] == skipped["big.log.gz"] == "over the byte cap"
    assert not [i for i in items if isinstance(i, FailedDocument) and not i.skipped]
    (named,) = load(LoadTask(root / "big.txt"), "docs", 1000)
    assert isinstance(named, FailedDocument) and named.skipped is None


def items_in(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_the_cli_skips_non_prose_and_over_cap_files_with_exit_0(tmp_path: Path) -> None:
    from tests.inputs.parsing.test_nonprose import SKIPPED as NOT_PROSE

    root = shutil.copytree(NONPROSE, tmp_path / "docs")
    (root / "big.txt").write_text("A long note. " * 2000)
    kb = tmp_path / "kb"
    assert run("init", str(kb)).returncode == 0
    config = kb / "flexmatch.yaml"
    config.write_text(config.read_text() + "\ningest:\n  max_document_bytes: 20000\n")
    result = run("ingest", "--kb", str(kb), str(root))
    assert result.returncode == 0, result.stderr
    lines = " ".join(result.stderr.split())
    assert "skipped (PostScript): 1 file: manual.ps.gz" in lines
    assert "skipped (symbol table): 2 files: libstdc++_symbols.txt.amd64, libz.nm.txt" in lines
    assert "skipped (over the byte cap): 1 file: big.txt" in lines
    assert (
        f"warning: skipped {root / 'big.txt'}: the file is 26,000 bytes, over the "
        "20,000-byte cap (ingest.max_document_bytes)" in lines
    )
    again = run("ingest", "--kb", str(kb), "--json", str(root))
    report = json.loads(again.stdout)
    assert again.returncode == 0, again.stderr
    counts: dict[str, int] = {}
    for reason in NOT_PROSE.values():
        counts[reason] = counts.get(reason, 0) + 1
    assert report["skipped"] == {**counts, "over the byte cap": 1}
    assert report["failed"] == [] and len(report["warnings"]) == 1
    # standard error: one JSON progress event a line, the last one at the end of the run
    events = [json.loads(line) for line in again.stderr.splitlines()]
    assert events and all(e["event"] == "progress" for e in events)
    assert events[-1]["processed"] == events[-1]["planned"] == len(items_in(root))
    assert events[-1]["skipped"] == len(NOT_PROSE) + 1 and events[-1]["unchanged"] == 5
    named = run("ingest", "--kb", str(kb), str(root / "big.txt"))
    assert named.returncode == 2 and "over the 20,000-byte cap" in named.stderr


def test_a_progress_event_says_where_a_run_stands_in_one_line() -> None:
    from flexmatch.models import IngestReport

    report = IngestReport(planned=4, chunks=7)
    report.record_stored("a", "a.md", changed=False, chunks=7, matching_texts=20)
    report.record_failed(FailedDocument(uri="b.ps", error="b.ps: PostScript", skipped="PostScript"))
    line = report.progress(12.345).model_dump_json()
    assert "\n" not in line
    assert json.loads(line) == {
        "event": "progress",
        "planned": 4,
        "processed": 2,
        "added": 1,
        "changed": 0,
        "unchanged": 0,
        "failed": 0,
        "skipped": 1,
        "chunks": 14,
        "matching_texts": 20,
        "llm_calls": 0,
        "seconds": 12.3,
    }
