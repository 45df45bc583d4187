"""Sources: a source's inputs (paths, URLs, records) → documents, through its source type.

``types``: the plug-in interface and registry (the ``flexmatch.sources`` entry points);
``builtin``: the ``files``, ``records`` and ``web`` types; ``reader``: ``SourceReader``,
which runs a source's type for an ingest; ``items``: what every source yields.
What the types read with: ``files`` (files, folders, JSON Lines corpora), ``records``
(entries through a template), ``fetch``/``web_policy``/``pages`` (one guarded web fetch,
and a page read into a document), ``crawl`` (whole-site web import), ``git`` and
``git_commands`` (Git repositories); ``validators``: what says when a copy was read.
"""

from flexmatch.inputs.sources.reader import Plan, SourceReader, safe_filename, spooled

__all__ = ["Plan", "SourceReader", "safe_filename", "spooled"]
