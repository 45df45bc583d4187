"""The core engine: chains, models, stores, document records, the ingest and query paths."""
