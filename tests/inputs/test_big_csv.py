"""A CSV of millions of short rows is read as a stream: a 4 MB file of 2 million rows is
parsed by a worker under a 256 MB cap (one element a row took 4 GB) and ingested, each
row still cited by its row number."""

from __future__ import annotations

import random
import string
from pathlib import Path

from flexmatch.inputs.isolation import IsolatedPool
from flexmatch.inputs.parsing import parse_file
from flexmatch.testing import memory_knowledge_base

ROWS = 2_000_000


def big_csv(folder: Path) -> Path:
    """2 million one-letter rows (4 MB; random letters, so no two chunks are alike),
    one of them a word to find."""
    letters = random.Random(7).choices(string.ascii_lowercase, k=ROWS)
    rows = [f"{letter}\n" for letter in letters]
    rows[1_234_566] = "harbour\n"  # row 1,234,567
    path = folder / "letters.csv"
    path.write_text("".join(rows))
    assert 4_000_000 <= path.stat().st_size < 4_100_000
    return path


def test_a_4_mb_csv_of_2_million_rows_parses_under_a_small_memory_cap(tmp_path: Path) -> None:
    path = big_csv(tmp_path)
    pool = IsolatedPool(workers=1, memory_mb=256, timeout=120)
    try:
        parsed = pool.run(parse_file, path, label=str(path))
    finally:
        pool.close()
    assert parsed.metadata["rows"] == ROWS
    assert len(parsed.elements) < ROWS // 50  # rows gathered, a line each
    (found,) = [e for e in parsed.elements if "harbour" in e.text]
    assert found.location is not None
    line = found.text.split("\n").index("harbour")
    assert found.location.row_start is not None
    assert found.location.row_start + line == 1_234_567


def test_a_4_mb_csv_of_2_million_rows_ingests(tmp_path: Path) -> None:
    """Chunks of 4,000 tokens, so the test embeds 500 of them, not 5,000 (which took
    250 s on a loaded 2-core machine)."""
    path = big_csv(tmp_path)
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "flexmatch.yaml").write_text(
        "ingest:\n  parse_memory_mb: 256\n  parse_timeout: 120\n"
        "  near_duplicate_threshold: null\n"  # chunks of random letters: alike to a hash
        "sources:\n  default:\n    chunker: {chain: structure, params: {max_tokens: 4000}}\n"
    )
    with memory_knowledge_base(tmp_path / "kb") as kb:
        report = kb.ingest([path])
        assert (report.added, report.failed) == (1, [])
        assert report.chunks >= ROWS // 4000  # a chunk holds at most 4,000 rows
        hit = kb.query("harbour")[0]
        assert hit.location is not None and hit.location.row_start is not None
