"""Golden questions: a knowledge base judged on the questions its own users ask.

A golden set is a YAML list of items, each a question and what should answer it::

    - question: How long does a refund take?
      expect: {document: refunds.md}          # or {citation: "handbook.pdf p. 7"}
      must_not: [old-refunds.md]              # never shown for this question
      optional: true                          # a failure warns, it does not fail the run

``expect.document`` names a document as a result shows it: its id, its URI or the name
its citation gives (``refunds.md``, ``corpus.jsonl#42``). ``expect.citation`` is a
place as results cite it (``handbook.pdf p. 7``, ``guide.md:12``, as ``flexmatch query``
prints a result's ``cite``); a result answers it when its own citation is the same,
narrower, or overlaps its span (``cites``). A question *passes* when its
expected document (or citation) ranks within the first ``at`` (1 unless asked) and none
of its ``must_not`` documents is among the results an agent is shown (the first
``query.top_n``).

The same set runs against the knowledge base as it is, against ``--setup`` alternatives
(query-side ones on the same index; others on a re-index of its documents into a
throw-away knowledge base), and with each ranking signal switched off in turn
(``ablations``). This module stays below the facade: ``flexmatch.evaluate_golden``
gives it ``KnowledgeBase.open``.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from flexmatch.access import Principal
from flexmatch.config import (
    ChainRef,
    KBConfig,
    QueryConfig,
    SourceConfig,
    StoreConfig,
    ingest_side,
)
from flexmatch.engine.chains.output import parse_json
from flexmatch.engine.embedders import Embedder
from flexmatch.engine.llm import LLM
from flexmatch.errors import ConfigError, LLMError
from flexmatch.models import (
    MATCH_KINDS,
    DocumentDetail,
    DocumentRecord,
    IngestReport,
    SearchResult,
    cite_name,
)
from flexmatch.templates import load_prompt
from flexmatch.tools import MAX_QUERY_CHARS
from flexmatch.yamlio import load_yaml_text

CANDIDATES = 30  # results asked per question: enough documents for nDCG@10 and any --at
MAX_AT = 10
GOLDEN_PROMPT = "golden-question"
CURRENT = "current"


class Expect(BaseModel):
    """What should answer a question: a document, or one citation of it."""

    model_config = ConfigDict(extra="forbid")

    document: str | None = Field(None, min_length=1)
    citation: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one(self) -> Expect:
        if (self.document is None) == (self.citation is None):
            raise ValueError("give either document or citation")
        return self

    def __str__(self) -> str:
        return self.document if self.document is not None else f"{self.citation} (citation)"


class GoldenQuestion(BaseModel):
    """One golden question (see the module docstring for what each field means)."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, pattern=r"\S")
    expect: Expect
    must_not: list[str] = Field(default_factory=list)
    optional: bool = False


