"""What the fake model answers a chat request with: content derived from the prompt, so
every FlexMatch chain (questions, context, keywords, query rewrites, LLM reranking) and
``flexmatch eval --generate``'s held-out question get
a well-formed, deterministic answer that reflects its input."""

from __future__ import annotations

import json
import re

from flexmatch.testing.fake_llm.text import (
    content_tokens,
    overlap_score,
    prompt_text,
    split_sentences,
    tag,
)

MALFORMED_CONTENT = (
    'Sure! here are some questions: 1. What is it? 2. Why? ... {"questions": ["broken'
)
"""What a ``malformed`` server answers: off-task words with broken JSON."""

_COUNT_RE = re.compile(r"(\d+)\s+questions", re.IGNORECASE)
_CANDIDATE_RE = re.compile(r"^\s*\[(\d+)\]\s*(.*)$")
_CANDIDATE_TAG_RE = re.compile(r'<candidate index="(\d+)">(.*?)</candidate>', re.DOTALL)


def _rerank_answer(prompt: str) -> str:
    query = tag(prompt, "query") or ""
    block = tag(prompt, "candidates")
    if block is not None:  # "[i] text" lines inside <candidates>
        found = [m.groups() for m in map(_CANDIDATE_RE.match, block.splitlines()) if m]
    else:  # <candidate index="i">text</candidate>
        found = _CANDIDATE_TAG_RE.findall(prompt)
    scores = [
        {"index": int(index), "score": round(10.0 * overlap_score(query, text), 2)}
        for index, text in found
    ]
    return json.dumps({"scores": scores})


def _context_answer(prompt: str) -> str:
    document = tag(prompt, "document") or ""
    first_line = next((ln.strip() for ln in document.splitlines() if ln.strip()), "")
    title = (tag(prompt, "title") or first_line)[:80]
    sentences = split_sentences(tag(prompt, "chunk") or "")
    first = sentences[0] if sentences else ""
    return f'This section of "{title}" covers: {first}'


def _questions_answer(prompt: str) -> str:
    m = _COUNT_RE.search(prompt)
    count = int(m.group(1)) if m else 3
    questions = []
    for sentence in split_sentences(tag(prompt, "chunk") or "")[:count]:
        words = " ".join(sentence.split()[:8]).lower().rstrip(".,;:!?-\"')( ")
        questions.append(f"What does the text say about {words}?")
    return json.dumps({"questions": questions})


def _golden_answer(prompt: str) -> str:
    """One held-out question about the ``<passage>`` (``flexmatch eval --generate``)."""
    sentences = split_sentences(tag(prompt, "passage") or "")
    words = " ".join(sentences[0].split()[:8]).lower().rstrip(".,;:!?-\"')( ") if sentences else ""
    return json.dumps({"question": f"What is said about {words}?"})


def _rewrite_answer(prompt: str) -> str:
    query = (tag(prompt, "query") or "").strip().rstrip(".?!,;: ").strip()
    if query:
        query = query[0].upper() + query[1:]
    return json.dumps({"questions": [f"{query}?"]})


_CHUNK_BLOCK_RE = re.compile(r'<chunk id="(\d+)">(.*?)</chunk>', re.DOTALL)
_DOCUMENT_BLOCK_RE = re.compile(r"<document>(.*?)</document>", re.DOTALL)
_INNER_TAG_RE = re.compile(r"<(title|section)>.*?</\1>", re.DOTALL)


def _chunk_blocks(prompt: str) -> list[tuple[int, int, str]]:
    """(position, id, text) of each ``<chunk id="n">`` block, its title/section removed."""
    return [
        (m.start(), int(m.group(1)), _INNER_TAG_RE.sub("", m.group(2)).strip())
        for m in _CHUNK_BLOCK_RE.finditer(prompt)
    ]


def _grouped_questions_answer(prompt: str) -> str:
    m = _COUNT_RE.search(prompt)
    count = int(m.group(1)) if m else 3
    entries = []
    for _, number, text in _chunk_blocks(prompt):
        questions = []
        for sentence in split_sentences(text)[:count]:
            words = " ".join(sentence.split()[:8]).lower().rstrip(".,;:!?-\"')( ")
            questions.append(f"What does the text say about {words}?")
        entries.append({"chunk": number, "questions": questions})
    return json.dumps({"chunks": entries})


def _key_terms(text: str, count: int) -> list[str]:
    """The first ``count`` distinct content words: a deterministic stand-in for key phrases."""
    return list(dict.fromkeys(sorted(content_tokens(text), key=text.lower().find)))[:count]


def _keywords_answer(prompt: str) -> str:
    """Key phrases of a query (``<query>``) or of each chunk of a group."""
    if '<chunk id="' not in prompt:
        return json.dumps({"keywords": _key_terms(tag(prompt, "query") or "", 5)})
    entries = [
        {"chunk": number, "keywords": _key_terms(text, 8)}
        for _, number, text in _chunk_blocks(prompt)
    ]
    return json.dumps({"chunks": entries})


def _grouped_context_answer(prompt: str) -> str:
    documents = [
        (m.end(), (tag(m.group(0), "title") or "")[:80])
        for m in _DOCUMENT_BLOCK_RE.finditer(prompt)
    ]
    entries = []
    for position, number, text in _chunk_blocks(prompt):
        title = next((t for end, t in reversed(documents) if end <= position), "")
        sentences = split_sentences(text)
        first = sentences[0] if sentences else ""
        entries.append({"chunk": number, "context": f'This section of "{title}" covers: {first}'})
    return json.dumps({"chunks": entries})


_RESULT_RE = re.compile(r'<result index="\d+">(.*?)</result>', re.DOTALL)
_NAME_RE = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+")


def _follow_ups_answer(prompt: str) -> str:
    """A deep search's follow-up queries: the multi-word names of the ``<results>``
    that the ``<question>`` does not hold (a deterministic stand-in for decomposition)."""
    asked = content_tokens(tag(prompt, "question") or "")
    names: list[str] = []
    for result in _RESULT_RE.findall(prompt):
        for name in _NAME_RE.findall(result):
            if not content_tokens(name) <= asked and name not in names:
                names.append(name)
    return json.dumps({"queries": names[:3]})


def default_responder(messages: list[dict]) -> str:
    """Deterministic assistant content derived from the prompt (see the package docstring)."""
    prompt = prompt_text(messages)
    if "<results>" in prompt and "<question>" in prompt:  # a deep search's follow-ups
        return _follow_ups_answer(prompt)
    if "<candidates>" in prompt or "<candidate index=" in prompt:
        return _rerank_answer(prompt)
    if "<passage>" in prompt:  # a held-out question for a golden set
        return _golden_answer(prompt)
    if '"keywords": [' in prompt:  # the keywords chains' answer form
        return _keywords_answer(prompt)
    if '<chunk id="' in prompt:  # chunks asked about in groups
        if "<document>" in prompt:
            return _grouped_context_answer(prompt)
        return _grouped_questions_answer(prompt)
    if "<document>" in prompt:
        return _context_answer(prompt)
    if "<chunk>" in prompt:
        return _questions_answer(prompt)
    if "<query>" in prompt:
        return _rewrite_answer(prompt)
    return "OK"
