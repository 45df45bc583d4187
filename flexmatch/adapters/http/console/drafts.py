"""The chains as the prompt editor sees them, previews of an edited prompt, and saving it.

The facade has no call yet for "the chains a source is configured with, before the
no-LLM fallback", "this prompt rendered on that chunk" or "reload the chains after a
prompt file changed", so this module builds them from public pieces, in one place:

- a *draft* is a throw-away ``KnowledgeBase`` over a temporary copy of the knowledge
  base's ``chains/`` and ``prompts/`` folders (with the prompt being edited written in),
  the same config, and the same embedder; it never opens the store. When no LLM is
  configured it gets a placeholder model name, so its LLM chains do not fall back and
  their prompts can be rendered (nothing is ever sent to that name);
- a preview is what the draft's chain itself would send for the chosen chunk
  (``planned_calls``, the ingest's own grouping), or its own ``render``/``run``;
- after a save, ``KnowledgeBase.reload_chains`` drops the open knowledge base's built
  chains so the next ingest and re-index load the new prompt.

Errors of a draft name its files by their server paths (the temporary folder, the
knowledge base's, the built-ins'); ``client_message`` cuts each path to its last two
parts (``prompts/rewrite.j2``) before a tenant admin is shown it.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from flexmatch import (
    QUERY_SIDE,
    SOURCE_SIDE,
    ChainError,
    ChunkView,
    ConfigError,
    Document,
    DocumentDetail,
    Element,
    KnowledgeBase,
    Section,
    ToolResult,
    source_chain_refs,
)
from flexmatch.service import bounded_previews, run_sync

PLACEHOLDER_MODEL = "console-preview/no-llm"  # never called: previews only render
DRAFT_PREFIX = "flexmatch-console-"
# an absolute path (a '/' after a space, quote or bracket, never after a word, ':' or '/'
# as in a URL or a relative path): its leading folders, then its last two parts
_PART = r"[^\s/'\"(),;:]+"
_SERVER_PATH = re.compile(rf"(?<![\w:/.~-])/(?:{_PART}/)*?((?:{_PART}/)?{_PART})(?=$|[\s'\"(),;:])")
_DRAFT_FOLDER = re.compile(rf"(?<![\w:/.~-])/(?:{_PART}/)*{re.escape(DRAFT_PREFIX)}{_PART}/?")
KINDS = SOURCE_SIDE + QUERY_SIDE  # the six, in pipeline order
CHUNK_PROMPTS = ("matching_text", "qualifying_text")  # previewed on a chosen chunk
QUERY_PROMPTS = ("query_transform", "formatter")  # previewed on a sample query
KIND_LABELS = {
    "chunker": "chunker",
    "matching_text": "matching text",
    "qualifying_text": "qualifying text",
    "query_transform": "query transform",
    "reranker": "reranker",
    "formatter": "formatter",
}


@dataclass
class ChainView:
    """One of the six chains of a source: as it runs now, and as configured (the same,
    unless it needs an LLM and none is configured: then it runs its fallback)."""

    kind: str
    configured: str  # the chain the config names
    resolved: str  # the chain that runs
    type: str
    file: str
    yaml: str  # of the chain that runs
    configured_file: str
    configured_yaml: str
    prompt_name: str | None  # the configured chain's prompt, when the editor can save it
    prompt_file: str | None
    prompt_text: str | None
    prompt_local: bool  # the knowledge base's own prompts/ file (not the built-in)

    @property
    def label(self) -> str:
        return KIND_LABELS[self.kind]

    @property
    def falls_back(self) -> bool:
        return self.configured != self.resolved


@contextmanager
def draft(
    kb: KnowledgeBase, prompt: tuple[str, str] | None = None, *, llm: bool = False
) -> Iterator[KnowledgeBase]:
    """A throw-away knowledge base with ``kb``'s chains and prompts and, if given, the
    prompt ``(name, text)`` replaced; ``llm`` keeps the configured model (to call it)."""
    with tempfile.TemporaryDirectory(prefix=DRAFT_PREFIX) as folder:
        root = Path(folder)
        for sub in ("chains", "prompts"):
            own = kb.path / sub
            if own.is_dir():
                shutil.copytree(own, root / sub, symlinks=False)
            else:
                (root / sub).mkdir()
        if prompt is not None:
            name, text = prompt
            target = root / "prompts" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        models = kb.config.models
        if not llm:  # render only: a placeholder keeps the LLM chains from falling back
            models = models.model_copy(update={"llm": models.llm or PLACEHOLDER_MODEL})
        config = kb.config.model_copy(update={"models": models})
        preview = KnowledgeBase.open(root, config=config, embedder=kb.embedder)
        try:
            yield preview
        finally:
            preview.close()


def client_message(text: str) -> str:
    """``text`` without server paths, for a client: a draft's temporary folder is dropped
    (``prompts/rewrite.j2`` is what the admin edits) and any other absolute path is cut
    to its last two parts (``/srv/kb/prompts/x.j2`` → ``prompts/x.j2``)."""
    text = _DRAFT_FOLDER.sub("", text)
    return _SERVER_PATH.sub(lambda match: match.group(1), text)


def chain_of(kb: KnowledgeBase, source: str | None, kind: str) -> Any:
    """The chain object of ``kind``: the source's for ingest kinds, the query path's else."""
    if kind in SOURCE_SIDE:
        if source is None:
            raise ConfigError(f"the {KIND_LABELS[kind]} chain belongs to a source; name one")
        return getattr(kb.source_chains(source), kind)
    if kind in QUERY_SIDE:
        return getattr(kb.query_chains(source), kind)
    raise ConfigError(f"unknown chain kind '{kind}' (kinds: {', '.join(KINDS)})")


def configured_name(kb: KnowledgeBase, source: str, kind: str) -> str:
    return str(source_chain_refs(kb.config, source)[kind].ref.chain)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        return f"# could not read {path}: {exc}"


def prompt_name(chain: Any) -> str | None:
    """The prompt file name a chain names, if it is one the editor can save (a plain file
    name or a path under ``prompts/``, never an absolute path)."""
    name = getattr(chain.spec, "prompt", None)
    if not name:
        return None
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        return None
    if len(path.parts) > 1:
        return str(PurePosixPath(*path.parts[1:])) if path.parts[0] == "prompts" else None
    return name


@dataclass
class Catalog:
    """Every source's six chains, built once and kept until a chain or prompt file of
    the knowledge base changes (building them compiles every prompt: too slow per page)."""

    views: dict[str, list[ChainView]]

    def view(self, source: str, kind: str) -> ChainView:
        return next(v for v in self.views[source] if v.kind == kind)

    def users(self, name: str) -> list[str]:
        """Where a prompt file is used: ``source S: kind`` and ``query: kind`` labels."""
        used: list[str] = []
        for source, views in self.views.items():
            for view in views:
                if view.prompt_name == name and view.kind in SOURCE_SIDE:
                    used.append(f"source {source}: {view.label}")
        first = next(iter(self.views.values()), [])
        used += [
            f"query: {v.label}" for v in first if v.kind in QUERY_SIDE and v.prompt_name == name
        ]
        return used


_catalogs: dict[int, tuple[tuple[Any, ...], Catalog]] = {}


def _fingerprint(kb: KnowledgeBase) -> tuple[Any, ...]:
    """What the chains are built from and may change under a running server: the
    knowledge base's own chain and prompt files."""
    files = []
    for sub in ("chains", "prompts"):
        folder = kb.path / sub
        if folder.is_dir():
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    stat = path.stat()
                    files.append((str(path), stat.st_mtime_ns, stat.st_size, stat.st_ino))
    return (id(kb.config), tuple(files))


