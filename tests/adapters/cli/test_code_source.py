"""A folder of code through the real ``flexmatch`` command: ``ingest`` with the code
chunker and code matching texts (offline), then ``query`` finds the right function."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import REPO, run, write_config

FILES = {
    "app/storage.py": '''"""Where uploaded files are kept."""
import hashlib
from pathlib import Path


class BlobStore:
    """Keeps uploaded files on disk under their content hash."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, data: bytes) -> str:
        """Store the bytes of an upload and return the key they are kept under."""
        key = file_checksum(data)
        (self.root / key).write_bytes(data)
        return key

    def remove(self, key: str) -> None:
        """Delete a stored upload by its key."""
        (self.root / key).unlink()


def file_checksum(data: bytes) -> str:
    """Compute the SHA-256 checksum of a file's bytes, as hexadecimal."""
    return hashlib.sha256(data).hexdigest()
''',
    "app/mail.go": """package app

// SendInvoice emails the monthly invoice PDF to a customer.
func SendInvoice(customer string, pdf []byte) error {
\treturn deliver(customer, "invoice", pdf)
}

// RetryDelay says how long to wait before the n-th delivery retry.
func RetryDelay(n int) int {
\treturn n * n
}
""",
    "web/format.ts": """/** Formats a price in cents as a string with a currency sign. */
export function formatPrice(cents: number, currency: string): string {
  return `${currency}${(cents / 100).toFixed(2)}`;
}

export class Cart {
  /** Adds an item to the shopping cart and returns the new item count. */
  add(item: string): number { this.items.push(item); return this.items.length; }
}
""",
    "deploy/settings.yaml": "# how many worker processes serve requests\nworkers: 4\n"
    "database:\n  host: db.internal\n  pool_size: 10\n",
    "notes.txt": "not code: left out by the include globs\n",
}


def _kb(tmp_path: Path) -> tuple[Path, Path]:
    repo = tmp_path / "repo"
    for name, text in FILES.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    setup = (REPO / "configs" / "setups" / "code.yaml").read_text(encoding="utf-8")
    kb = tmp_path / "kb"
    write_config(kb, setup)  # the built-in code setup, as a knowledge base's config
    return kb, repo


def _query(kb: Path, text: str) -> dict:
    result = run("query", "--kb", str(kb), "--json", "--top-n", "3", text)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["results"][0]


def test_ingest_a_code_folder_then_query_finds_the_function(tmp_path: Path) -> None:
    kb, repo = _kb(tmp_path)
    result = run("ingest", "--kb", str(kb), "--json", str(repo))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["documents"] == 4 and report["failed"] == []  # notes.txt not included

    first = _query(kb, "compute the sha256 hash of file contents")
    assert first["heading_path"] == ["app/storage.py", "def file_checksum"]
    assert first["content"].startswith("def file_checksum(data: bytes) -> str:")
    assert first["title"] == "storage.py"
    assert first["location"] == {"line_start": 23, "line_end": 25}  # where it is in the file
    assert first["cite"] == "storage.py:23-25"
    panels = run(
        "query", "--kb", str(kb), "--top-n", "1", "compute the sha256 hash of file contents"
    )
    assert panels.returncode == 0 and "cite: storage.py:23-25" in panels.stdout, panels.stderr
    shown = run("docs", "show", first["document_id"], "--kb", str(kb))
    assert shown.returncode == 0 and "where: lines 23-25" in shown.stdout, shown.stderr

    first = _query(kb, "how long to wait before retrying a delivery")
    assert first["heading_path"][0] == "app/mail.go"  # a small file: its functions together
    assert "func RetryDelay(n int) int" in first["content"]

    first = _query(kb, "add an item to the shopping cart")
    assert first["heading_path"][:2] == ["web/format.ts", "class Cart"]

    first = _query(kb, "database pool size")
    assert first["heading_path"][0] == "deploy/settings.yaml"
    assert "database:\n  host: db.internal\n  pool_size: 10" in first["content"]
