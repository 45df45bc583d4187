"""Rerankers: query + candidate chunks → the candidates re-scored, best first."""
