"""Every chain per source: each source's query transform, reranker and formatter, and the
keywords chains that give a source a second matching-text form."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

import flexmatch as fm
from flexmatch.config import ChainRef, KBConfig
from flexmatch.engine.chains import ChainContext, MatchingTextChain, QueryTransform, build_chain
from flexmatch.engine.chains.plan import QueryPlan, SourceGroup
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.engine.query.rerank import rerank
from flexmatch.engine.query.run import group_scopes
from flexmatch.errors import ConfigError
from flexmatch.evaluation import load_setup
from flexmatch.models import Document, Element, SearchResult, Section
from flexmatch.testing import FakeLLMServer
from tests.conftest import llm_config, run, write_config

MIXED = """
default_source: faq
sources:
  faq:
    matching_text: questions
  catalog:
    matching_text: keywords
    query_transform: keywords
"""


def _plan(yaml_text: str, kb_dir: Path) -> QueryPlan:
    write_config(kb_dir, yaml_text)
    config = fm.load_config(kb_dir)
    return QueryPlan.build(config, ChainContext(kb_dir=kb_dir))


def test_sources_with_the_same_query_chains_are_one_group(tmp_path: Path) -> None:
    plan = _plan(MIXED + "  manuals: {}\n", tmp_path)
    assert [g.sources for g in plan.groups] == [["faq", "manuals"], ["catalog"]]
    # no LLM: the keywords transform runs its offline fallback, the others the default's
    assert plan.by_source["catalog"].query_transform.spec.type == "keyphrases"
    assert plan.by_source["faq"].query_transform.spec.name == "identity"
    assert plan.by_source["faq"].reranker is plan.by_source["catalog"].reranker


def test_a_knowledge_base_without_overrides_is_one_unfiltered_group(tmp_path: Path) -> None:
    plan = _plan("sources:\n  a: {}\n  b: {}\ndefault_source: a\n", tmp_path)
    assert len(plan.groups) == 1
    assert group_scopes(plan.groups, "a", None) == [(plan.groups[0], {}, None)]


def test_group_scopes_keep_the_callers_sources(tmp_path: Path) -> None:
    plan = _plan(MIXED, tmp_path)

    def scopes(filters: dict | None) -> list:
        return [(g.sources, f, x) for g, f, x in group_scopes(plan.groups, "faq", filters)]

    # the default source's group also reaches sources no longer configured
    assert scopes({"tags": "x"}) == [
        (["faq"], {"tags": "x"}, {"source": ["catalog"]}),
        (["catalog"], {"tags": "x", "source": ["catalog"]}, None),
    ]
    assert scopes({"source": "faq"}) == [(["faq"], {"source": ["faq"]}, None)]
    assert scopes({"source": ["faq", "catalog"]}) == [
        (["faq"], {"source": ["faq"]}, None),
        (["catalog"], {"source": ["catalog"]}, None),
    ]
    assert scopes({"source": "removed"}) == [(["faq"], {"source": ["removed"]}, None)]


def test_chains_of_two_kinds_share_a_name(tmp_path: Path) -> None:
    context = ChainContext(kb_dir=tmp_path)
    matching = build_chain(ChainRef(chain="keywords"), MatchingTextChain, context)
    transform = build_chain(ChainRef(chain="keywords"), QueryTransform, context)
    assert (matching.spec.kind, transform.spec.kind) == ("matching_text", "query_transform")
    # a knowledge base's own NAME.KIND.yaml wins over the built-in
    (tmp_path / "chains").mkdir()
    (tmp_path / "chains" / "keywords.query_transform.yaml").write_text(
        "kind: query_transform\ntype: identity\n", encoding="utf-8"
    )
    own = build_chain(ChainRef(chain="keywords"), QueryTransform, ChainContext(kb_dir=tmp_path))
    assert (own.spec.name, own.spec.type) == ("keywords", "identity")


def test_keyphrases_index_and_search_in_one_form(tmp_path: Path) -> None:
    text = (
        "The Denver Broncos defeated the Carolina Panthers in Super Bowl 50 at Levi's "
        "Stadium in Santa Clara, California."
    )
    document = Document(
        id="d",
        uri="u",
        source="s",
        title="Super Bowl 50",
        elements=[Element(kind="paragraph", text=text)],
    )
    context = ChainContext(kb_dir=tmp_path)
    chain = build_chain(ChainRef(chain="keyphrases"), MatchingTextChain, context)
    texts = asyncio.run(chain.run(Section(text=text, heading_path=[]), document))
    phrases = [t.text for t in texts if t.kind == "keyword"]
    assert "Denver Broncos" in phrases and texts[-1].kind == "content"
    query = build_chain(ChainRef(chain="keyphrases"), QueryTransform, context)
    variants = asyncio.run(query.run("Who won Super Bowl 50 against the Carolina Panthers?"))
    assert variants[0].startswith("Who won") and "Carolina Panthers" in variants[1]


@pytest.fixture(scope="module")
def mixed_kb(
    tmp_path_factory: pytest.TempPathFactory, _llm_server: FakeLLMServer, embedder: OnnxEmbedder
) -> Path:
    """The FAQ and the catalog, each ingested with its source's chains through the fake LLM
    once for this module, in this process (two CLI ingests with an LLM take ~20 s, and
    ``ingest --source`` through the CLI is covered by the crawl and web tests); each test
    queries its own copy."""
    _llm_server.reset()
    kb_dir = tmp_path_factory.mktemp("mixed") / "kb"
    write_config(kb_dir, llm_config(_llm_server, MIXED))
    faq, catalog = kb_dir / "faq.md", kb_dir / "catalog.md"
    faq.write_text(
        "# Returns\n\nOrders can be returned within 30 days of delivery for a full refund.\n",
        encoding="utf-8",
    )
    catalog.write_text(
        "# Lanterns\n\nThe Aurora camping lantern runs 40 hours on four AA batteries.\n",
        encoding="utf-8",
    )
    with fm.KnowledgeBase.open(kb_dir, embedder=embedder, env={}) as kb:
        assert kb.ingest([faq], source="faq").added == 1
        assert kb.ingest([catalog], source="catalog").added == 1
    # the catalog is indexed by key phrases, the FAQ by questions, both from the LLM
    chains = [json.dumps(r.body) for r in _llm_server.requests_to("/chat/completions")]
    assert any('\\"keywords\\": [' in c for c in chains)
    assert any('\\"questions\\": [' in c for c in chains)
    return kb_dir


def _copy(mixed_kb: Path, kb_dir: Path, server: FakeLLMServer, extra: str = "") -> None:
    """A copy of the ingested knowledge base, with ``extra`` query-side settings added to
    its config (they change nothing that is ingested)."""
    shutil.copytree(mixed_kb, kb_dir)
    write_config(kb_dir, llm_config(server, MIXED + extra))


def test_each_source_is_searched_in_its_own_form(
    tmp_path: Path, mixed_kb: Path, llm_server: FakeLLMServer
) -> None:
    """Through the CLI with a real LLM endpoint: the catalog's chunks were indexed by key
    phrases, the query reaches it as key phrases and the FAQ as a question."""
    kb_dir = tmp_path / "kb"
    _copy(mixed_kb, kb_dir, llm_server)
    done = run("query", "camping lantern batteries", "--json", "--explain", cwd=kb_dir)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    prompts = [json.dumps(r.body) for r in llm_server.requests if r.path.endswith("completions")]
    assert sum('\\"keywords\\": [' in p for p in prompts) == 1  # the catalog's transform
    assert sum('\\"questions\\": [' in p for p in prompts) == 1  # the FAQ's rewrite
    assert "camping, lantern, batteries" in answer["variants"]  # the key phrases searched
    assert "Camping lantern batteries?" in answer["variants"]  # the question form
    assert answer["results"][0]["source"] == "catalog"
    assert {r["source"] for r in answer["results"]} == {"catalog", "faq"}
    # the chains command says what each source resolves to
    listed = run("chains", "--json", cwd=kb_dir)
    assert listed.returncode == 0, listed.stderr
    uses = {(u["where"], u["kind"]): u["chain"] for u in json.loads(listed.stdout)}
    assert uses[("source catalog", "query_transform")] == "keywords"
    assert uses[("query", "query_transform")] == "rewrite"
    # asked for one source, only that source's transform runs
    llm_server.reset()
    done = run("query", "refund", "--filter", "source=faq", "--json", cwd=kb_dir)
    prompts = [json.dumps(r.body) for r in llm_server.requests if r.path.endswith("completions")]
    assert done.returncode == 0 and len(prompts) == 1 and '\\"questions\\": [' in prompts[0]


def test_sources_with_their_own_reranker_and_formatter(
    tmp_path: Path, mixed_kb: Path, llm_server: FakeLLMServer
) -> None:
    kb_dir = tmp_path / "kb"
    _copy(mixed_kb, kb_dir, llm_server, "    reranker: none\n    formatter: json\n")
    with fm.KnowledgeBase.open(kb_dir) as kb:
        answer = kb.search("lantern refund batteries", top_n=4)
        sources = [r.source for r in answer.results]
        assert set(sources) == {"catalog", "faq"}
        text = kb.format(answer.query, answer.results)
        # two rerankers: query.reranker ranks the union and so gives each source its
        # places; the catalog's own reranker ('none') only orders what fills its places
        plain = {n: s.model_copy(update={"reranker": None}) for n, s in kb.config.sources.items()}
        kb.use_query_config(kb.config.query, plain)
        assert len({g.reranker_ref for g in kb.query_plan().groups}) == 1
        union = kb.search("lantern refund batteries", top_n=4)
        assert [r.source for r in union.results] == sources
    # each result formatted by its source's formatter (the catalog's as JSON), in rank
    # order: one part per run of results with the same formatter
    assert '"source": "catalog"' in text and "Returns" in text
    assert '"source": "faq"' not in text
    parts = [
        text.find(r.title) if r.source == "faq" else text.find(r.chunk_id) for r in answer.results
    ]
    assert parts == sorted(parts) and -1 not in parts


def test_setups_deal_a_corpus_to_sources(tmp_path: Path) -> None:
    setup = load_setup("mixed-per-source", KBConfig())
    assert setup.corpus_sources == ("questions", "keywords")
    shared = load_setup("mixed-shared", KBConfig())
    assert setup.ingest_key == shared.ingest_key  # the query side is not ingested
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": str(i)}) + "\n" for i in range(5)))
    parts = setup.corpus_parts(corpus, tmp_path / "parts")
    assert [(p.read_text().count("\n"), s) for p, s in parts] == [(3, "questions"), (2, "keywords")]
    bad = tmp_path / "bad.yaml"
    bad.write_text("corpus_sources: [nowhere]\n")
    with pytest.raises(ConfigError, match="corpus_sources"):
        load_setup(str(bad), KBConfig())


def test_a_removed_sources_documents_stay_findable(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """A source taken out of the configuration keeps its documents searchable through
    the default source's group, as in a knowledge base of one group."""
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, llm_config(llm_server, MIXED + "  old: {}\n"))
    (kb_dir / "old.md").write_text(
        "# Warranty\n\nEvery lantern carries a two-year warranty.\n", encoding="utf-8"
    )
    with fm.KnowledgeBase.open(kb_dir) as kb:
        assert kb.ingest([kb_dir / "old.md"], source="old").added == 1
    write_config(kb_dir, llm_config(llm_server, MIXED))  # 'old' is gone from the config
    with fm.KnowledgeBase.open(kb_dir) as kb:
        assert len(kb.query_plan().groups) == 2
        assert kb.query("lantern warranty years")[0].source == "old"
        assert kb.query("warranty", filters={"source": "old"})[0].source == "old"
        assert kb.query("warranty", filters={"source": "catalog"}) == []


