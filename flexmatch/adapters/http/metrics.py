"""Prometheus metrics of one server process, served at ``GET /metrics`` (``routes.metrics``).

The numbers add up every tenant's traffic, so only an ``admin`` key reads them (a
Prometheus scrape sends it as ``authorization: {credentials: fm_...}``). Each app has a
registry of its own (never the library's global one): two apps in one process, as in
the tests, count apart.

What is counted where:

- requests and their latency, per route *template* (``/v1/documents/{document_id}``,
  never the raw path, so the number of series stays bounded): ``access.RequestLog``;
- search latency per stage: the engine times its stages into ``Answer.stage_ms``, and
  the search route hands them here with the time it took to format the answer;
- search-cache hits and misses: the search route;
- ingested documents by outcome and their chunks, and finished jobs by status: the job
  registry, as each document is written;
- LLM calls, tokens, cost and LLM-cache hits: read at scrape time from the knowledge
  base's running ``Usage`` (every LLM call of this process is counted there);
- jobs queued and running in this process: read from the job registry at scrape time;
- queries, those that found nothing good (no result reached ``query_log.good_score``)
  and feedback by kind: read at scrape time from the knowledge base's ``QueryCounts``,
  which the engine moves on every search and feedback event, whichever interface made
  it (HTTP, the console, MCP or Python in this process); cached answers are not queries
  here (they are search-cache hits).

Several processes (``--workers``, replicas) count apart: see the deployment docs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from flexmatch import DocumentOutcome, KnowledgeBase, QueryCounts, Usage

# seconds: from a cached answer (about a millisecond) to a slow upload or LLM re-write
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
SEARCH_STAGES = ("transform", "embed", "search", "rerank", "format")
UNMATCHED = "<unmatched>"  # the route label of a request no route answers


class Metrics:
    """The counters the server moves as it works; ``render`` is the scrape's body."""

    def __init__(
        self,
        usage: Callable[[], Usage | None],
        jobs: Callable[[], Mapping[str, int]],
        queries: Callable[[], QueryCounts] = QueryCounts,
        store_bytes: Callable[[], int | None] = lambda: None,
    ) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "flexmatch_http_requests",
            "HTTP requests answered, by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "flexmatch_http_request_duration_seconds",
            "Time from a request's arrival to the end of its response, by route template.",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.search_stage_seconds = Histogram(
            "flexmatch_search_stage_seconds",
            "Time a search spent in each stage of the query path (cached answers excluded).",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.search_cache = Counter(
            "flexmatch_search_cache_lookups",
            "Search-cache lookups, by result (hit or miss).",
            ["result"],
            registry=self.registry,
        )
        self.ingest_documents = Counter(
            "flexmatch_ingest_documents",
            "Documents ingested, by outcome (added, changed, unchanged, duplicate, failed).",
            ["outcome"],
            registry=self.registry,
        )
        self.ingest_chunks = Counter(
            "flexmatch_ingest_chunks",
            "Chunks written by ingests (of added and changed documents).",
            registry=self.registry,
        )
        self.jobs_finished = Counter(
            "flexmatch_jobs_finished",
            "Ingest jobs that ended, by status (done or failed).",
            ["status"],
            registry=self.registry,
        )
        for label in ("hit", "miss"):  # present from the start, so rate() sees the first
            self.search_cache.labels(label)
        for stage in SEARCH_STAGES:
            self.search_stage_seconds.labels(stage)
        self.registry.register(_LiveCollector(usage, jobs, queries, store_bytes))

    @classmethod
    def for_service(cls, kb: KnowledgeBase, jobs: Callable[[], Mapping[str, int]]) -> Metrics:
        def usage() -> Usage | None:
            return kb.llm.usage if kb.llm is not None else None

        return cls(usage, jobs, lambda: kb.query_log.counts, lambda: kb.store.size_bytes())

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.request_seconds.labels(method, route).observe(seconds)

    def search(self, stage_ms: Mapping[str, float]) -> None:
        for stage, ms in stage_ms.items():
            self.search_stage_seconds.labels(stage).observe(ms / 1000)

    def cache_lookup(self, hit: bool) -> None:
        self.search_cache.labels("hit" if hit else "miss").inc()

    def ingested(self, outcomes: Iterable[DocumentOutcome]) -> None:
        for outcome in outcomes:
            self.ingest_documents.labels(outcome.outcome).inc()
            self.ingest_chunks.inc(outcome.chunks)

    def job_finished(self, status: str) -> None:
        self.jobs_finished.labels(status).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _LiveCollector(Collector):
    """What is read when scraped rather than counted as it happens: the knowledge base's
    LLM usage (already summed by the engine) and the jobs waiting or running now."""

    def __init__(
        self,
        usage: Callable[[], Usage | None],
        jobs: Callable[[], Mapping[str, int]],
        queries: Callable[[], QueryCounts],
        store_bytes: Callable[[], int | None],
    ) -> None:
        self.usage = usage
        self.jobs = jobs
        self.queries = queries
        self.store_bytes = store_bytes

    def collect(self) -> Iterable[Metric]:
        used = self.usage() or Usage()
        yield CounterMetricFamily(
            "flexmatch_llm_calls", "LLM calls made (and paid for).", value=used.calls
        )
        yield CounterMetricFamily(
            "flexmatch_llm_cache_hits",
            "LLM answers the LLM cache gave instead of a call.",
            value=used.cached_calls,
        )
        tokens = CounterMetricFamily(
            "flexmatch_llm_tokens",
            "LLM tokens, by kind (prompt, completion; cached_prompt: prompt tokens the "
            "provider served from its own cache, also counted in prompt).",
            labels=["kind"],
        )
        tokens.add_metric(["prompt"], used.prompt_tokens)
        tokens.add_metric(["completion"], used.completion_tokens)
        tokens.add_metric(["cached_prompt"], used.cached_prompt_tokens)
        yield tokens
        yield CounterMetricFamily(
            "flexmatch_llm_cost_usd",
            "LLM cost in US dollars, as LiteLLM prices the calls (0 for unpriced models).",
            value=used.cost_usd,
        )
        jobs = GaugeMetricFamily(
            "flexmatch_jobs",
            "Ingest jobs of this process not yet ended, by status (queued or running).",
            labels=["status"],
        )
        counts = self.jobs()
        for status in ("queued", "running"):
            jobs.add_metric([status], counts.get(status, 0))
        yield jobs
        asked = self.queries()
        yield CounterMetricFamily(
            "flexmatch_queries", "Searches the knowledge base answered.", value=asked.queries
        )
        yield CounterMetricFamily(
            "flexmatch_queries_nothing_good",
            "Searches none of whose results reached query_log.good_score (zero results).",
            value=asked.nothing_good,
        )
        feedback = CounterMetricFamily(
            "flexmatch_feedback",
            "Feedback events on search results, by kind (helpful, unhelpful).",
            labels=["kind"],
        )
        feedback.add_metric(["helpful"], asked.helpful)
        feedback.add_metric(["unhelpful"], asked.unhelpful)
        yield feedback
        size = self.store_bytes()
        if size is not None:  # a Qdrant server owns its disk
            yield GaugeMetricFamily(
                "flexmatch_store_bytes",
                "Bytes the embedded store takes on disk (every tenant's documents).",
                value=size,
            )
