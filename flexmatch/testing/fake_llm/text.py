"""Text as the fake server reads it: word tokens, the overlap and hashed-vector stand-ins
for relevance and embeddings, and the tagged blocks of FlexMatch's prompts."""

from __future__ import annotations

import hashlib
import math
import re

_TOKEN_RE = re.compile(r"[a-z0-9]+")
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "what",
        "which",
        "who",
        "will",
        "with",
        "does",
        "do",
        "how",
    ]
)


def tokens(text: str) -> list[str]:
    """Lowercase word tokens."""
    return _TOKEN_RE.findall(text.lower())


def content_tokens(text: str) -> set[str]:
    """Token set without stopwords (falls back to all tokens if only stopwords remain)."""
    toks = set(tokens(text))
    content = toks - _STOPWORDS
    return content or toks


def overlap_score(query: str, document: str) -> float:
    """Set-overlap similarity (Ochiai: |q&d| / sqrt(|q|*|d|)) of content tokens, in [0, 1]."""
    q = content_tokens(query)
    d = content_tokens(document)
    if not q or not d:
        return 0.0
    return len(q & d) / math.sqrt(len(q) * len(d))


def embed_text(text: str, dim: int = 64) -> list[float]:
    """Deterministic L2-normalised hashed bag of lowercase word tokens.

    Each token is hashed (blake2b) to a bucket and a sign. Texts sharing words get similar
    vectors. Empty text maps to the unit vector e0 so cosine similarity stays defined.
    """
    vec = [0.0] * dim
    for tok in tokens(text):
        digest = hashlib.blake2b(tok.encode("utf-8"), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dim
        sign = 1.0 if digest[4] & 1 else -1.0
        vec[bucket] += sign
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


def word_count(text: str) -> int:
    return len(text.split())


def message_text(message: dict) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return ""


def prompt_text(messages: list[dict]) -> str:
    return "\n".join(message_text(m) for m in messages)


def tag(prompt: str, name: str) -> str | None:
    """Content of the last ``<name>...</name>`` block that holds no nested opening tag."""
    pattern = re.compile(rf"<{name}>((?:(?!<{name}>).)*?)</{name}>", re.DOTALL | re.IGNORECASE)
    matches = pattern.findall(prompt)
    if not matches:
        return None
    return matches[-1].strip()


def split_sentences(text: str) -> list[str]:
    out = []
    for piece in _SENTENCE_SPLIT_RE.split(text):
        piece = piece.strip().lstrip("#*->").strip()
        if piece and tokens(piece):
            out.append(piece)
    return out
