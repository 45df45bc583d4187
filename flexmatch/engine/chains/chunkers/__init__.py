"""Chunkers: document → sections."""

from flexmatch.engine.chains.chunkers import code, structure, window  # noqa: F401 (registers)
