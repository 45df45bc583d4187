"""What the query log says about the knowledge base: the questions it fails (``gaps``)
and the questions it is known to answer (``golden_items``).

A query is a gap when none of its results reached ``query_log.good_score``, or when
someone marked one of its results unhelpful. Gaps are grouped by meaning: the distinct
query texts are embedded with the knowledge base's own embedder, and, the most asked
first, each joins the first group whose first query is at least ``group_similarity``
(cosine) from it, else starts one; a greedy single pass, so the groups do not depend on
anything but the log, and a few hundred texts take one embedding batch.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable

import yaml

from flexmatch.engine.embedders import Embedder
from flexmatch.engine.query.log import QueryLog
from flexmatch.models.querylog import (
    FeedbackEvent,
    Gap,
    GoldenExpect,
    GoldenItem,
)


def gaps(
    log: QueryLog,
    tenant: str,
    readable: Callable[[str], bool] | None,
    embedder: Embedder,
) -> list[Gap]:
    """The groups of similar gap queries in ``tenant``'s log, over the documents
    ``readable`` allows, the most frequent first."""
    entries, feedback = log.entries(tenant, readable), log.feedback(tenant, readable)
    similarity = log.settings().group_similarity
    nothing_good = Counter(e.query for e in entries if not e.good)
    unhelpful = Counter(f.query for f in feedback if not f.helpful)
    counts = nothing_good + unhelpful
    if not counts:
        return []
    texts = sorted(counts, key=lambda text: (-counts[text], text))
    vectors = [_unit(v) for v in embedder.embed(texts)]
    leaders: list[int] = []
    members: dict[int, list[int]] = defaultdict(list)
    for index, vector in enumerate(vectors):
        home = next((lead for lead in leaders if _dot(vectors[lead], vector) >= similarity), None)
        if home is None:
            leaders.append(index)
            home = index
        members[home].append(index)
    found = [
        Gap(
            count=sum(counts[texts[i]] for i in members[lead]),
            example=texts[lead],
            queries=[texts[i] for i in members[lead]],
            nothing_good=sum(nothing_good[texts[i]] for i in members[lead]),
            unhelpful=sum(unhelpful[texts[i]] for i in members[lead]),
        )
        for lead in leaders
    ]
    return sorted(found, key=lambda gap: (-gap.count, gap.example))


def golden_items(feedback: list[FeedbackEvent]) -> list[GoldenItem]:
    """One golden question per query marked helpful: the document marked helpful most
    often (the latest on a tie) is expected first; documents only ever marked unhelpful
    for it must not come first. In the order the queries were first marked helpful."""
    helpful: dict[str, Counter[str]] = defaultdict(Counter)
    latest: dict[tuple[str, str], int] = {}
    unhelpful: dict[str, set[str]] = defaultdict(set)
    for position, event in enumerate(reversed(feedback)):  # oldest first
        if event.helpful:
            helpful[event.query][event.document_id] += 1
            latest[(event.query, event.document_id)] = position
        else:
            unhelpful[event.query].add(event.document_id)
    items = []
    for query, documents in helpful.items():
        expected = max(documents, key=lambda d: (documents[d], latest[(query, d)]))
        must_not = sorted(unhelpful[query] - set(documents))
        items.append(
            GoldenItem(question=query, expect=GoldenExpect(document=expected), must_not=must_not)
        )
    return items


def _unit(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5 or 1.0
    return [x / norm for x in vector]


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def golden_yaml(items: list[GoldenItem]) -> str:
    """The golden questions as the YAML file ``flexmatch eval --kb`` reads: a list of
    ``{question, expect: {document}, must_not}`` (``must_not`` only when there is one)."""
    return yaml.safe_dump(
        [item.as_yaml_data() for item in items], sort_keys=False, allow_unicode=True
    )
