"""Qualifying-text chains: section + document → context."""

from flexmatch.engine.chains.qualifying import context, headings  # noqa: F401 (registers)