def catalog(kb: KnowledgeBase) -> Catalog:
    """The chains of every source, as they run and as configured (cached)."""
    key = _fingerprint(kb)
    cached = _catalogs.get(id(kb))
    if cached is not None and cached[0] == key:
        return cached[1]
    built = Catalog({source: _views(kb, source) for source in kb.config.sources})
    _catalogs[id(kb)] = (key, built)
    return built


def _views(kb: KnowledgeBase, source: str) -> list[ChainView]:
    """The six chains ``source`` resolves to, each with its YAML and prompt."""
    found: list[ChainView] = []
    with draft(kb) as preview:

        def real(path: str) -> tuple[str, bool]:
            """A draft's file as the knowledge base's own (its copy), or a built-in."""
            resolved, root = Path(path).resolve(), preview.path.resolve()
            if resolved.is_relative_to(root):
                return str(kb.path / resolved.relative_to(root)), True
            return path, False

        for kind in KINDS:
            running = chain_of(kb, source, kind)
            configured = chain_of(preview, source, kind)
            prompt = configured.prompt
            prompt_file, local = real(str(prompt.path)) if prompt is not None else (None, False)
            found.append(
                ChainView(
                    kind=kind,
                    configured=configured_name(kb, source, kind),
                    resolved=running.spec.name,
                    type=running.spec.type,
                    file=running.spec.path,
                    yaml=_read(running.spec.path),
                    configured_file=real(configured.spec.path)[0],
                    configured_yaml=_read(configured.spec.path),
                    prompt_name=prompt_name(configured),
                    prompt_file=prompt_file,
                    prompt_text=prompt.source if prompt is not None else None,
                    prompt_local=local,
                )
            )
    return found


