"""Templates (prompts and record renderings): sandboxed Jinja, strict undefined variables.

Every piece of document-derived text in a prompt (title, headings, URL, metadata, chunk
text, and LLM output stored from documents) sits inside a data block whose tags carry a
*boundary*: ``<chunk-{{ boundary }}>`` … ``</chunk-{{ boundary }}>``. The boundary is a
hash of everything the template was given, so it is the same for the same input (the LLM
cache keeps working) and the data cannot contain it (it would have to contain a hash of
itself; the rare accident is detected and re-drawn). The ``fence`` filter also
neutralises anything inside data that looks like one of our tags, however it is spelled
(spaces, line breaks, zero-width or full-width characters), as a second guard.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.sandbox import SandboxedEnvironment

from flexmatch import resources
from flexmatch.errors import PromptError

TAG_NAMES = (
    "chunk",
    "document",
    "query",
    "candidates",
    "candidate",
    "instructions",
    "title",
    "section",
    "fact",
    "facts",
    "data",
    "system",
)
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]"
)
_TAG = re.compile(r"<\s*(/?)\s*(" + "|".join(TAG_NAMES) + r")(?=[\s>/-]|$)", re.I)


def fence(text: Any) -> str:
    """Data made safe to place between our tags: invisible characters dropped, full-width
    and other compatibility forms folded (NFKC), and every tag-like ``<name`` or
    ``</name`` of ours turned into ``‹name`` so the data cannot open or close a block."""
    value = unicodedata.normalize("NFKC", _INVISIBLE.sub("", str(text)))
    return _TAG.sub(lambda m: f"‹{m.group(1)}{m.group(2)}", value)


def boundary_for(context: dict[str, Any]) -> str:
    """A boundary for one rendering: a hash of its input that no string in it contains."""
    blob = json.dumps(context, sort_keys=True, default=str, ensure_ascii=False)
    for attempt in range(100):
        candidate = hashlib.sha256(f"{attempt}:{blob}".encode()).hexdigest()[:16]
        if candidate not in blob:
            return candidate
    raise PromptError("no boundary could be drawn for this input")  # pragma: no cover


def truncate_chars(text: Any, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters on a word boundary, marking the cut."""
    value = str(text)
    if len(value) <= limit:
        return value
    return value[:limit].rsplit(" ", 1)[0] + " […]"


class PromptTemplate:
    """A loaded template, with the variables it needs known up front."""

    def __init__(self, path: Path, source: str, env: SandboxedEnvironment) -> None:
        self.path = path
        self.source = source
        try:
            self.variables = meta.find_undeclared_variables(env.parse(source))
            self._template = env.from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise PromptError(f"{path}:{exc.lineno}: template syntax error: {exc.message}") from exc

    def check(self, provided: set[str]) -> None:
        """Fail at load time if the template uses a variable the chain never provides
        (``boundary`` is always provided)."""
        provided = provided | {"boundary"}
        unknown = self.variables - provided
        if unknown:
            raise PromptError(
                f"{self.path}: unknown template variable(s) {', '.join(sorted(unknown))}; "
                f"this chain provides: {', '.join(sorted(provided))}"
            )

    def render(self, **context: Any) -> str:
        """The rendered text; ``boundary`` is drawn from ``context`` for the data blocks."""
        try:
            return self._template.render(boundary=boundary_for(context), **context).strip()
        except jinja2.UndefinedError as exc:
            raise PromptError(f"{self.path}: {exc.message}") from exc
        except jinja2.TemplateError as exc:
            raise PromptError(f"{self.path}: could not render: {exc}") from exc


def make_environment() -> SandboxedEnvironment:
    env = SandboxedEnvironment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False
    )
    env.filters["fence"] = fence
    env.filters["truncate_chars"] = truncate_chars
    return env


def load_prompt(name: str, kb_dir: Path | None, provided: set[str]) -> PromptTemplate:
    """Find the prompt ``name`` (a user's ``prompts/`` first) and check its variables."""
    path = resources.find("prompts", name, kb_dir, suffixes=("", ".j2", ".jinja"))
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptError(f"{path}: cannot read prompt: {exc}") from exc
    template = PromptTemplate(path, source, make_environment())
    template.check(provided)
    return template
