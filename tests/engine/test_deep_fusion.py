"""Deep search's parts on their own: the fusion of the hops' results, and the offline
follow-ups' names."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from flexmatch.engine.chains.query_transform.follow_ups import names_in
from flexmatch.engine.query.deep import fuse
from flexmatch.models import SearchResult
from flexmatch.results import Answer


def result(chunk_id: str, title: str = "", content: str = "") -> SearchResult:
    return SearchResult(
        chunk_id=chunk_id,
        document_id=chunk_id,
        uri="",
        source="default",
        title=title,
        heading_path=[],
        content=content,
        qualifying_text="",
        matched_text="",
        score=1.0,
    )


def answer(*chunk_ids: str) -> Answer:
    return Answer(query="q", results=[result(c) for c in chunk_ids])


def test_a_follow_ups_first_result_lands_below_the_first_results() -> None:
    first = ("q", answer("a", "b", "c", "d", "e", "f"))
    follow = ("Blue Note", answer("bridge", "a", "b"))  # its name's passage first
    fused = fuse([[first], [follow]], discount=0.9)
    order = [r.chunk_id for r in fused]
    assert order[:4] == ["a", "b", "bridge", "c"]
    bridge = fused[2]
    assert bridge.signals.hop == 2 and bridge.signals.found_by == "Blue Note"
    assert fused[0].signals.hop == 1 and fused[0].signals.found_by is None
    scores = [r.score for r in fused]
    assert scores == sorted(scores, reverse=True)


def test_a_follow_up_that_finds_the_questions_passages_first_leads_nowhere() -> None:
    # its first new result keeps its own place (third), below the question's first five
    first = ("q", answer("a", "b", "c", "d", "e", "f"))
    follow = ("Sun Records", answer("a", "b", "generic"))
    order = [r.chunk_id for r in fuse([[first], [follow]], discount=0.9)]
    assert order.index("generic") == 4 and order[:4] == ["a", "b", "c", "d"]
    # two follow-ups that find the same passage first: it takes one place, not two
    other = ("Blue Note Records", answer("bridge"))
    again = ("Blue Note label", answer("bridge", "x"))
    order = [r.chunk_id for r in fuse([[first], [other, again]], discount=0.9)]
    assert order[:4] == ["a", "b", "bridge", "c"] and order.count("bridge") == 1


def test_one_hop_fuses_to_its_own_order() -> None:
    only = ("q", answer("a", "b", "c"))
    assert [r.chunk_id for r in fuse([[only]], discount=0.9)] == ["a", "b", "c"]


def test_names_are_capitalised_runs_and_quoted_titles() -> None:
    text = (
        'The film stars Audrey Hepburn as Eliza Doolittle. It won "Best Picture" in 1965; '
        "the Duke of York attended."
    )
    names = names_in(text)
    assert "Audrey Hepburn" in names and "Eliza Doolittle" in names
    assert "Best Picture" in names and "Duke of York" in names
    assert "The" not in names and "It" not in names


def test_seeds_leave_out_what_the_question_names_and_found_titles() -> None:
    from pathlib import Path

    from flexmatch.config import ChainRef
    from flexmatch.engine.chains.base import ChainContext
    from flexmatch.engine.chains.query_transform.follow_ups import Seeds
    from flexmatch.engine.chains.registry import build_chain

    seeds = build_chain(ChainRef(chain="seeds"), Seeds, ChainContext(kb_dir=Path(".")))
    found = [
        result("1", "My Fair Lady", "My Fair Lady stars Audrey Hepburn and Rex Harrison."),
        result("2", "Rex Harrison", "Rex Harrison was an English actor."),
    ]
    asked = "What did the actress in My Fair Lady win a Tony for?"
    written = asyncio.run(seeds.follow_ups(asked, found))
    assert written[0] == "Audrey Hepburn actress win Tony"  # the name, and what is left
    assert not any("Rex Harrison" in q for q in written)
    assert not any("Fair Lady" in q for q in written)


class _WrittenFollowUps:
    """Follow-ups written as given (the chain's interface, without a model)."""

    uses_llm = False
    context = None

    def __init__(self, *queries: str) -> None:
        self.queries = list(queries)

    async def follow_ups(self, text: str, seeds: list[SearchResult]) -> list[str]:
        return self.queries


def test_a_follow_up_the_engine_refuses_is_dropped_with_a_warning_the_others_stand() -> None:
    from flexmatch.config import DeepConfig
    from flexmatch.engine.query.deep import deep_search
    from flexmatch.errors import QueryError

    async def search(text: str, top_n: int, top_k: int | None) -> Answer:
        if text == "refused":
            raise QueryError("query_too_long", "too long")
        return answer("a", "b") if text == "q" else answer("bridge")

    found = asyncio.run(
        deep_search(
            "q",
            search=search,
            follow_ups=_WrittenFollowUps("refused", "Blue Note"),  # type: ignore[arg-type]
            settings=DeepConfig(),
            top_n=5,
        )
    )
    assert [r.chunk_id for r in found.results] == ["a", "b", "bridge"]
    assert any("'refused' failed" in w for w in found.warnings)
    assert found.cost is not None and found.cost.stopped is None

    async def broken(text: str, top_n: int, top_k: int | None) -> Answer:
        if text != "q":
            raise RuntimeError("a bug")
        return answer("a")

    try:
        asyncio.run(
            deep_search(
                "q",
                search=broken,
                follow_ups=_WrittenFollowUps("x"),  # type: ignore[arg-type]
                settings=DeepConfig(),
                top_n=5,
            )
        )
    except RuntimeError:
        pass  # a bug is not hidden as a warning
    else:
        raise AssertionError("a bug in a follow-up search was swallowed")


def _seeds(**params: object) -> object:
    from pathlib import Path

    from flexmatch.config import ChainRef
    from flexmatch.engine.chains.base import ChainContext
    from flexmatch.engine.chains.query_transform.follow_ups import Seeds
    from flexmatch.engine.chains.registry import build_chain

    ref = ChainRef(chain="seeds", params=params)
    return build_chain(ref, Seeds, ChainContext(kb_dir=Path(".")))


BLUE_TRAIN = result(
    "1",
    "Blue Train",
    "Blue Train was released in the United States by a saxophonist on Blue Note Records.",
)


async def _rarity(words: list[str]) -> dict[str, float]:
    """As the knowledge base would say: "united" and "states" are everywhere."""
    common = {"united": 0.05, "states": 0.05, "blue": 0.5, "records": 0.2, "released": 0.1}
    return {w: common.get(w, 1.0) for w in words}


def test_seeds_lead_with_the_rarer_name() -> None:
    asked = "Who founded the label that released Blue Train?"
    plain = asyncio.run(_seeds(rarity=0, rare_terms=0).follow_ups(asked, [BLUE_TRAIN]))  # type: ignore[attr-defined]
    assert plain[0].startswith("United States")  # named first in its passage
    rare = asyncio.run(_seeds().follow_ups(asked, [BLUE_TRAIN], _rarity))  # type: ignore[attr-defined]
    assert rare[0] == "Blue Note Records founded label"
    assert rare.index("Blue Note Records founded label") < next(
        i for i, q in enumerate(rare) if q.startswith("United States")
    )


def test_seeds_take_a_rare_lower_case_word_as_a_lead() -> None:
    asked = "Who founded the label that released Blue Train?"
    found = [BLUE_TRAIN]
    written = asyncio.run(_seeds(rare_terms=1).follow_ups(asked, found, _rarity))  # type: ignore[attr-defined]
    assert "saxophonist founded label" in written
    none = asyncio.run(_seeds(rare_terms=0).follow_ups(asked, found, _rarity))  # type: ignore[attr-defined]
    assert not any(q.startswith("saxophonist") for q in none)


def test_without_a_knowledge_base_rarity_is_counted_among_the_results() -> None:
    asked = "Who founded the label that released Blue Train?"
    found = [
        BLUE_TRAIN,
        result("2", "Sun Records", "Sun Records of the United States was founded by Sam Phillips."),
        result("3", "Stax", "Stax is a label of the United States, founded by Jim Stewart."),
    ]
    written = asyncio.run(_seeds().follow_ups(asked, found))  # type: ignore[attr-defined]
    # "United States" is in every result: the album's label leads
    assert written[0] == "Blue Note Records founded label"


@settings(max_examples=200, deadline=None)
@given(
    hops=st.lists(
        st.lists(
            st.lists(st.sampled_from("abcdefghijklmnop"), unique=True, max_size=12),
            min_size=1,
            max_size=4,
        ),
        min_size=1,
        max_size=3,
    ),
    top_n=st.integers(1, 8),
    discount=st.floats(0.1, 1.0),
)
def test_the_first_top_n_of_each_search_decide_the_fused_top_n(
    hops: list[list[list[str]]], top_n: int, discount: float
) -> None:
    """Why a deep search reads only each search's first ``top_n`` results: the fused
    top ``top_n`` is the same as from the searches' whole lists."""

    def searches(cut: int | None) -> list[list[tuple[str, Answer]]]:
        return [[(f"s{i}", answer(*ids[:cut])) for i, ids in enumerate(hop)] for hop in hops]

    whole = [r.chunk_id for r in fuse(searches(None), discount)][:top_n]
    read = [r.chunk_id for r in fuse(searches(top_n), discount)][:top_n]
    assert read == whole
