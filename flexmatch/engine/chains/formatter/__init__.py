"""Result formatters: the tool result → what the agent sees."""
