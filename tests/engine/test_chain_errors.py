"""A chain's failure carries its context: a plug-in chain that raises ``KeyError`` reaches
the user as a ``ChainError`` naming the chain, its type and kind, the source and the input
(the document or the query), chained from the original; FlexMatch's own errors pass as
they are."""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
from pathlib import Path

import pytest

from flexmatch.engine.chains import ChainContext, QueryTransform, register
from flexmatch.engine.chains.base import SHOWN_INPUT, for_sources
from flexmatch.engine.chains.spec import ChainSpec
from flexmatch.errors import ChainError, LLMError
from tests.conftest import run, write_config
from tests.inputs.test_plugin_ids_cli import plugin_path

PLUGIN = """
from flexmatch.engine.chains import QualifyingTextChain, QueryTransform, register


@register("qualifying_text", "lookup_context")
class LookupContext(QualifyingTextChain):
    async def run(self, section, document):
        return {"harbour": "the harbour guide"}[document.metadata.get("region", "north")]


@register("query_transform", "lookup_rewrite")
class LookupRewrite(QueryTransform):
    async def run(self, query):
        return [{}["synonyms"]]
"""


def shown(uri: str) -> str:
    """How a failure quotes a document: its URI, shortened past ``SHOWN_INPUT``."""
    return repr(uri if len(uri) <= SHOWN_INPUT else uri[: SHOWN_INPUT - 3] + "...")


def test_a_plug_in_chains_key_error_is_named_through_the_cli(tmp_path: Path) -> None:
    site = plugin_path(
        tmp_path / "site",
        "lookups",
        textwrap.dedent(PLUGIN),
        "flexmatch.chains",
        "lookups = lookups",
    )
    kb = tmp_path / "kb"
    write_config(
        kb,
        "sources:\n  default:\n    qualifying_text: lookup\nquery:\n  transform: rewrite-lookup\n",
    )
    (kb / "chains").mkdir()
    (kb / "chains" / "lookup.yaml").write_text("kind: qualifying_text\ntype: lookup_context\n")
    (kb / "chains" / "rewrite-lookup.yaml").write_text(
        "kind: query_transform\ntype: lookup_rewrite\n"
    )
    doc = tmp_path / "ferry.md"
    doc.write_text("# Ferry\n\nThe ferry leaves at noon.\n", encoding="utf-8")
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}

    done = run("ingest", "--kb", str(kb), str(doc), "--json", env=env)
    failed = json.loads(done.stdout)["failed"]
    assert [f["error"] for f in failed] == [
        "qualifying_text chain 'lookup' (type 'lookup_context') failed on source 'default', "
        f"document {shown(str(doc))}: KeyError: 'north'"
    ]

    asked = run("query", "--kb", str(kb), "when does the ferry leave", env=env)
    assert asked.returncode != 0
    assert "Traceback" not in asked.stderr
    assert (
        "query_transform chain 'rewrite-lookup' (type 'lookup_rewrite') failed on source "
        "'default', query 'when does the ferry leave': KeyError: 'synonyms'"
    ) in " ".join(asked.stderr.split())


@register("query_transform", "test_failing_transform")
class _Failing(QueryTransform):
    """Raises what ``query`` names: an unexpected error, or one of FlexMatch's own."""

    async def run(self, query: str) -> list[str]:
        if query.startswith("llm"):
            raise LLMError("the LLM is down")
        raise ValueError("bad " + query[:5])


def _failing() -> _Failing:
    spec = ChainSpec(name="flaky", kind="query_transform", type="test_failing_transform")
    return _Failing(spec, ChainContext())


def test_an_unexpected_error_is_wrapped_and_chained_with_the_input_shortened() -> None:
    long_query = "where " * 40
    with pytest.raises(ChainError) as caught:
        asyncio.run(for_sources(["docs", "faq"], _failing().run(long_query)))
    message = str(caught.value)
    assert message.startswith(
        "query_transform chain 'flaky' (type 'test_failing_transform') failed on "
        "source 'docs', 'faq', query 'where where"
    )
    assert message.endswith("...': ValueError: bad where")
    assert len(message) < len(long_query)  # the query quoted shortened, not whole
    assert isinstance(caught.value.__cause__, ValueError)


def test_flexmatch_errors_pass_through_unwrapped() -> None:
    with pytest.raises(LLMError, match=r"^the LLM is down$"):
        asyncio.run(_failing().run("llm please"))
