"""The ingest path, one module a stage: chunk → enrich → embed → commit, and the run that
drives them over a batch (what they index comes from ``engine.load``: kept outside this
package, which the Ray workers import, so the package needs no source reader).

``chunk``: a document cut into sections by its source's chunker, bounded and checked.
``enrich``: each section made a chunk with its matching and qualifying texts.
``embed``: chunk → enrich → embed as one document's work (``prepare``; ``LocalWork`` in
this process, reusing stored vectors; ``engine.fanout`` runs it on Ray workers).
``commit``: the checks, dedup (``dedup``) and the commit protocol of ``engine.documents``.
``run``: a batch indexed concurrently as it is read (``run_ingest``; ``work=`` swaps the
work step). ``source_chains`` and ``versions``: each source's chains and the version a
document gets from them; ``threads``: the ingest's own compute threads.
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
