"""Chunkers: document → sections."""

from flexmatch.engine.chains.chunkers import structure, window  # noqa: F401 (registers)
