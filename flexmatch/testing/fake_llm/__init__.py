"""A real, local, deterministic fake LLM server for tests, demos and benchmarks.

Tests exercise the real litellm and cohere client code against this server over HTTP on
127.0.0.1 instead of patching clients. Standard library only. It is also a command, for
trying FlexMatch (or an agent loop) offline, with no key and no model::

    python -m flexmatch.testing.fake_llm --port 8001 [--latency 0.2] [--api-key KEY]
    FLEXMATCH_LLM=openai/fake FLEXMATCH_LLM_API_BASE=http://127.0.0.1:8001/v1 flexmatch ...

Endpoints
---------
- ``POST /v1/chat/completions`` (also ``/chat/completions``): OpenAI shape, SSE when
  ``"stream": true``.
- ``POST /v1/embeddings`` (also ``/embeddings``): OpenAI shape, hashed bag-of-words vectors.
- ``POST /v2/rerank``: Cohere v2 shape, token-overlap scores in [0, 1].
- ``GET /v1/models`` (also ``/models``): a small model list.
- ``GET /stats``: requests so far (``calls``), tokens, and counts per path and status.
- anything else: 404 with an OpenAI-style error body.

Tool calls: a chat request that offers ``tools`` is answered the way a tool-using model
answers (unless ``tool_calls`` is off or a ``responder`` is set): first with an
``assistant`` message whose ``tool_calls`` call the offered tool that takes a ``query``
(else the first) with the last user message as the query; once the conversation holds
the tool's result, with words quoting it ("According to <uri>: <passage>").

With ``api_key`` set, a model request without ``Authorization: Bearer <key>`` gets a 401,
as a provider answers a wrong key.

Usage::

    with FakeLLMServer() as server:
        litellm.completion(model="openai/fake", api_base=server.base_url, api_key="x", ...)
        cohere.ClientV2(api_key="x", base_url=server.root_url).rerank(...)

The package: ``server`` (``FakeLLMServer``: start, stop, URLs) serves a ``script`` (the
knobs and the recorded requests) through ``handler`` (HTTP); ``answers`` and ``tools``
say what the model answers, ``responses`` in which shape, ``text`` reads the prompts;
``command`` is the command line.
"""

from __future__ import annotations

from flexmatch.testing.fake_llm.answers import MALFORMED_CONTENT, default_responder
from flexmatch.testing.fake_llm.command import main
from flexmatch.testing.fake_llm.script import RecordedRequest
from flexmatch.testing.fake_llm.server import FakeLLMServer
from flexmatch.testing.fake_llm.text import embed_text, overlap_score
from flexmatch.testing.fake_llm.tools import tool_call_message

__all__ = [
    "MALFORMED_CONTENT",
    "FakeLLMServer",
    "RecordedRequest",
    "default_responder",
    "embed_text",
    "main",
    "overlap_score",
    "tool_call_message",
]
