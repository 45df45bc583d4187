"""Optional dependencies are extras: a missing one is a clear error naming the extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flexmatch import MissingExtraError
from flexmatch.service import require_extra
from tests.conftest import DOCS

# Python with some modules made unimportable, as if their extra were not installed
BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
"""
CLI = """
sys.argv = ["flexmatch", *{args!r}]
from flexmatch.adapters.cli.app import main
main()
"""


def _python(blocked: set[str], code: str) -> subprocess.CompletedProcess[str]:
    script = BLOCK.format(blocked=sorted(blocked)) + code
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )


def _without(blocked: set[str], *args: str) -> subprocess.CompletedProcess[str]:
    return _python(blocked, CLI.format(args=list(args)))


def test_require_names_the_extra() -> None:
    with pytest.raises(MissingExtraError, match=r"needs the 'server' extra.*flexmatch\[server\]"):
        require_extra("no_such_module_anywhere", "server", "the thing")


def test_serve_without_the_server_extra(tmp_path: Path) -> None:
    done = _without({"fastapi", "uvicorn"}, "serve", "--kb", str(tmp_path))
    assert done.returncode == 2
    assert "flexmatch serve needs the 'server' extra" in done.stderr
    assert "Traceback" not in done.stderr


def test_mcp_without_the_mcp_extra(tmp_path: Path) -> None:
    done = _without({"mcp"}, "mcp", "--kb", str(tmp_path))
    assert done.returncode == 2 and "needs the 'mcp' extra" in done.stderr


def test_a_pdf_without_the_parsers_extra_is_a_clear_per_file_error() -> None:
    pdf = DOCS / "pdf_fake-memo.pdf"
    code = (
        "from flexmatch.inputs.sources.files import LoadTask, load\n"
        f"[item] = load(LoadTask(__import__('pathlib').Path({str(pdf)!r})), 'default', 10**7)\n"
        "print(item.error)\n"
    )
    done = _python({"pdfminer", "pypdf"}, code)
    assert done.returncode == 0, done.stderr
    assert "pdf_fake-memo.pdf: reading .pdf files needs the 'parsers' extra" in done.stdout
    assert "pip install 'flexmatch[parsers]'" in done.stdout


def test_ingest_without_the_local_model_extra(tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nSomething worth finding.\n")
    (tmp_path / "flexmatch.yaml").write_text("")  # a knowledge base
    done = _without({"onnxruntime", "tokenizers"}, "ingest", "--kb", str(tmp_path), str(notes))
    assert done.returncode == 2
    assert "the packaged embedding model needs the 'local' extra" in done.stderr
    assert "Traceback" not in done.stderr