def load_golden(path: Path) -> list[GoldenQuestion]:
    """The golden set in ``path``; a ``ConfigError`` naming the item and field at fault."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it as UTF-8 text: {exc}") from None
    raw = load_yaml_text(text, str(path))
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{path}: expected a list of golden questions (question, expect)")
    items = []
    for number, item in enumerate(raw, start=1):
        try:
            items.append(GoldenQuestion.model_validate(item))
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error["loc"]) or "(the item)"
            message = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
            question = item.get("question") if isinstance(item, dict) else None
            named = f" ({str(question)[:60]!r})" if isinstance(question, str) else ""
            raise ConfigError(f"{path}: item {number}{named}: field '{field}': {message}") from None
    return items


def save_golden(items: Iterable[GoldenQuestion], path: Path) -> Path:
    """Write a golden set ``load_golden`` reads back (defaults left out)."""
    data = [item.model_dump(exclude_defaults=True, exclude_none=True) for item in items]
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


# -- judging -----------------------------------------------------------------------------
def is_document(result: SearchResult, reference: str) -> bool:
    """Whether ``result`` is of the document ``reference`` names (id, URI, or the name
    its citation gives)."""
    names = (result.document_id, result.uri, cite_name(result.uri, result.title))
    return reference in names


# a citation's last span: lines (``:12-40``), pages, slides or rows (``p. 7``, ``pp. 7-9``)
_SPAN = re.compile(r"(?P<unit>:| pp?\.| slides?| rows?) ?(?P<start>\d+)(?:-(?P<end>\d+))?$")
_UNIT = {":": "line", " p.": "page", " pp.": "page", " slide": "slide", " slides": "slide"}


def _span(cite: str) -> tuple[str, str, int, int] | None:
    """``cite`` as (what precedes its last span, the span's unit, first, last)."""
    found = _SPAN.search(cite)
    if found is None:
        return None
    unit = _UNIT.get(found["unit"], "row")
    start = int(found["start"])
    return cite[: found.start()], unit, start, int(found["end"] or start)


def cites(cite: str, citation: str) -> bool:
    """Whether a result citing ``cite`` answers a golden ``citation``: the same text
    (blanks aside); or ``cite`` is ``citation`` made narrower (``handbook.pdf`` is
    answered by ``handbook.pdf p. 7``, ``mail.eml`` by ``mail.eml › report.pdf p. 2``);
    or both end in spans of the same lines, pages, slides or rows of the same thing that
    overlap (``handbook.pdf p. 7`` by ``handbook.pdf pp. 6-8``, ``guide.md:12`` by
    ``guide.md:10-20``)."""
    given, wanted = " ".join(cite.split()), " ".join(citation.split())
    if given == wanted:
        return True
    if given.startswith(wanted) and given[len(wanted)] in " :#":
        return True
    ours, theirs = _span(given), _span(wanted)
    if ours is None or theirs is None or ours[:2] != theirs[:2]:
        return False
    return ours[2] <= theirs[3] and theirs[2] <= ours[3]


def rank_of(results: list[SearchResult], expect: Expect) -> int | None:
    """The rank (1 = first) of what ``expect`` names among the distinct documents (or,
    for a citation, the distinct citations) of ``results``; None when absent."""
    if expect.document is not None:
        reference = expect.document
        by_document: dict[str, list[SearchResult]] = {}
        for result in results:
            by_document.setdefault(result.document_id, []).append(result)
        for rank, members in enumerate(by_document.values(), start=1):
            if any(is_document(r, reference) for r in members):
                return rank
        return None
    citation = str(expect.citation)
    for rank, cite in enumerate(dict.fromkeys(r.cite for r in results), start=1):
        if cites(cite, citation):
            return rank
    return None


class GoldenOutcome(BaseModel):
    """One question's result: where its answer ranked, what came first, pass or fail."""

    question: str
    expect: Expect
    rank: int | None
    first: str | None  # the first result's citation
    shown_must_not: list[str] = Field(default_factory=list)
    optional: bool = False
    passed: bool


class GoldenScores(BaseModel):
    """Averages over the questions (binary relevance: one expected answer each)."""

    questions: int
    passed: int
    failed: int  # required questions that failed (what fails the command)
    hit_at_1: float
    hit_at_5: float
    mrr_at_10: float
    ndcg_at_10: float


def scores_of(outcomes: list[GoldenOutcome]) -> GoldenScores:
    n = max(1, len(outcomes))
    ranks = [o.rank for o in outcomes]

    def share(k: int) -> float:
        return round(sum(1 for r in ranks if r is not None and r <= k) / n, 4)

    return GoldenScores(
        questions=len(outcomes),
        passed=sum(o.passed for o in outcomes),
        failed=sum(not o.passed and not o.optional for o in outcomes),
        hit_at_1=share(1),
        hit_at_5=share(5),
        mrr_at_10=round(sum(1 / r for r in ranks if r is not None and r <= 10) / n, 4),
        ndcg_at_10=round(
            sum(1 / math.log2(r + 1) for r in ranks if r is not None and r <= 10) / n, 4
        ),
    )


class GoldenRun(BaseModel):
    """The golden set against one setup."""

    setup: str
    scores: GoldenScores
    outcomes: list[GoldenOutcome]
    note: str = ""


class Ablation(BaseModel):
    """The current setup with one signal switched off: how much the metrics drop. No
    scores when the signal cannot be switched off at query time (``note`` says why)."""

    signal: str
    how: str
    scores: GoldenScores | None = None
    ndcg_drop: float | None = None
    mrr_drop: float | None = None
    hit_at_1_drop: float | None = None
    note: str = ""


class GoldenEvaluation(BaseModel):
    """``flexmatch eval --kb``: every setup's run (the current one first) and the ablation."""

    at: int
    runs: list[GoldenRun]
    ablation: list[Ablation] = Field(default_factory=list)

    @property
    def failed(self) -> int:
        """Required questions the current setup fails: what fails the command."""
        return self.runs[0].scores.failed


class GoldenKB(Protocol):
    """What judging needs of a knowledge base: its config, the real query path, a switch
    of the query settings, and (for a re-index) ingest of documents and closing."""

    config: KBConfig

    @property
    def embedder(self) -> Embedder: ...
    async def aquery(
        self,
        text: str,
        *,
        top_n: int | None = None,
        top_k: int | None = None,
        filters: dict[str, Any] | None = None,
        tenant: str = ...,
        principal: Principal | None = None,
    ) -> list[SearchResult]: ...
    def use_query_config(
        self, query: QueryConfig, sources: dict[str, SourceConfig] | None = None
    ) -> None: ...
    async def aingest_documents(
        self, documents: Iterable[Any], *, tenant: str = ...
    ) -> IngestReport: ...
    def list_documents(
        self, *, source: str | None = None, tenant: str = ..., principal: Principal | None = None
    ) -> list[DocumentRecord]: ...
    def get_document(
        self, document_id: str, *, tenant: str = ..., principal: Principal | None = None
    ) -> DocumentDetail: ...
    def stored_copy(self, document_id: str, *, tenant: str = ...) -> Any: ...
    def close(self) -> None: ...


class GoldenOpener(Protocol):
    """How a re-index opens its throw-away knowledge base (``KnowledgeBase.open``)."""

    def __call__(
        self, path: Path, *, config: KBConfig, env: dict[str, str], embedder: Embedder | None
    ) -> GoldenKB: ...


@dataclass(frozen=True)
class Asker:
    """Whose view is judged: the tenant and the principal (None: everything)."""

    tenant: str
    principal: Principal | None = None


async def judge(
    kb: GoldenKB,
    items: list[GoldenQuestion],
    asker: Asker,
    *,
    at: int = 1,
    filters: dict[str, Any] | None = None,
    tick: Callable[[], None] | None = None,
) -> list[GoldenOutcome]:
    """Each golden question through the real query path, as ``asker``, judged."""
    shown = kb.config.query.top_n
    outcomes = []
    for item in items:
        results = await kb.aquery(
            item.question,
            top_n=CANDIDATES,
            filters=filters,
            tenant=asker.tenant,
            principal=asker.principal,
        )
        rank = rank_of(results, item.expect)
        seen = results[:shown]
        bad = [ref for ref in item.must_not if any(is_document(r, ref) for r in seen)]
        outcomes.append(
            GoldenOutcome(
                question=item.question,
                expect=item.expect,
                rank=rank,
                first=results[0].cite if results else None,
                shown_must_not=bad,
                optional=item.optional,
                passed=rank is not None and rank <= at and not bad,
            )
        )
        if tick is not None:
            tick()
    return outcomes


# -- the ablation ------------------------------------------------------------------------
@dataclass(frozen=True)
class Switch:
    """One signal switched off at query time: a query config, sources and filters."""

    signal: str
    how: str
    query: QueryConfig | None = None
    sources: dict[str, SourceConfig] | None = None
    filters: dict[str, Any] | None = None
    note: str = ""  # set: it cannot be switched off at query time


def _no_lexical(ref: ChainRef | None) -> ChainRef | None:
    """The fusion reranker without its BM25 share (other rerankers take no such part)."""
    if ref is None or ref.chain != "fusion-rerank":
        return ref
    return ChainRef(chain=ref.chain, params={**ref.params, "lexical_weight": 0})


def _without_kind(kind: str) -> dict[str, Any]:
    return {"match_kind": [k for k in MATCH_KINDS if k != kind]}


def switches(config: KBConfig) -> list[Switch]:
    """Each signal of the ranking, switched off one at a time, at query time."""
    query, sources = config.query, config.sources
    kinds = [
        ("questions", "question", "the LLM's questions"),
        ("sentences", "sentence", "the chunk's sentences"),
        ("chunk text", "content", "the chunk's whole text (dense)"),
        ("learned", "learned", "the queries people marked helpful (feedback)"),
    ]
    found = [
        Switch(name, f"match kind '{kind}' ({what}) filtered out", filters=_without_kind(kind))
        for name, kind, what in kinds
    ]
    if query.retrieval == "lexical":
        found.append(Switch("BM25", "", note="BM25 is the only retrieval: nothing is left"))
    else:
        found.append(
            Switch(
                "BM25",
                "retrieval: dense, and the fusion reranker's lexical_weight 0",
                query=query.model_copy(
                    update={"retrieval": "dense", "reranker": _no_lexical(query.reranker)}
                ),
                sources={
                    name: s.model_copy(update={"reranker": _no_lexical(s.reranker)})
                    for name, s in sources.items()
                },
            )
        )
    found.append(
        Switch(
            "context",
            "",
            note="the qualifying text is shown beside a result, not matched: "
            "it cannot change the ranking",
        )
    )
    found.append(
        Switch(
            "reranker",
            "reranker: none (the first-stage order)",
            query=query.model_copy(update={"reranker": ChainRef(chain="none")}),
            sources={name: s.model_copy(update={"reranker": None}) for name, s in sources.items()},
        )
    )
    return found


def _drop(base: float, value: float) -> float:
    return round(base - value, 4)


async def ablate(
    kb: GoldenKB,
    items: list[GoldenQuestion],
    asker: Asker,
    base: GoldenScores,
    *,
    at: int = 1,
    ticker: Callable[[str], Callable[[], None]] | None = None,
) -> list[Ablation]:
    """Each signal switched off in turn on ``kb`` (its settings restored after);
    ``ticker`` gives each run's progress callback, by name."""
    config = kb.config
    rows = []
    try:
        for switch in switches(config):
            if switch.note:
                rows.append(Ablation(signal=switch.signal, how=switch.how, note=switch.note))
                continue
            kb.use_query_config(switch.query or config.query, switch.sources or config.sources)
            outcomes = await judge(
                kb,
                items,
                asker,
                at=at,
                filters=switch.filters,
                tick=ticker(f"without {switch.signal}") if ticker is not None else None,
            )
            got = scores_of(outcomes)
            rows.append(
                Ablation(
                    signal=switch.signal,
                    how=switch.how,
                    scores=got,
                    ndcg_drop=_drop(base.ndcg_at_10, got.ndcg_at_10),
                    mrr_drop=_drop(base.mrr_at_10, got.mrr_at_10),
                    hit_at_1_drop=_drop(base.hit_at_1, got.hit_at_1),
                )
            )
    finally:
        kb.use_query_config(config.query, config.sources)
    return rows


# -- setups side by side -----------------------------------------------------------------
class Alternative(Protocol):
    """A setup to run the golden set against (``flexmatch.Setup``, from ``load_setup``)."""

    @property
    def name(self) -> str: ...
    @property
    def config(self) -> KBConfig: ...


async def _reindexed(
    open_kb: GoldenOpener,
    kb: GoldenKB,
    setup: Alternative,
    items: list[GoldenQuestion],
    asker: Asker,
    folder: Path,
    at: int,
    tick: Callable[[], None] | None,
) -> GoldenRun:
    """``setup`` on a re-index of the documents the asker may read (their stored copies)
    into a throw-away knowledge base in ``folder``; asked there with no principal, as
    only what the principal may read is in it."""
    records = kb.list_documents(tenant=asker.tenant, principal=asker.principal)
    copies = [kb.stored_copy(r.id, tenant=asker.tenant) for r in records]
    documents = [c for c in copies if c is not None]
    config = setup.config.model_copy(update={"store": StoreConfig()})
    other = open_kb(folder, config=config, env={}, embedder=kb.embedder)
    try:
        report = await other.aingest_documents(documents, tenant=asker.tenant)
        # only what the asker may read is in it: asked there as its operator
        outcomes = await judge(other, items, Asker(asker.tenant), at=at, tick=tick)
    finally:
        other.close()
    missing = len(copies) - len(documents)
    note = f"re-indexed {len(documents)} documents" + (
        f" ({missing} without a stored copy left out)" if missing else ""
    )
    if report.failed:  # e.g. a source the setup does not have
        note += f"; {len(report.failed)} failed, the first: {report.failed[0].error}"
    return GoldenRun(setup=setup.name, scores=scores_of(outcomes), outcomes=outcomes, note=note)


async def run_golden(
    open_kb: GoldenOpener,
    kb: GoldenKB,
    items: list[GoldenQuestion],
    work_dir: Path,
    *,
    setups: Iterable[Alternative] = (),
    ablation: bool = False,
    at: int = 1,
    tenant: str,
    principal: Principal | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> GoldenEvaluation:
    """The golden set against ``kb`` as it is, then each setup (query-side ones on the
    same index, others re-indexed in ``work_dir``), then the ablation."""
    if not 1 <= at <= MAX_AT:
        raise ConfigError(f"--at {at}: the rank a question must reach is 1 to {MAX_AT}")
    asker = Asker(tenant, principal)
    total = len(items)

    def ticker(name: str) -> Callable[[], None]:
        done = 0

        def tick() -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(name, done, total)

        return tick

    config = kb.config
    outcomes = await judge(kb, items, asker, at=at, tick=ticker(CURRENT))
    runs = [GoldenRun(setup=CURRENT, scores=scores_of(outcomes), outcomes=outcomes)]
    for index, setup in enumerate(setups):
        if ingest_side(setup.config) == ingest_side(config):
            kb.use_query_config(setup.config.query, setup.config.sources)
            try:
                found = await judge(kb, items, asker, at=at, tick=ticker(setup.name))
            finally:
                kb.use_query_config(config.query, config.sources)
            runs.append(
                GoldenRun(
                    setup=setup.name,
                    scores=scores_of(found),
                    outcomes=found,
                    note="query settings only: the same index",
                )
            )
        else:
            folder = work_dir / f"kb-{index}"
            runs.append(
                await _reindexed(open_kb, kb, setup, items, asker, folder, at, ticker(setup.name))
            )
    rows = []
    if ablation:
        rows = await ablate(kb, items, asker, runs[0].scores, at=at, ticker=ticker)
    return GoldenEvaluation(at=at, runs=runs, ablation=rows)


# -- generating a golden set -------------------------------------------------------------
async def generate_questions(
    kb: GoldenKB,
    llm: LLM | None,
    count: int,
    *,
    seed: int = 0,
    tenant: str,
    principal: Principal | None = None,
    kb_dir: Path | None = None,
) -> list[GoldenQuestion]:
    """``count`` held-out questions, one for each of as many chunks drawn at random
    (``seed``) from what ``principal`` may read, written by ``llm`` with a prompt unlike
    the indexing one (``prompts/golden-question.j2``: a user who has not read the
    passage, in their own words). A question that repeats one of the chunk's matching
    texts word for word is dropped: it would test the index against itself. Each
    expects the chunk's document, named as its citation names it when no other document
    has that name, else by its id."""
    if llm is None:
        raise ConfigError(
            "--generate needs an LLM to write the questions: set models.llm in "
            "flexmatch.yaml (or FLEXMATCH_LLM, with FLEXMATCH_LLM_API_BASE for a local server)"
        )
    if count < 1:
        raise ConfigError(f"--generate {count}: the number of questions is at least 1")
    records = [
        r
        for r in kb.list_documents(tenant=tenant, principal=principal)
        if r.status == "complete" and r.chunks
    ]
    slots = sorted((r.id, index) for r in records for index in range(r.chunks))
    if not slots:
        raise ConfigError("--generate: the knowledge base holds no chunks to ask about")
    chosen = random.Random(seed).sample(slots, min(count, len(slots)))
    names = Counter(cite_name(r.uri, r.title) for r in records)
    by_id = {r.id: r for r in records}
    details: dict[str, DocumentDetail] = {}
    prompt = load_prompt(GOLDEN_PROMPT, kb_dir, {"title", "heading_path", "text"})

    async def one(document_id: str, index: int) -> GoldenQuestion | None:
        if document_id not in details:
            details[document_id] = kb.get_document(document_id, tenant=tenant, principal=principal)
        chunks = details[document_id].chunks
        if index >= len(chunks):  # a near-duplicate chunk is not stored
            return None
        record, chunk = by_id[document_id], chunks[index]
        text = prompt.render(
            title=record.title or cite_name(record.uri),
            heading_path=chunk.heading_path,
            text=chunk.content[:4000],
        )
        answer = parse_json(await llm.complete(text))
        question = answer.get("question") if isinstance(answer, dict) else None
        if not isinstance(question, str) or not question.strip():
            return None
        asked = " ".join(question.split())[:300]
        plain = _plain(asked)
        indexed = [_plain(m.text) for m in chunk.matching_texts]
        # a sentence is indexed under its heading's label ("Fees: Mooring costs ...")
        if any(text == plain or text.endswith(f": {plain}") for text in indexed):
            echoes.append(asked)  # not held out: the chunk is indexed by these very words
            return None
        name = cite_name(record.uri, record.title)
        reference = name if names[name] == 1 else record.id
        return GoldenQuestion(question=asked, expect=Expect(document=reference))

    echoes: list[str] = []
    made = await asyncio.gather(*(one(document_id, index) for document_id, index in chosen))
    questions = [q for q in made if q is not None]
    if not questions:
        why = (
            f"{len(echoes)} repeated a text its chunk is indexed by, word for word"
            if echoes
            else 'each answer must be JSON: {"question": "..."}'
        )
        raise LLMError(
            f"the LLM '{llm.model}' wrote no usable question for {len(chosen)} chunks ({why})"
        )
    return questions


def _plain(text: str) -> str:
    """A text compared word for word: case, blanks and end punctuation aside."""
    return " ".join(text.lower().split()).rstrip("?.!")
