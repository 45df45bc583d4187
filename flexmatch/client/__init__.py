"""``Client``: a served knowledge base (``flexmatch serve``) behind the ``KnowledgeBase`` API.

The methods, their names and their result types are those of ``KnowledgeBase`` (sync,
and async with an ``a`` prefix), so code moves from an embedded knowledge base to a
served one by changing the line that opens it::

    kb = KnowledgeBase.open("my-kb")                        # embedded
    kb = Client("http://kb.internal:8000", api_key="fm_...")  # served

What differs is what a service decides: the API key names the tenant (there is no
``tenant=`` argument), and an ingest is a background job on the server; ``ingest`` waits
for its jobs and returns their ``IngestReport``, ``submit_*`` return the ``Job`` at once.

Each operation is written once, as a generator that yields the HTTP requests it needs (or
a pause while a job runs) and gets back the responses; a sync and an async driver send
them with httpx. An error answer becomes the ``FlexMatchError`` subclass the embedded call
would raise, with the server's message.

The package: ``api`` (``Client``: the operations) over ``connection`` (drivers, retries,
pools), ``answers`` (answers parsed, errors raised) and ``uploads`` (what an ingest
sends, in batches).
"""

from __future__ import annotations

from flexmatch.client.answers import error_for
from flexmatch.client.api import PAGE, Client, Progress
from flexmatch.client.connection import MAX_RETRY_WAIT, RETRIES, Flow, Step
from flexmatch.client.uploads import BATCH_BYTES, BATCH_FILES, BATCH_RECORDS, BATCH_URLS

__all__ = [
    "BATCH_BYTES",
    "BATCH_FILES",
    "BATCH_RECORDS",
    "BATCH_URLS",
    "MAX_RETRY_WAIT",
    "PAGE",
    "RETRIES",
    "Client",
    "Flow",
    "Progress",
    "Step",
    "error_for",
]
