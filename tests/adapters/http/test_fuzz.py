"""A schema-driven fuzz of the HTTP API: every operation in the OpenAPI document, with
generated valid and invalid inputs, against a real server; none may answer 5xx.

Bounded: a handful of examples per operation (twice as many under
HYPOTHESIS_PROFILE=explore), no deadline per example, in a few seconds an operation."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from flexmatch import KnowledgeBase
from flexmatch.adapters.http import create_app
from flexmatch.engine.embedders import OnnxEmbedder
from tests.adapters.http.harness import Api, running_api, upload
from tests.adapters.http.servers import wait_for_job
from tests.conftest import DOCS, examples


@pytest.fixture(scope="module")
def fuzzed_api(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[Api]:
    with running_api(tmp_path_factory.mktemp("fuzz") / "kb", embedder) as api:
        admin = api.key("admin", "fuzz", "admin")
        wait_for_job(api.client, upload(api, admin, DOCS / "pdf_fake-memo.pdf"), admin)
        yield api


def _openapi() -> dict:
    """The OpenAPI document (it does not depend on what the knowledge base holds)."""
    with tempfile.TemporaryDirectory() as folder:
        kb = KnowledgeBase.open(folder, env={})
        try:
            return create_app(kb).openapi()
        finally:
            kb.close()


schema = schemathesis.openapi.from_dict(_openapi())


@schema.parametrize()
@settings(
    max_examples=examples(ci=6, explore=12),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,  # the same examples every run: a failure is reproducible
)
def test_no_operation_answers_5xx(case: schemathesis.Case, fuzzed_api: Api) -> None:
    headers = {"Authorization": f"Bearer {fuzzed_api.tokens['admin']}"}
    response = case.call(base_url=str(fuzzed_api.client.base_url), headers=headers, timeout=60)
    case.validate_response(response, checks=[not_a_server_error])


def test_the_fuzzed_knowledge_base_still_answers(fuzzed_api: Api) -> None:
    headers = {"Authorization": f"Bearer {fuzzed_api.tokens['admin']}"}
    found = fuzzed_api.client.post(
        "/v1/search", json={"query": "How many blankets were delivered?"}, headers=headers
    )
    assert found.status_code == 200 and found.json()["results"]
