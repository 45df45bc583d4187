"""The HTTP API routes, one module per resource."""
