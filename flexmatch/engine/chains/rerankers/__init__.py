"""Rerankers: query + candidate chunks → the candidates re-scored, best first."""

from flexmatch.engine.chains.rerankers import cohere, fusion, llm, none  # noqa: F401 (registers)
