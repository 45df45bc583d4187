"""Chunkers: document → sections."""
