"""The knowledge-base configuration (``flexmatch.yaml``), validated at the edge."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from flexmatch.access import Access
from flexmatch.errors import SourceChoiceError
from flexmatch.models.reading import ExpandMode
from flexmatch.yamlio import read_yaml, validate

CONFIG_FILE = "flexmatch.yaml"
# the packaged all-MiniLM-L6-v2, as trained, and with int8 matrix products
LOCAL_EMBEDDING_MODEL_FP32 = "local/all-MiniLM-L6-v2"
LOCAL_EMBEDDING_MODEL_INT8 = "local/all-MiniLM-L6-v2-int8"
LOCAL_EMBEDDING_MODELS = (LOCAL_EMBEDDING_MODEL_FP32, LOCAL_EMBEDDING_MODEL_INT8)
_INT8_DOT_FLAGS = {"avx512_vnni", "avx_vnni"}
MIN_SCHEDULE_SECONDS = 10.0  # a source synced more often than this is a mistake, not a plan
_INTERVAL_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def cpu_has_int8_dot(cpuinfo: str | None = None) -> bool:
    """Whether this CPU has x86's VNNI int8 dot products (``/proc/cpuinfo``'s flags).
    Without them, int8 matrix kernels add u8 x s8 products in 16 bits, which can
    saturate (ONNX Runtime's and OpenVINO's quantization notes): int8 is measured, and
    the default, only where it cannot."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:  # not Linux: not claimed
            return False
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags" and _INT8_DOT_FLAGS & set(value.split()):
            return True
    return False


def parse_interval(text: str) -> float:
    """Seconds in an interval such as ``"90s"``, ``"15m"``, ``"1h"``, ``"1d"`` or ``"600"``."""
    cleaned = text.strip().lower()
    unit = cleaned[-1:] if cleaned[-1:] in _INTERVAL_UNITS else "s"
    number = cleaned[:-1] if cleaned[-1:] in _INTERVAL_UNITS else cleaned
    try:
        seconds = float(number) * _INTERVAL_UNITS[unit]
    except ValueError:
        raise ValueError(
            f'{text!r} is not an interval: a number with s, m, h or d ("15m", "1h")'
        ) from None
    return seconds


@functools.cache
def default_embedding_model() -> str:
    """int8 where the CPU has VNNI: ~2x the texts a second of fp32 there, nDCG@10 within
    0.002 on squad-dev and SciFact (README); fp32 elsewhere."""
    return LOCAL_EMBEDDING_MODEL_INT8 if cpu_has_int8_dot() else LOCAL_EMBEDDING_MODEL_FP32


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


CLUSTER_FIELDS = (
    "shard_number",
    "replication_factor",
    "write_consistency_factor",
    "on_disk_payload",
    "on_disk_vectors",
)