# -- the chunk a preview is rendered on ------------------------------------------------
def chunk_input(
    kb: KnowledgeBase, detail: DocumentDetail, chunk: ChunkView, tenant: str
) -> tuple[Section, Document]:
    """The section and document an ingest gave the chains for this stored chunk: the
    chunk's own text and heading path, and the document's stored copy (or, for a
    document stored before copies were kept, its chunks put together)."""
    section = Section(text=chunk.content, heading_path=chunk.heading_path)
    archived = kb.stored_copy(detail.document.id, tenant=tenant)
    if isinstance(archived, Document):
        return section, archived
    record = detail.document
    document = Document(
        id=record.id,
        uri=record.uri,
        source=record.source,
        title=record.title,
        elements=[Element(kind="paragraph", text=c.content) for c in detail.chunks],
        metadata=record.metadata,
    )
    return section, document


def render_on_chunk(chain: Any, section: Section, document: Document) -> str:
    """The prompt this chain would send for the chunk (grouped as an ingest groups it)."""
    planned = getattr(chain, "planned_calls", None)
    if planned is None:
        raise ChainError(f"chain '{chain.spec.name}' has no per-chunk prompt to preview")
    prompts, _ = planned([(section, document)])
    return str(prompts[0]) if prompts else ""


async def run_on_chunk(chain: Any, section: Section, document: Document) -> Any:
    """What the chain's LLM gives for the chunk (an LLM call, through the draft's own
    cache): the texts a matching-text chain indexes whatever it answers (the chunk's
    sentences, signatures or text, ``known_texts``) left out."""
    output = await _bounded(lambda: chain.run(section, document))
    known = getattr(chain, "known_texts", None)
    if known is None or not isinstance(output, list):
        return output
    offline = {text.text for text in known(section, document)}
    return [text for text in output if text.text not in offline]


async def run_on_query(chain: Any, query: str) -> Any:
    """What the query chain gives for ``query`` (an LLM call)."""
    return await _bounded(lambda: chain.run(query))


async def _bounded(work: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """``work()`` on a thread with a loop of its own, its templates rendered in a preview
    worker (``bounded_previews``): the edited template is untrusted, and its rendering
    would otherwise run unbounded on the server's event loop. The draft knowledge base
    is built for this request, so its LLM client is bound to no other loop."""

    def run() -> Any:
        with bounded_previews():
            return run_sync(work())

    return await asyncio.to_thread(run)


def render_query(chain: Any, query: str) -> str:
    return str(chain.render(query=query))


def preview_prompt(
    kb: KnowledgeBase, source: str, kind: str, name: str, template: str, given: dict[str, Any]
) -> str:
    """The edited prompt as its chain would send it, for a chunk or a query, rendered in a
    preview worker (blocking: the caller runs it off the event loop)."""
    with draft(kb, (name, template)) as edited, bounded_previews():
        chain = chain_of(edited, source, kind)
        if "section" in given:
            return render_on_chunk(chain, given["section"], given["document"])
        return render_query(chain, given["query"])


async def format_result(chain: Any, result: ToolResult) -> str:
    """The formatter's text for a search result, its template rendered in a preview worker
    waited for on a thread (never on the event loop)."""
    return str(await _bounded(lambda: chain.run(result)))


# -- saving ------------------------------------------------------------------------------
def save_prompt(kb: KnowledgeBase, name: str, text: str) -> Path:
    """Write the prompt into the knowledge base's own ``prompts/`` (it overrides the
    built-in of that name), atomically, then reload the chains."""
    folder = kb.path / "prompts"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    if not target.resolve().is_relative_to(folder.resolve()):
        raise ConfigError(f"prompt name '{name}' is outside the knowledge base's prompts/")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".prompt-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    reload_chains(kb)
    return target


def reload_chains(kb: KnowledgeBase) -> None:
    """Make the open knowledge base load its chains again (a prompt file changed)."""
    kb.reload_chains()
