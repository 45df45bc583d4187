"""Key phrases of a text without a model or network (YAKE): the keywords chains' offline
form, used the same way on chunks (what to index) and on queries (what to search with),
so both sides of a keywords source speak the same form."""

from __future__ import annotations

import functools
from typing import Any

from flexmatch.extras import require


@functools.lru_cache(maxsize=8)
def _extractor(count: int, max_words: int) -> Any:
    yake = require("yake", "keywords", "the offline keywords chains")
    return yake.KeywordExtractor(lan="en", n=max_words, top=count, dedup_lim=0.8)


def keyphrases(text: str, count: int, max_words: int = 3) -> list[str]:
    """The ``count`` most characteristic phrases of ``text`` (at most ``max_words`` words
    each), best first; none for a text with no content words."""
    if not text.strip():
        return []
    found = _extractor(count, max_words).extract_keywords(text)
    # YAKE: lower is better; it already returns them best first
    return list(dict.fromkeys(phrase.strip() for phrase, _score in found if phrase.strip()))
