"""``decompose`` and ``seeds``: the follow-up queries of a deep search, written from the
question and the first results it found (``engine.query.deep``).

A question that needs two passages often names only the first: "Who founded the label
that released Blue Train?" finds the album's passage, which names the label, whose own
passage the question never names. The follow-ups name it. ``decompose`` has an LLM
break the question into the searches still needed; ``seeds``, its fallback with no LLM,
takes the names, titles and rare terms of the first results that the question lacks.
"""

from __future__ import annotations

import math
import re
from abc import abstractmethod
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from flexmatch.engine.chains.kinds import QueryTransform
from flexmatch.engine.chains.output import parse_json, parse_list
from flexmatch.models import SearchResult

PASSAGE_CHARS = 1_200  # of each result, in a prompt

Rarity = Callable[[list[str]], Awaitable[dict[str, float]]]
"""words → how rare each is among the passages the caller may search: 1 in none or one
of them, towards 0 in most (``engine.query.deep.store_rarity``); a word left out
counts as common."""


class FollowUps(QueryTransform):
    """question + its first results → the follow-up queries (without the question).
    A chain that weighs words by their rarity says so (``reads_rarity``): deep search
    then hands it a ``rarity``."""

    reads_rarity: ClassVar[bool] = False

    async def run(self, query: str) -> list[str]:
        """As a plain query transform: the question and its follow-ups from no results."""
        return [query, *await self.follow_ups(query, [])]

    @abstractmethod
    async def follow_ups(self, question: str, found: list[SearchResult]) -> list[str]: ...


class DecomposeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int = Field(3, ge=1, le=10)  # follow-up queries at most


class Decompose(FollowUps):
    """An LLM reads the question and the first results and writes the searches still
    needed to answer it (the results are data in the prompt, never instructions)."""

    Params = DecomposeParams
    uses_llm = True
    prompt_variables = frozenset({"question", "results", "params"})

    async def follow_ups(self, question: str, found: list[SearchResult]) -> list[str]:
        results = [
            {"title": r.title, "text": r.content[:PASSAGE_CHARS]} for r in found if r.content
        ]
        raw = await self.complete(self.render(question=question, results=results))
        structured = self.spec.output.format != "json" or parse_json(raw) is not None
        queries = parse_list(raw, self.spec.output) if structured else []
        if not queries:
            self.warn("the LLM's follow-up queries could not be parsed; none were searched")
        asked = question.strip().lower()
        unique = dict.fromkeys(q for q in queries if q.strip() and q.strip().lower() != asked)
        return list(unique)[: self.params.count]


class SeedsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int = Field(4, ge=1, le=20)  # follow-up queries at most
    with_question: bool = True  # each follow-up "<question> <name>", else the name alone
    rarity: float = Field(1.0, ge=0, le=4)  # how much a lead's weight follows its rarity
    rare_terms: int = Field(0, ge=0, le=10)  # lone rare words of the results, as leads


# a name: capitalised words, joined by a few lower-case particles ("Duke of York")
_NAME = re.compile(
    r"\b[A-Z][\w'’\-.]*[\w](?:\s+(?:(?:of|the|de|da|von|van|der|la|le|du|del)\s+)*"
    r"[A-Z0-9][\w'’\-.]*[\w])*"
)
_WORD = re.compile(r"[A-Za-z0-9][\w'’\-]*")
_QUOTED = re.compile(r"[\"“]([^\"”]{3,80})[\"”]")
# capitalised words that name nothing (a sentence's first word, pronouns, months)
_PLAIN = frozenset(
    [
        "a",
        "an",
        "and",
        "as",
        "at",
        "after",
        "before",
        "but",
        "by",
        "during",
        "for",
        "from",
        "he",
        "her",
        "his",
        "in",
        "it",
        "its",
        "of",
        "on",
        "one",
        "or",
        "she",
        "since",
        "that",
        "the",
        "their",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "two",
        "was",
        "we",
        "when",
        "where",
        "which",
        "while",
        "who",
        "with",
        "however",
        "although",
        "also",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ]
)


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def names_in(text: str) -> list[str]:
    """The names ``text`` holds, in order: runs of capitalised words (a leading plain word
    dropped: "The Beatles" keeps "Beatles" only when "The" opens a sentence) and quoted
    titles."""
    found: list[str] = [m.group(1).strip() for m in _QUOTED.finditer(text)]
    for match in _NAME.finditer(text):
        words = match.group(0).split()
        while words and words[0].lower() in _PLAIN:
            words = words[1:]
        while words and words[-1].lower() in _PLAIN:
            words = words[:-1]
        if words:
            found.append(" ".join(words).strip(".-"))
    return [name for name in found if len(name) > 1]


_ASKING = frozenset(
    [
        "what",
        "did",
        "does",
        "do",
        "is",
        "are",
        "how",
        "why",
        "whose",
        "whom",
        "name",
        "be",
        "been",
        "has",
        "have",
        "had",
        "s",
    ]
)
_DEMONYM = re.compile(r"(?:an|ian|ish|ese|ic|i)$")


