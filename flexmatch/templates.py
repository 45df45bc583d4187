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
import math
import re
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment, SecurityError

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


MAX_REPEAT = 1_000_000
"""The most characters (or items) a template may build by repetition (``'x' * n``), and
the largest number a call into Python (``'x'.center(n)``) may be given: a prompt is a
few thousand characters, and ``'x' * 300000000`` would take 300 MB at once."""
MAX_POWER_BITS = 100_000  # ``9 ** 99999999`` would hold a core for minutes


class BoundedSandbox(SandboxedEnvironment):
    """Jinja's sandbox, with repetition and powers capped: the sandbox stops a template
    reaching Python's internals, not one that asks for a huge string in a single step
    (which no time limit can interrupt: it happens inside one C call)."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for sequence, times in ((left, right), (right, left)):
                if (
                    isinstance(sequence, str | bytes | list | tuple)
                    and isinstance(times, int)
                    and len(sequence) * times > MAX_REPEAT
                ):
                    raise SecurityError(
                        f"repeating {len(sequence)} item(s) {times} times makes more than "
                        f"{MAX_REPEAT:,} (the most a template may build at once)"
                    )
        elif (
            operator == "**"
            and isinstance(left, int)
            and isinstance(right, int)
            and abs(left) > 1
            and right * math.log2(abs(left)) > MAX_POWER_BITS
        ):
            raise SecurityError(f"{left} ** {right} is too large for a template")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        """A text's own methods (``center``, ``ljust``, ``zfill``…) get no size over
        ``MAX_REPEAT``."""
        if isinstance(getattr(__obj, "__self__", None), str | bytes):
            for value in (*args, *kwargs.values()):
                if isinstance(value, int) and value > MAX_REPEAT:
                    raise SecurityError(
                        f"{value} is larger than a template may pass to a text's method "
                        f"({MAX_REPEAT:,})"
                    )
        return super().call(__context, __obj, *args, **kwargs)


# Set while a caller wants every rendering done elsewhere (the console's preview: in a
# worker process it can stop); the function takes the source, its path and the context.
Renderer = Callable[[str, str, dict[str, Any]], str]
_RENDER_ELSEWHERE: ContextVar[Renderer | None] = ContextVar("render_elsewhere", default=None)


@contextmanager
def rendered_by(renderer: Renderer) -> Iterator[None]:
    """Within the block (in this thread or task), templates render through ``renderer``."""
    token = _RENDER_ELSEWHERE.set(renderer)
    try:
        yield
    finally:
        _RENDER_ELSEWHERE.reset(token)


def render_bounded(source: str, path: str, context: dict[str, Any], max_chars: int) -> str:
    """``source`` rendered on ``context`` in this process, refused once its output passes
    ``max_chars``: what a worker process runs for ``rendered_by``."""
    template = PromptTemplate(Path(path), source, make_environment())
    return template.render_here(context, max_chars)


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
        elsewhere = _RENDER_ELSEWHERE.get()
        if elsewhere is not None:
            return elsewhere(self.source, str(self.path), context)
        return self.render_here(context)

    def render_here(self, context: dict[str, Any], max_chars: int | None = None) -> str:
        """Render in this process; with ``max_chars``, stop as soon as the output is longer."""
        try:
            variables = {"boundary": boundary_for(context), **context}
            if max_chars is None:
                return self._template.render(variables).strip()
            pieces: list[str] = []
            size = 0
            for piece in self._template.generate(variables):
                size += len(piece)
                if size > max_chars:
                    raise PromptError(
                        f"{self.path}: the rendered prompt is longer than {max_chars:,} characters"
                    )
                pieces.append(piece)
            return "".join(pieces).strip()
        except jinja2.UndefinedError as exc:
            raise PromptError(f"{self.path}: {exc.message}") from exc
        except jinja2.TemplateError as exc:
            raise PromptError(f"{self.path}: could not render: {exc}") from exc
        except PromptError:
            raise
        except Exception as exc:  # the template's own code failed: a range too big, an
            # include with no loader, a division by zero... the author's error, named
            kind = type(exc).__name__
            raise PromptError(f"{self.path}: could not render: {kind}: {exc}") from exc


def make_environment() -> SandboxedEnvironment:
    env = BoundedSandbox(
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