class StoreConfig(_Strict):
    """Embedded Qdrant in ``path`` (relative to the knowledge base), or a server at ``url``.

    The cluster settings (``shard_number`` … ``on_disk_vectors``) apply when FlexMatch
    creates the server's collection; unset, the server decides. They are refused without
    ``url``: the embedded store is one shard in one process, so a config that sets them
    with no server (an empty ``${QDRANT_URL}``, say) is a mistake worth stopping on.
    """

    path: str = ".flexmatch/qdrant"
    url: str | None = None
    api_key: str | None = None
    collection: str = "flexmatch"
    lock_timeout: float = Field(30.0, ge=0, le=3600)  # seconds to wait for another process
    # the embedded store builds its HNSW index at the end of an ingest once it holds this
    # many points (below it, exact search is as fast and the build costs more than it saves)
    index_min_points: int = Field(20_000, ge=0)
    shard_number: int | None = Field(None, ge=1, le=1024)
    replication_factor: int | None = Field(None, ge=1, le=64)
    write_consistency_factor: int | None = Field(None, ge=1, le=64)  # copies a write waits for
    on_disk_payload: bool | None = None  # payloads (chunk texts) read from disk, not RAM
    on_disk_vectors: bool | None = None  # dense vectors and the sparse index on disk

    @field_validator("url", "api_key", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return value or None

    @model_validator(mode="after")
    def _cluster_needs_a_server(self) -> StoreConfig:
        given = [name for name, value in self.cluster_settings().items() if value is not None]
        if given and not self.url:
            raise ValueError(
                f"{', '.join(given)} apply to a Qdrant server: set store.url, or remove them "
                "(the embedded store is one shard in one process)"
            )
        writers, copies = self.write_consistency_factor, self.replication_factor
        if writers is not None and copies is not None and writers > copies:
            raise ValueError(
                f"write_consistency_factor ({writers}) cannot exceed replication_factor ({copies})"
            )
        return self

    def cluster_settings(self) -> dict[str, Any]:
        """The collection's cluster settings, for the server store (None: the server's own)."""
        return {name: getattr(self, name) for name in CLUSTER_FIELDS}


class ModelsConfig(_Strict):
    """Which LLM and embedding model to call, and how hard."""

    llm: str | None = None
    llm_api_base: str | None = None
    llm_api_key: str | None = None
    llm_concurrency: int = Field(8, ge=1, le=256)
    llm_timeout: float = Field(60.0, gt=0)
    llm_max_retries: int = Field(4, ge=0, le=20)
    llm_retry_delay: float = Field(1.0, ge=0, le=60)  # first backoff step, doubling after
    embedding: str = Field(default_factory=default_embedding_model)
    embedding_api_base: str | None = None
    embedding_api_key: str | None = None
    embedding_batch_size: int = Field(64, ge=1, le=4096)
    # runs of the local model at once; unset: a query on its caller's thread, a batch on
    # every core
    embedding_threads: int | None = Field(None, ge=1, le=64)

    @field_validator(
        "llm",
        "llm_api_base",
        "llm_api_key",
        "embedding_api_base",
        "embedding_api_key",
        mode="before",
    )
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return value or None


class ChainRef(_Strict):
    """A chain by name (a file in ``chains/``) with optional parameter overrides."""

    chain: str
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"chain": value} if isinstance(value, str) else value


class CrawlConfig(_Strict):
    """Whole-site import for a web source: its ``urls`` (and the sites' sitemaps) seed a
    breadth-first walk of the links, robots.txt obeyed.

    ``include``/``exclude`` are globs on the page's URL (``*/docs/*``) or its path
    (``/docs/*``), or regular expressions written ``re:<pattern>`` (searched in the URL);
    a page must match an ``include`` (when any is given) and no ``exclude``.
    """

    max_pages: int = Field(100, ge=1, le=100_000)  # pages requested, per run
    max_depth: int = Field(5, ge=0, le=100)  # links followed from a seed
    same_host: bool = True  # only the seeds' hosts (and where the seeds redirect to)
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    # seconds between two requests to one host, at least (a robots.txt Crawl-delay or
    # Request-rate asking for more wins)
    delay: float = Field(1.0, ge=0, le=600)
    # the longest robots.txt Crawl-delay / Request-rate obeyed, in seconds: a site asking
    # for more (a day, say) is crawled at this pace, and the run's report says so
    max_robots_delay: float = Field(10.0, ge=0, le=86_400)
    # links kept from one page (its first ones): a page of links can be huge
    max_links_per_page: int = Field(1_000, ge=1, le=100_000)
    sitemap: bool = True  # seed from robots.txt's Sitemap: lines, else /sitemap.xml

    @field_validator("include", "exclude")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        import re

        for pattern in patterns:
            if pattern.startswith("re:"):
                try:
                    re.compile(pattern[3:])
                except re.error as exc:
                    message = f"'{pattern}' is not a valid regular expression: {exc}"
                    raise ValueError(message) from None
        return patterns


_WEB_RULES = ("allow_hosts", "timeout", "max_redirects")  # any built-in may fetch a URL
BUILTIN_SOURCE_OPTIONS: dict[str, tuple[str, ...]] = {
    "files": ("include", "exclude", *_WEB_RULES),
    "web": ("urls", "crawl", "include", "exclude", *_WEB_RULES),
    "records": ("template", "id_field", "title_field", "include", "exclude", *_WEB_RULES),
}
"""The ``options`` each built-in source type takes; each may also be written as a field
of the source itself (``include:`` for ``options: {include: ...}``), the shorthand."""


