"""The web console: sign in with an API key, then import, inspect, search and tune chains.

Served by ``flexmatch serve`` under ``/console`` on the same port as the API, and built on
the same pieces: the key checks of ``auth`` (tenant and permissions come from the key),
the import jobs of ``jobs``, the route functions of ``routes`` and the public
``KnowledgeBase`` API. Pages are rendered on the server (Jinja2, autoescaped) with a
little plain JavaScript for drag and drop, live job progress and prompt previews; no
build step, nothing fetched from elsewhere.

Modules: ``sessions`` (cookie sessions and CSRF tokens), ``web`` (templates, errors,
the signed-in user), ``pages`` (sign-in, overview, documents, search), ``imports``
(files, URLs, jobs), ``chains`` (chains, the prompt editor, re-index), ``drafts`` (what
the prompt editor previews with), ``evals`` (saved ``flexmatch eval`` results), and
``router`` (puts it together). This module imports nothing, so ``flexmatch eval`` can
use ``evals`` without the server extra.
"""
