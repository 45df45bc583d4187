"""The stages as rooms: ``engine.ingest`` and ``engine.query`` each stand on the layers
below them, not on each other nor on how a knowledge base is opened (``engine.runtime``),
so each sits one level under the facade."""

from __future__ import annotations

from tests.test_architecture import concept, imports


def _reaches(package: str) -> set[str]:
    return {
        concept(target)
        for source, targets in imports().items()
        if concept(source) == package
        for target in targets
    }


def test_the_ingest_stages_do_not_need_the_runtime_or_the_query_path() -> None:
    reached = _reaches("flexmatch.engine.ingest")
    assert "flexmatch.engine.runtime" not in reached
    assert "flexmatch.engine.query" not in reached


def test_the_query_stages_do_not_need_the_runtime_or_the_ingest_path() -> None:
    reached = _reaches("flexmatch.engine.query")
    assert "flexmatch.engine.runtime" not in reached
    assert "flexmatch.engine.ingest" not in reached


def test_evaluation_stays_below_the_facade() -> None:
    """The service layer records evaluations: were ``evaluation`` to import the facade,
    the service and every adapter would sit two levels deeper."""
    assert "flexmatch.knowledge_base" not in imports()["flexmatch.evaluation"]