class SourceConfig(_Strict):
    """One data source: what kind of input it reads, and the chains it is ingested with.

    ``type`` names a registered source type (built in: files, web, records; plug-ins add
    theirs through the ``flexmatch.sources`` entry-point group); the type's own settings
    go under ``options``, checked by the type. A built-in type's options may also be
    written as fields of the source (``BUILTIN_SOURCE_OPTIONS``), the shorthand below.
    ``files``: files and folders (``include``/``exclude`` globs on folder walks).
    ``web``: pages by URL (``urls``, safety rules, ``allow_hosts`` to exempt named hosts);
    with ``crawl``, whole sites.
    ``records``: JSON objects, JSON Lines, or a JSON key/value file, each rendered to text
    by the ``template`` prompt file.
    ``paths`` (files and records): the files and folders a run without inputs reads
    (relative to the knowledge-base folder, or absolute); with them the source lists
    itself whole, so ``sync`` and ``ingest --prune`` can remove what is gone.
    ``schedule`` (in a service): sync the source every interval ("30s", "15m", "6h",
    "1d", or seconds; at least 10 s), for each of ``schedule_tenants`` (the default
    tenant unless named); unset, it syncs only when asked.
    """

    type: str = Field("files", pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
    options: dict[str, Any] = Field(default_factory=dict)
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    paths: list[str] = Field(default_factory=list)
    urls: list[str] = Field(default_factory=list)
    crawl: CrawlConfig | None = None
    allow_hosts: list[str] = Field(default_factory=list)
    timeout: float = Field(15.0, gt=0, le=300)  # one deadline per page: connect, headers, body
    max_redirects: int = Field(5, ge=0, le=20)
    template: str = "record"
    id_field: str = "id"
    title_field: str = "title"
    chunker: ChainRef = ChainRef(chain="structure")
    matching_text: ChainRef = ChainRef(chain="questions")
    qualifying_text: ChainRef = ChainRef(chain="context")
    # the query side, per source (unset: the knowledge base's ``query.*`` chain), so a
    # source indexed by keywords is searched with keywords, one indexed by questions
    # with questions
    query_transform: ChainRef | None = None
    reranker: ChainRef | None = None
    formatter: ChainRef | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # who may read its documents (see flexmatch.access): the default, and per path glob
    access: Access | None = None
    access_rules: dict[str, Access] = Field(default_factory=dict)
    # what the source holds, in a sentence: agents read it in the MCP tools' descriptions
    description: str = Field("", max_length=1000)
    schedule: float | None = Field(None, ge=MIN_SCHEDULE_SECONDS, le=366 * 86_400)
    schedule_tenants: list[str] = Field(default_factory=lambda: ["default"], min_length=1)

    @field_validator("schedule", mode="before")
    @classmethod
    def _interval(cls, value: Any) -> Any:
        """``"15m"``, ``"1h"``, ``"30s"``, ``"1d"`` or seconds; empty is unset."""
        if value is None or value == "":
            return None
        if isinstance(value, str):
            return parse_interval(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _builtin_options(cls, value: Any) -> Any:
        """A built-in type's ``options`` become its fields (where the type reads them)."""
        if not isinstance(value, dict):
            return value
        kind = value.get("type", "files")
        options = value.get("options")
        if kind not in BUILTIN_SOURCE_OPTIONS or not isinstance(options, dict) or not options:
            return value
        takes = BUILTIN_SOURCE_OPTIONS[kind]
        unknown = sorted(set(options) - set(takes))
        if unknown:
            raise ValueError(
                f"source type '{kind}' has no option '{unknown[0]}' (options: {', '.join(takes)})"
            )
        twice = sorted(set(options) & set(value))
        if twice:
            raise ValueError(f"'{twice[0]}' is given twice: as a field and under options")
        return {**{k: v for k, v in value.items() if k != "options"}, **options}

    @field_validator("crawl", mode="before")
    @classmethod
    def _crawl_shorthand(cls, value: Any) -> Any:
        """``crawl: true`` crawls with the defaults; ``crawl: false`` does not crawl."""
        if value is True:
            return {}
        return None if value is False else value

    @model_validator(mode="after")
    def _crawl_is_for_web(self) -> SourceConfig:
        if self.crawl is not None and self.type != "web":
            raise ValueError(f"crawl applies to sources of type 'web', not '{self.type}'")
        if self.paths and self.type == "web":
            raise ValueError("paths applies to files and records sources; a web source has urls")
        return self


def current_query_keys(query: Any) -> Any:
    """``query:`` settings with ``transform:``, the old spelling of ``query_transform:``,
    renamed (a file giving both is refused)."""
    if isinstance(query, dict) and "transform" in query:
        if "query_transform" in query:
            raise ValueError("give query_transform, not also its old spelling transform")
        query = {**query, "query_transform": query["transform"]}
        del query["transform"]
    return query


class DeepConfig(_Strict):
    """Deep search (``depth="deep"``): the first results seed follow-up searches, within
    these bounds. ``follow_ups``: the chain that writes them (an LLM decomposes the
    question; with no LLM configured its fallback seeds them from the names, titles and
    rare terms of the first results)."""

    follow_ups: ChainRef = ChainRef(chain="decompose")
    max_hops: int = Field(2, ge=1, le=5)  # searches in sequence, the first included
    max_searches: int = Field(6, ge=1, le=50)  # searches in all, the first included
    time_budget: float = Field(4.0, gt=0, le=120)  # seconds; no new hop starts past it
    seed_results: int = Field(3, ge=1, le=20)  # first results whose text seeds a hop
    hop_discount: float = Field(0.8, gt=0, le=1)  # a later hop's scores count this much less
    follow_up_top_k: int = Field(20, ge=1, le=1000)  # candidates a follow-up search ranks


class QueryConfig(_Strict):
    """The query path: transform → embed → top_k → collapse → rerank → top_n → format."""

    @model_validator(mode="before")
    @classmethod
    def _old_transform_key(cls, value: Any) -> Any:
        return current_query_keys(value)

    query_transform: ChainRef = ChainRef(chain="rewrite")
    retrieval: Literal["hybrid", "dense", "lexical"] = "hybrid"
    fusion: Literal["rrf", "dbsf", "weighted"] = "dbsf"
    dense_weight: float = Field(0.7, ge=0)  # the weighted sum's weights
    lexical_weight: float = Field(0.3, ge=0)
    rrf_k: int = Field(60, ge=1)
    min_score: float | None = Field(None, ge=-1, le=1)  # dense cosine cut-off, e.g. 0.6
    top_k: int = Field(50, ge=1, le=1000)
    reranker: ChainRef = ChainRef(chain="fusion-rerank")
    top_n: int = Field(5, ge=1, le=100)
    formatter: ChainRef = ChainRef(chain="markdown")
    deep: DeepConfig = DeepConfig()
    # context expansion (docs/retrieval.md): a result whose chunk is short, or whose
    # section holds another result, shows its section or its neighbouring chunks
    expand: ExpandMode = "none"
    expand_budget_tokens: int = Field(1000, ge=1, le=100_000)  # all contexts of one answer
    expand_min_tokens: int = Field(60, ge=0, le=100_000)  # a chunk shorter is expanded


class FeedbackConfig(_Strict):
    """Learning from use (``KnowledgeBase.add_feedback``): a helpful mark makes its query a
    learned matching text of the chunk; an unhelpful one demotes the chunk for queries
    near it."""

    max_learned_per_chunk: int = Field(20, ge=1, le=1000)  # over it: the least-marked goes
    merge_similarity: float = Field(0.95, gt=0, le=1)  # cosine: a near-duplicate is merged
    demote_similarity: float = Field(0.85, gt=0, le=1)  # cosine to an unhelpful query
    demote_places: int = Field(3, ge=0, le=100)  # the most places a demotion costs
    max_unhelpful_per_chunk: int = Field(20, ge=1, le=1000)
    per_minute: int = Field(30, ge=1, le=100_000)  # marks one principal may give a minute


HARD_MAX_DOCUMENT_BYTES = 15_000_000  # no config can lift this


class IngestConfig(_Strict):
    """Limits and deduplication for every ingest."""

    max_document_bytes: int = Field(10_000_000, ge=1, le=HARD_MAX_DOCUMENT_BYTES)
    near_duplicate_threshold: float | None = Field(0.99, gt=0, le=1)
    # documents in flight at once: enough to fill the LLM chains' groups and keep the
    # LLM at its concurrency limit while others are parsed, embedded and written (200
    # one-chunk documents, 8 LLM calls at once: 16 kept ~5 calls in flight, 5.9 s; 32
    # left slots idle between waves of group calls, 4.35 s; 64 4.11 s; 128 no better)
    document_concurrency: int = Field(64, ge=1, le=256)
    # characters of document text indexed (or waiting to be) at once, however many documents
    # that is (a larger one runs alone): while in flight, each matching text's vector and
    # payload cost ~100x its text, so this, not the folder's size, bounds an ingest's memory
    text_in_flight: int = Field(1_000_000, ge=1_000, le=1_000_000_000)
    parse_timeout: float = Field(60.0, gt=0, le=3600)  # seconds one document may take to parse
    # address space a parser process may add to what it starts with
    parse_memory_mb: int = Field(2048, ge=256, le=65536)
    parse_workers: int = Field(2, ge=1, le=64)  # parser processes
    fetch_workers: int = Field(4, ge=1, le=64)  # web pages fetched at once, each in a process
    # file name or glob → parser name ({"*.Debian": "text", "copyright": "text"}), before
    # suffixes and content; the names are checked against the registered parsers
    parsers: dict[str, str] = Field(default_factory=dict)

    @field_validator("parsers")
    @classmethod
    def _parser_patterns(cls, value: dict[str, str]) -> dict[str, str]:
        for pattern, name in value.items():
            if not pattern.strip() or not name.strip():
                raise ValueError(f"'{pattern}: {name}': a file name or glob maps to a parser name")
        return value

    # a source plug-in's fetch of one item: seconds spent waiting for it, documents it gives
    plugin_fetch_timeout: float = Field(300.0, gt=0, le=86_400)
    plugin_max_documents: int = Field(10_000, ge=1, le=10_000_000)
    # a chunker's run on one document: seconds, and sections (also at most one per 4 characters
    # of the document's text, at least 100)
    chunk_timeout: float = Field(300.0, gt=0, le=86_400)
    max_sections: int = Field(500_000, ge=1, le=10_000_000)


class ConnectionsConfig(_Strict):
    """How many connections ``flexmatch serve`` holds open, and how long it waits for a
    request's head (``service.connections``); each server process keeps its own counts.

    ``header_timeout``: seconds a connection may take to send a complete request line and
    headers (from connecting, and again after each response) before it is closed.
    ``per_address``: open connections one client address may hold (0: no cap; behind a
    reverse proxy every client shares the proxy's address, so raise it or set 0 there).
    ``total``: open connections in all (unset: 1,000, or fewer when the process's
    open-file limit is low). ``log_interval``: seconds between two log lines about refused
    or timed-out connections, or about running out of open files.
    """

    header_timeout: float = Field(default=10.0, gt=0, le=3_600)
    per_address: int = Field(default=64, ge=0, le=1_000_000)
    total: int | None = Field(default=None, ge=1, le=1_000_000)
    log_interval: float = Field(default=60.0, gt=0, le=86_400)


class ThrottleConfig(_Strict):
    """Budgets of failed API key checks and console sign-ins (``service.throttle``).

    Each client address and each key id may fail ``failures_per_*`` times in a burst;
    the budget comes back over ``window_seconds``. Keys that passed a check within
    ``trusted_seconds`` are never throttled. 0 turns a budget off. ``max_entries`` bounds
    each table, the trusted keys' included. The rules are in
    ``flexmatch.adapters.http.throttle``; the budgets are per server process (each
    replica, and each worker process of one, keeps its own).
    """

    failures_per_address: int = Field(default=20, ge=0, le=1_000_000)
    failures_per_key: int = Field(default=20, ge=0, le=1_000_000)
    window_seconds: float = Field(default=60.0, gt=0, le=86_400)
    trusted_seconds: float = Field(default=3_600.0, ge=0, le=7 * 86_400)
    max_entries: int = Field(default=10_000, ge=10, le=10_000_000)


class QueueConfig(_Strict):
    """How much work one tenant may have waiting in one server process (``service.queue``).

    A job counts from its acceptance until it ends; an upload's bytes count while its files
    wait in the spool folder. Past either cap a new job is refused with 429 and
    ``Retry-After``, and other tenants go on. ``spool_dir``: where uploads wait for their
    job, on disk, never in memory (default ``<kb>/.flexmatch/spool``; avoid a tmpfs).
    """

    max_jobs_per_tenant: int = Field(16, ge=1, le=100_000)
    max_bytes_per_tenant: int = Field(1_000_000_000, ge=1)
    retry_after_seconds: int = Field(30, ge=1, le=3600)
    spool_dir: str | None = None


class ServiceConfig(_Strict):
    """What the replicas of ``flexmatch serve`` share: API keys, jobs, cache generations.

    ``state_url`` is an SQLAlchemy URL (``postgresql+psycopg://user:pw@db/flexmatch``,
    ``sqlite:////var/lib/flexmatch/state.db``; needs the ``shared`` extra). Unset, they
    live in ``<kb>/.flexmatch/keys.sqlite``, which every process on this machine shares.
    ``throttle``: how failed key checks and sign-ins are limited (each process its own).
    ``connections``: caps on open connections, and the deadline for a request's head.
    ``queue``: the jobs and upload bytes one tenant may have waiting (each process its own).
    ``metrics_token``: the operator's bearer token for ``GET /metrics`` (its numbers add up
    every tenant's traffic, so no tenant's key reads them); unset, ``/metrics`` is off.
    """

    state_url: str | None = None
    throttle: ThrottleConfig = ThrottleConfig()
    connections: ConnectionsConfig = ConnectionsConfig()
    queue: QueueConfig = QueueConfig()
    metrics_token: SecretStr | None = Field(default=None, min_length=16)

    @field_validator("state_url", "metrics_token", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return value or None


MCP_TOOLS = (
    "search_knowledge",
    "list_documents",
    "get_document",
    "outline_document",
    "read_document",
    "grep_knowledge",
    "ingest_url",
    "add_record",
    "give_feedback",
)


class McpConfig(_Strict):
    """What ``flexmatch mcp`` tells agents: ``description`` (what the knowledge base holds,
    added to the server's instructions and the search tool's description) and ``tools``
    (a tool's description by tool name, in place of the built-in one; the sources an
    agent may name are still listed after it)."""

    description: str = Field("", max_length=2000)
    tools: dict[str, str] = Field(default_factory=dict)

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(MCP_TOOLS))
        if unknown:
            raise ValueError(f"unknown MCP tool {unknown[0]!r} (tools: {', '.join(MCP_TOOLS)})")
        return value


class QueryLogConfig(_Strict):
    """The opt-in query log (``flexmatch gaps``): each query's text, who asked, its
    results and their scores, and the feedback given on them, kept ``retention_days``.

    ``good_score``: a query finds *nothing good* when no result's best cosine over its
    matching texts (``signals.dense``) reaches it; the fused score cannot say so, as it
    is normalised over each query's own candidates (its best result is near 1 whatever
    was asked). ``group_similarity``: the cosine at which two queries count as one
    question in ``flexmatch gaps``."""

    enabled: bool = False
    retention_days: int = Field(30, ge=1, le=3650)
    good_score: float = Field(0.3, ge=-1, le=1)
    group_similarity: float = Field(0.8, gt=0, le=1)


class KBConfig(_Strict):
    """One knowledge base: its store, models, sources and query settings."""

    store: StoreConfig = StoreConfig()
    service: ServiceConfig = ServiceConfig()
    models: ModelsConfig = ModelsConfig()
    sources: dict[str, SourceConfig] = Field(default_factory=lambda: {"default": SourceConfig()})
    default_source: str = "default"
    ingest: IngestConfig = IngestConfig()
    query: QueryConfig = QueryConfig()
    feedback: FeedbackConfig = FeedbackConfig()
    mcp: McpConfig = McpConfig()
    query_log: QueryLogConfig = QueryLogConfig()

    @model_validator(mode="after")
    def _default_source_exists(self) -> KBConfig:
        if self.default_source not in self.sources:
            known = ", ".join(sorted(self.sources)) or "none"
            raise ValueError(f"default_source '{self.default_source}' is not a source ({known})")
        return self


def choose_source(config: KBConfig, name: object, *, records: bool = False) -> str:
    """The source a caller named (or the default one), checked: one rule for the HTTP
    API, the MCP server and the agent tool. ``records`` asks for a records source."""
    if name is None:
        if not records or config.sources[config.default_source].type == "records":
            return config.default_source
        found = [n for n, s in config.sources.items() if s.type == "records"]
        if not found:
            raise SourceChoiceError(
                "no_records_source", "the knowledge base has no source of type 'records'"
            )
        return found[0]
    if not isinstance(name, str) or name not in config.sources:
        known = ", ".join(sorted(config.sources))
        raise SourceChoiceError("unknown_source", f"unknown source {name!r} (sources: {known})")
    if records and config.sources[name].type != "records":
        raise SourceChoiceError("not_a_records_source", f"source '{name}' is not of type 'records'")
    return name


SOURCE_SIDE = ("chunker", "matching_text", "qualifying_text")  # set on each source
QUERY_SIDE = ("query_transform", "reranker", "formatter")  # a source's own, else query.*
CHAIN_KEYS = SOURCE_SIDE + QUERY_SIDE  # the six chain kinds, as config keys


def ingest_side(config: KBConfig) -> dict[str, Any]:
    """What of ``config`` decides how documents are indexed: everything but the query
    settings and the sources' own query chains. Two configs with the same ingest side
    can share one index (and compare their query settings on it)."""
    data = config.model_dump(mode="json", exclude={"query"})
    for source in data["sources"].values():
        for field in QUERY_SIDE:
            source.pop(field, None)
    return data


@dataclass(frozen=True)
class ChainChoice:
    """The chain one kind of a source resolves to, and whether the source sets it
    (``own``) or takes the knowledge base's ``query.*`` one."""

    kind: str
    ref: ChainRef
    own: bool


def require_source(sources: Mapping[str, SourceConfig], name: str, where: str) -> SourceConfig:
    """The source called ``name``; an unknown one is a ``SourceChoiceError`` (the
    ``ConfigError`` ``choose_source`` raises for it too) at ``where`` that lists the
    sources there are (the one wording of that error)."""
    own = sources.get(name)
    if own is None:
        known = ", ".join(sorted(sources))
        message = f"{where}: no source named '{name}' (sources: {known})"
        raise SourceChoiceError("unknown_source", message)
    return own


def source_chain_refs(
    config: KBConfig, source: str, where: str = CONFIG_FILE
) -> dict[str, ChainChoice]:
    """The six chains ``source`` uses (kind → choice), its own or the defaults: the one
    place a source's chains are resolved. An unknown source is a ConfigError at ``where``."""
    own = require_source(config.sources, source, where)
    choices = {kind: ChainChoice(kind, getattr(own, kind), True) for kind in SOURCE_SIDE}
    for kind in QUERY_SIDE:
        ref: ChainRef | None = getattr(own, kind)
        choices[kind] = ChainChoice(kind, ref or getattr(config.query, kind), ref is not None)
    return choices


def load_config(kb_dir: Path, env: dict[str, str] | None = None) -> KBConfig:
    """Read ``kb_dir/flexmatch.yaml``; a missing file means all defaults."""
    path = kb_dir / CONFIG_FILE
    if not path.exists():
        return KBConfig()
    return validate(KBConfig, read_yaml(path, env), str(path))
