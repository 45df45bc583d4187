"""Each error class carries its code and HTTP status, and one table, built from the
classes, is read in both directions: the server's answer for an error, and the class
``Client`` raises for that answer. The error codes page is generated from it."""

from __future__ import annotations

import pytest

from flexmatch import errors
from flexmatch.adapters.http.errors import status_for
from flexmatch.client import error_for
from flexmatch.errors import (
    DocumentNotFoundError,
    FlexMatchError,
    ServiceError,
    by_code,
    code_table,
    error_classes,
    own_codes,
)
from scripts.mkdocs_hooks import ERROR_TABLE, error_table, on_page_markdown
from tests.conftest import REPO

# classes whose errors travel as something else: the root is any crash (the client
# cannot know more), ServiceError is the client's own
NOT_RAISED_BACK = (FlexMatchError, ServiceError)


def test_every_class_declares_its_codes_and_a_status() -> None:
    classes = error_classes()
    defined = {
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, FlexMatchError)
    }
    assert set(classes) == defined  # the walk finds every class of the module
    for kind in classes:
        assert own_codes(kind), f"{kind.__name__} declares no code"
        if kind is not ServiceError:
            assert 400 <= kind.status < 600, kind


def test_no_code_is_claimed_by_two_classes() -> None:
    table = by_code()
    assert sum(len(own_codes(kind)) for kind in error_classes()) == len(table)

    class One(FlexMatchError):
        code = "same"

    class Other(FlexMatchError):
        code = "same"

    with pytest.raises(ValueError, match="'same' is declared by both One and Other"):
        code_table([One, Other])


@pytest.mark.parametrize("code", sorted(by_code()))
def test_an_error_and_its_answer_map_both_ways(code: str) -> None:
    """The server answers an error with its class's status and code; the client raises
    that class back from the answer."""
    kind = by_code()[code]
    if kind in NOT_RAISED_BACK:
        error = error_for(500, code, "the message")
        assert type(error) is ServiceError and error.code == code
        return
    raised = kind.from_answer(code, "the message")
    status, sent = status_for(raised)
    assert (status, sent) == (kind.status, code)
    missing = DocumentNotFoundError if kind is DocumentNotFoundError else None
    back = error_for(status, sent, "the message", missing)
    assert type(back) is kind and back.code == code and str(back) == "the message"


def test_a_not_found_that_is_no_document_stays_a_service_error() -> None:
    """A job or key not found answers ``not_found`` too: only a call that names what is
    missing raises ``DocumentNotFoundError``."""
    error = error_for(404, "not_found", "no job 'j'")
    assert isinstance(error, ServiceError) and error.status == 404


def test_the_error_codes_page_is_generated_from_the_classes() -> None:
    page = (REPO / "docs" / "reference" / "errors.md").read_text(encoding="utf-8")
    assert ERROR_TABLE in page
    assert "scripts/mkdocs_hooks.py" in (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    built = on_page_markdown(page)
    table = error_table()
    assert table in built and ERROR_TABLE not in built
    for code, kind in by_code().items():
        assert f"| `{code}` |" in table and f"`{kind.__name__}`" in table
    assert "| `invalid_filter` | 422 | `FilterError` (ConfigError) | A search filter" in table
