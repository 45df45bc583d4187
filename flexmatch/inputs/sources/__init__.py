"""Sources: a source's inputs (paths, URLs, records) → documents, through its source type.

``types``: the plug-in interface and registry (the ``flexmatch.sources`` entry points);
``builtin``: the ``files``, ``records`` and ``web`` types; ``git``: Git repositories;
``crawl``: whole-site web import; ``reader``: ``SourceReader``, which runs a source's
type for an ingest.
"""

from flexmatch.inputs.sources.reader import Plan, SourceReader, safe_filename, spooled

__all__ = ["Plan", "SourceReader", "safe_filename", "spooled"]
