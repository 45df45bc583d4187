"""Query transformations: user text → texts in matching-text form."""
