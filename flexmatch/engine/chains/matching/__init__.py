"""Matching-text chains: section → the short texts that get embedded and matched."""

from flexmatch.engine.chains.matching import content, questions, sentences  # noqa: F401 (registers)
