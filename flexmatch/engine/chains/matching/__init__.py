"""Matching-text chains: section → the short texts that get embedded and matched."""

from flexmatch.engine.chains.matching import (  # noqa: F401 (registers)
    code,
    content,
    keywords,
    questions,
    sentences,
)
