"""Small text helpers shared by the chains: token estimates and sentence splitting.

Tokens are estimated as words and punctuation marks, which tracks word-piece counts
closely enough for chunk budgets without loading a tokenizer (or downloading one).
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9À-Ý])")


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``; line breaks also end a sentence (lists, tables, headings)."""
    sentences: list[str] = []
    for line in text.splitlines():
        line = " ".join(line.split())
        if line:
            sentences.extend(part.strip() for part in _SENTENCE_END.split(line) if part.strip())
    return sentences


def split_words(text: str, max_tokens: int, overlap_tokens: int) -> list[str]:
    """Overlapping windows of whole words, each at most ``max_tokens`` (estimated)."""
    words = text.split()
    if not words:
        return []
    costs = [max(1, count_tokens(word)) for word in words]
    windows: list[str] = []
    start = 0
    while start < len(words):
        end, used = start, 0
        while end < len(words) and (used + costs[end] <= max_tokens or end == start):
            used += costs[end]
            end += 1
        windows.append(" ".join(words[start:end]))
        if end >= len(words):
            break
        back, carried = end, 0
        while back > start + 1 and carried + costs[back - 1] <= overlap_tokens:
            back -= 1
            carried += costs[back]
        start = back
    return windows


def lead_sentence(text: str, max_chars: int = 300) -> str:
    """The first sentence of ``text`` that reads like prose, cut to ``max_chars``."""
    for sentence in split_sentences(text):
        if len(sentence.split()) >= 4:
            return sentence if len(sentence) <= max_chars else sentence[:max_chars] + "…"
    return ""
