"""What every framework adapter carries of a result, and how a missing framework is named
(quick: no framework is imported; tests/adapters/test_frameworks.py drives the real ones)."""

from __future__ import annotations

import importlib
import json
import sys

import pytest

from flexmatch import Client, ConfigError, MissingExtraError, SearchResult
from flexmatch.adapters.frameworks.common import result_metadata, search_options
from flexmatch.models import Location


def test_a_result_becomes_flat_json_metadata() -> None:
    result = SearchResult(
        chunk_id="d1#0",
        document_id="d1",
        uri="/srv/docs/handbook.pdf",
        source="default",
        title="Handbook",
        heading_path=["Handbook", "Moorings"],
        content="A 12-metre yacht pays £38.40 a night.",
        qualifying_text="The fees section of the handbook.",
        matched_text="How much is a night's mooring?",
        score=0.91,
        metadata={"year": 2026},
        location=Location(page=7),
    )
    metadata = result_metadata(result)
    assert metadata == {
        "chunk_id": "d1#0",
        "document_id": "d1",
        "source": "default",
        "uri": "/srv/docs/handbook.pdf",
        "title": "Handbook",
        "heading_path": ["Handbook", "Moorings"],
        "location": {"page": 7},
        "cite": "handbook.pdf p. 7",
        "score": 0.91,
        "matched_text": "How much is a night's mooring?",
        "qualifying_text": "The fees section of the handbook.",
        "metadata": {"year": 2026},
        "hop": None,
        "found_by": None,
        "context": None,
    }
    json.dumps(metadata)
    unplaced = result_metadata(result.model_copy(update={"location": None}))
    assert unplaced["location"] is None and unplaced["cite"] == "handbook.pdf"


def test_a_tenant_is_a_local_knowledge_bases_only() -> None:
    with Client("http://127.0.0.1:9", "key") as client:
        assert search_options(client, 3, None, None) == {
            "top_n": 3,
            "filters": None,
            "depth": "fast",
        }
        with pytest.raises(ConfigError, match=r"tenant 'acme'.*API key"):
            search_options(client, 3, None, "acme")


@pytest.mark.parametrize(
    ("module", "framework", "extra"),
    [
        ("langchain", "langchain_core", "langchain"),
        ("llamaindex", "llama_index.core", "llamaindex"),
        ("openai_agents", "agents", "openai-agents"),
    ],
)
def test_a_missing_framework_names_its_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, framework: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, framework, None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, f"flexmatch.adapters.frameworks.{module}", raising=False)
    with pytest.raises(MissingExtraError, match=rf"pip install 'flexmatch\[{extra}\]'"):
        importlib.import_module(f"flexmatch.adapters.frameworks.{module}")
