"""Matching-text chains: section → the short texts that get embedded and matched."""