class _Order:
    """A reranker stand-in: orders candidates by a fixed key."""

    def __init__(self, key: Callable[[SearchResult], float]) -> None:
        self.key = key

    async def run(self, query: str, candidates: list[SearchResult]) -> list[SearchResult]:
        ranked = sorted(candidates, key=self.key, reverse=True)
        return [c.model_copy(update={"score": self.key(c)}) for c in ranked]


def _result(chunk_id: str, source: str, score: float) -> SearchResult:
    return SearchResult(
        chunk_id=chunk_id,
        document_id=chunk_id,
        uri=chunk_id,
        source=source,
        title=chunk_id,
        heading_path=[],
        content=chunk_id,
        qualifying_text="",
        matched_text=chunk_id,
        score=score,
    )


def test_groups_with_their_own_rerankers_fill_the_places_the_union_ranking_gives() -> None:
    a = [_result("a1", "a", 0.9), _result("a2", "a", 0.7)]
    b = [_result("b1", "b", 0.8), _result("b2", "b", 0.6)]
    by_score = _Order(lambda r: r.score)
    reverse = _Order(lambda r: -r.score)  # source a's own judgement: the other way round
    groups = [
        SourceGroup(["a"], cast(Any, None), cast(Any, reverse), "t", "reverse"),
        SourceGroup(["b"], cast(Any, None), cast(Any, by_score), "t", "by-score"),
    ]
    merged = asyncio.run(rerank("q", groups, [a, b], cast(Any, by_score)))
    # the union ranking gives a, b, a, b; a's reranker fills a's places in its order
    assert [r.chunk_id for r in merged] == ["a2", "b1", "a1", "b2"]
    assert [r.score for r in merged] == [0.9, 0.8, 0.7, 0.6]
