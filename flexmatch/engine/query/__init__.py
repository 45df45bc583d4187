"""The query path, one module a stage: transform → embed → search → complete → rerank →
format, and the run that drives them.

Which chains a query goes through is ``engine.chains.plan`` (``QueryPlan``: each source's
transform, reranker and formatter, and the groups of sources searched together); a
group's transform puts the query in its sources' form, and ``run`` embeds the variants.
``search``: the first stage, dense and BM25 search over matching texts, fused
(``Retriever``); ``complete``: each candidate given every signal, a typed ``Candidate``.
``rerank``: the candidates ranked on one scale, the top-N kept read into results.
``format``: the tool result made the text an agent reads (``format_result``).
``run``: one query through all of it (``run_query``; ``similar``), timed per stage;
``querier``: the checks and conditions around it, for the facade (``Querier``).
"""

from flexmatch.engine.query.complete import Candidate
from flexmatch.engine.query.format import format_result
from flexmatch.engine.query.querier import Querier
from flexmatch.engine.query.run import StageTimer, run_query, similar
from flexmatch.engine.query.search import Retriever

__all__ = [
    "Candidate",
    "Querier",
    "Retriever",
    "StageTimer",
    "format_result",
    "run_query",
    "similar",
]
