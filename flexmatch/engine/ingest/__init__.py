"""The ingest path, one module a stage: load → chunk → enrich → embed → commit, and the
run that drives them over a batch.

``load``: a source's inputs planned and read into one stream (``Loader``).
``chunk``: a document cut into sections by its source's chunker, bounded and checked.
``enrich``: each section made a chunk with its matching and qualifying texts.
``embed``: chunk → enrich → embed as one document's work (``prepare``; ``LocalWork`` in
this process, reusing stored vectors; ``fanout`` runs it on Ray workers, each a
``ray_worker.IngestWorker``).
``commit``: the checks, dedup (``dedup``) and the commit protocol of ``engine.documents``.
``run``: a batch indexed concurrently as it is read (``run_ingest``; ``work=`` swaps the
work step). ``versions``: the version a document gets from its chains; ``threads``: the
ingest's own compute threads. ``estimate``: what an ingest or re-index would cost.
``resources``: what the path takes of an open knowledge base; ``ingestor``: all of it
for the facade (``Ingestor``). Only the stages are imported here: a Ray worker imports
this package and needs no source reader.
"""

from flexmatch.engine.ingest.commit import Indexer, check_size, check_storable
from flexmatch.engine.ingest.dedup import VectorSet
from flexmatch.engine.ingest.embed import Enriched, LocalWork, Work, prepare
from flexmatch.engine.ingest.run import (
    READ_AHEAD,
    IngestRun,
    ProgressCallback,
    read_ahead,
    run_ingest,
)
from flexmatch.engine.ingest.versions import is_current, version_of

__all__ = [
    "READ_AHEAD",
    "Enriched",
    "Indexer",
    "IngestRun",
    "LocalWork",
    "ProgressCallback",
    "VectorSet",
    "Work",
    "check_size",
    "check_storable",
    "is_current",
    "prepare",
    "read_ahead",
    "run_ingest",
    "version_of",
]
