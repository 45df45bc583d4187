"""The outer adapters: CLI, HTTP service, MCP server and agent tool.

Each uses only the public API (``flexmatch.__all__``); a test reads their imports.
"""
