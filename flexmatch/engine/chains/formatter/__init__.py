"""Formatters: the tool result → what the agent sees."""
