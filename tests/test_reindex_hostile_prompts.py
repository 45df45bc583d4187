"""Hostile prompts in a re-index: the Jinja sandbox's refusals (a range too big, an
include of a local file) are one clear line and exit 2 through the real CLI, never a
Python traceback; nothing is read from the file system."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.testing import FakeLLMServer
from tests.conftest import llm_config, run, write_config

HOSTILE = {
    "range": ("{% for i in range(10**9) %}{% endfor %}{{ chunk.text }}", "OverflowError"),
    "list": ("{{ range(10**8)|list|length }}{{ chunk.text }}", "OverflowError"),
    "include": ("{% include '/etc/passwd' %}{{ chunk.text }}", "TypeError: no loader"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_prompt_fails_reindex_in_one_line(
    name: str, tmp_path: Path, embedder: OnnxEmbedder, llm_server: FakeLLMServer
) -> None:
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server))
    (tmp_path / "a.md").write_text("# Ferry\n\nThe ferry crosses the bay every hour.\n")
    with KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        assert kb.ingest([tmp_path / "a.md"]).added == 1
    source, says = HOSTILE[name]
    (kb_dir / "prompts").mkdir(exist_ok=True)
    (kb_dir / "prompts" / "questions.j2").write_text(source, encoding="utf-8")
    done = run("reindex", "--kb", str(kb_dir))
    said = done.stdout + done.stderr
    assert "Traceback" not in said and "root:x:0" not in said
    assert done.returncode == 2, said
    assert "questions.j2: could not render" in said and says in said
