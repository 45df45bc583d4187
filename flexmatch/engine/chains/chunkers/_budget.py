"""Packing text into chunks within a token budget, with overlap (shared by the chunkers)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from flexmatch.text import count_tokens, split_sentences, split_words


class BudgetParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(400, ge=20, le=8000)
    overlap_tokens: int = Field(50, ge=0)

    @model_validator(mode="after")
    def _overlap_below_budget(self) -> BudgetParams:
        if self.overlap_tokens >= self.max_tokens:
            raise ValueError("overlap_tokens must be smaller than max_tokens")
        return self


def pack(pieces: list[str], max_tokens: int, overlap_tokens: int) -> list[str]:
    """Pack text pieces into chunks within the budget, repeating a tail as overlap.

    A piece over budget is split into sentences (and an overlong sentence into word
    windows); sentences of one piece stay on one line, pieces are separated by a blank line.
    """
    units: list[tuple[str, bool]] = []  # (text, starts a new paragraph)
    for piece in pieces:
        if count_tokens(piece) <= max_tokens:
            units.append((piece, True))
            continue
        first = True
        for sentence in split_sentences(piece):
            parts = (
                [sentence]
                if count_tokens(sentence) <= max_tokens
                else split_words(sentence, max_tokens, overlap_tokens)
            )
            for part in parts:
                units.append((part, first))
                first = False
    chunks: list[str] = []
    current = ""
    used = 0
    for text, new_paragraph in units:
        cost = count_tokens(text)
        if current and used + cost > max_tokens:
            chunks.append(current)
            current = _overlap_tail(current, overlap_tokens)
            used = count_tokens(current)
            if used + cost > max_tokens:
                current, used = "", 0
            new_paragraph = False
        separator = "\n\n" if new_paragraph else " "
        current = f"{current}{separator}{text}" if current else text
        used += cost
    if current:
        chunks.append(current)
    return chunks


def _overlap_tail(text: str, overlap_tokens: int) -> str:
    """The last whole sentences of ``text`` that fit in ``overlap_tokens``."""
    if overlap_tokens <= 0:
        return ""
    tail: list[str] = []
    used = 0
    for sentence in reversed(split_sentences(text)):
        cost = count_tokens(sentence)
        if used + cost > overlap_tokens:
            break
        tail.insert(0, sentence)
        used += cost
    return " ".join(tail)
