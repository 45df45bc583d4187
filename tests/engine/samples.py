"""Small documents and helpers shared by the ingest-path and document-record tests."""

from __future__ import annotations

from pathlib import Path

from flexmatch import KnowledgeBase

HARBOUR = "\n\n".join(
    [
        "# Harbour",
        "The harbour opens at six in the morning.",
        "## Fees",
        "Mooring costs twelve euros.\n",
    ]
)
ORCHARD = "# Orchard\n\nApples are picked in September.\n\n## Storage\n\nFruit is kept cold.\n"


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def match_points(kb: KnowledgeBase, tenant: str = "default") -> list[dict]:
    return [h.payload for h in kb.store.scroll(tenant, {"record": "match"})]
