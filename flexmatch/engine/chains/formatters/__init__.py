"""Result formatters: the tool result → what the agent sees."""

from flexmatch.engine.chains.formatters import json_result, markdown_facts  # noqa: F401 (registers)