def _lead_like(name: str) -> bool:
    """Whether a name can lead somewhere: not a number, not a lone nationality or
    language ("American", "Norwegian"), not a sentence's opening word ("According")."""
    words = name.split()
    if all(w.strip(".,'’").isdigit() for w in words):
        return False
    return len(words) > 1 or not _DEMONYM.search(name.lower()) or name.isupper()


class Seeds(FollowUps):
    """No LLM: the names and titles the first results hold that the question does not,
    and their rare words. A name counts more the higher the result it is in and the
    earlier in it (a passage names its subject's closest ties first), a name of several
    words more than one word, more again for each result it is in, and more the rarer
    its rarest word in the knowledge base (``rarity``: "Blue Note Records" leads
    somewhere, "United States" is in every other passage); the results' own titles are
    left out (those passages are found already). The ``rare_terms`` rarest lower-case
    words of the results (in no other passage, say "saxophonist") are leads too, weighed
    like a one-word name. Each follow-up is the lead with what the question asks that
    its result does not say ("Who is the spouse of the director of Jump for Glory?", a
    result naming Raoul Walsh: "Raoul Walsh spouse"), else the lead alone."""

    Params = SeedsParams
    reads_rarity = True

    async def follow_ups(
        self, question: str, found: list[SearchResult], rarity: Rarity | None = None
    ) -> list[str]:
        asked = _words(question)
        titles = {r.title.lower() for r in found if r.title}
        weight: dict[str, float] = {}
        shown: dict[str, str] = {}
        source: dict[str, SearchResult] = {}
        terms: dict[str, int] = {}  # a lone lower-case word → the rank of its result
        for rank, result in enumerate(found):
            named: set[str] = set()
            for at, name in enumerate(dict.fromkeys(names_in(result.content))):
                key = name.lower()
                named |= _words(name)
                if key in titles or key in _PLAIN or _words(name) <= asked:
                    continue  # found already, or named by the question: no new lead
                if not _lead_like(name):
                    continue
                size = 1.0 if len(name.split()) > 1 else ONE_WORD
                weight[key] = weight.get(key, 0.0) + size / ((1 + rank) * (1 + 0.25 * at))
                shown.setdefault(key, name)
                source.setdefault(key, result)
            if self.params.rare_terms:
                for term in dict.fromkeys(_TERM.findall(result.content)):
                    if term not in asked and term not in named and term not in _COMMON:
                        terms.setdefault(term, rank)
                        source.setdefault(term, result)
        if self.params.rarity or self.params.rare_terms:
            # the words of the likeliest leads, at most ``LOOKED_UP`` (one batched look-up)
            looked_up: dict[str, None] = {}
            for key in sorted(weight, key=lambda key: -weight[key]):
                looked_up |= dict.fromkeys(sorted(_words(key) - _COMMON))
            lone = sorted(terms, key=lambda t: (terms[t], t))[:LOOKED_UP]
            words = sorted(set(list(looked_up)[:LOOKED_UP]) | set(lone))
            rare = await (rarity or _rarity_among(found))(words)
            for key in weight:  # a floor: a name of common words keeps its order among them
                weight[key] *= max(_rarest(key, rare), RARITY_FLOOR) ** self.params.rarity
            lone = sorted(terms, key=lambda t: (-rare.get(t, 0.0), terms[t]))
            for term in lone[: self.params.rare_terms]:
                if term not in weight:  # already weighed as a one-word name
                    weight[term] = ONE_WORD * rare.get(term, 0.0) / (1 + terms[term])
                    shown[term] = term
        chosen = sorted(weight, key=lambda key: -weight[key])[: self.params.count]
        if not self.params.with_question:
            return [shown[key] for key in chosen]
        return [_with_question(shown[key], question, source[key]) for key in chosen]


ONE_WORD = 0.6  # a one-word lead's weight against a name of several words
LOOKED_UP = 64  # words whose rarity one hop looks up, at most (of names, of lone words)
RARITY_FLOOR = 0.05  # of a name whose every word is common
_TERM = re.compile(r"(?<![\w'’\-])[a-z][a-z'’\-]{4,}[a-z]\b")  # a lower-case word, 6+ letters
_COMMON = _PLAIN | _ASKING


def _rarest(name: str, rare: dict[str, float]) -> float:
    """A name's rarity: its rarest word's (a name is as telling as that word)."""
    return max((rare.get(w, 0.0) for w in _words(name) - _COMMON), default=0.0)


def _rarity_among(found: list[SearchResult]) -> Rarity:
    """With no knowledge base to ask: a word's rarity among the results themselves."""
    df = Counter(w for r in found for w in _words(f"{r.title} {r.content}"))
    top = math.log(len(found) + 1)

    async def rarity(words: list[str]) -> dict[str, float]:
        return {w: math.log((len(found) + 1) / max(df[w], 1)) / top for w in words}

    return rarity


def _with_question(name: str, question: str, result: SearchResult) -> str:
    """``name`` and the words of the question its result does not hold (what is still
    to find), in the question's order."""
    said = _words(f"{result.title} {result.content}") | _PLAIN | _ASKING
    rest = [w for w in _WORD.findall(question) if w.lower() not in said]
    return " ".join([name, *dict.fromkeys(rest)])
