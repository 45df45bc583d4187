"""The query path, one module a stage."""
