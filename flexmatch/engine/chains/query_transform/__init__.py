"""Query transformations: user text → texts in matching-text form."""

from flexmatch.engine.chains.query_transform import (  # noqa: F401 (registers)
    identity,
    keywords,
    rewrite,
)
