"""The outer adapters: CLI, HTTP service, MCP server and agent tool.

Each uses only the public API (``flexmatch.__all__``, and ``flexmatch.service.__all__``)
and none imports another: the CLI adds the HTTP, MCP and agent adapters' commands
(``serve``, ``mcp``, ``agent-demo``) through the ``flexmatch.commands`` plug-in hook, as
it adds any plug-in's. A test reads their imports.
"""
