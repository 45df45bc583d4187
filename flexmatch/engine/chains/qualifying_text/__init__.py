"""Qualifying-text chains: section + document → context."""
