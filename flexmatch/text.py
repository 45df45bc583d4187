"""Small text helpers shared by the chains: token estimates and sentence splitting.

Tokens are estimated as words and punctuation marks, which tracks word-piece counts
closely enough for chunk budgets without loading a tokenizer (or downloading one).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9À-Ý])")


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


# how far into a text ``lead_sentence`` looks: a lead is at the start, and a text with
# no prose (a minified script, a table) must not be read to its end to find that out
LEAD_SCAN_CHARS = 20_000


def iter_sentences(text: str) -> Iterator[str]:
    """Sentences of ``text`` one at a time (a reader that stops early pays for what it read);
    line breaks also end a sentence (lists, tables, headings)."""
    for line in text.splitlines():
        line = " ".join(line.split())
        if not line:
            continue
        start = 0
        for end in _SENTENCE_END.finditer(line):
            part = line[start : end.start()].strip()
            if part:
                yield part
            start = end.end()
        part = line[start:].strip()
        if part:
            yield part


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``; line breaks also end a sentence (lists, tables, headings)."""
    return list(iter_sentences(text))


def split_words(text: str, max_tokens: int, overlap_tokens: int) -> list[str]:
    """Overlapping windows of whole words, each at most ``max_tokens`` (estimated)."""
    words = text.split()
    return [" ".join(words[a:b]) for a, b in word_windows(words, max_tokens, overlap_tokens)]


def word_windows(words: list[str], max_tokens: int, overlap_tokens: int) -> list[tuple[int, int]]:
    """``split_words`` as (start, end) indexes into ``words`` (so a window knows where it is)."""
    if not words:
        return []
    costs = [max(1, count_tokens(word)) for word in words]
    windows: list[tuple[int, int]] = []
    start = 0
    while start < len(words):
        end, used = start, 0
        while end < len(words) and (used + costs[end] <= max_tokens or end == start):
            used += costs[end]
            end += 1
        windows.append((start, end))
        if end >= len(words):
            break
        back, carried = end, 0
        while back > start + 1 and carried + costs[back - 1] <= overlap_tokens:
            back -= 1
            carried += costs[back]
        start = back
    return windows


def lead_sentence(text: str, max_chars: int = 300) -> str:
    """The first sentence of ``text`` that reads like prose, cut to ``max_chars``; only the
    first ``LEAD_SCAN_CHARS`` are read, so its cost does not grow with the text."""
    for sentence in iter_sentences(text[:LEAD_SCAN_CHARS]):
        if len(sentence.split()) >= 4:
            return sentence if len(sentence) <= max_chars else sentence[:max_chars] + "…"
    return ""
