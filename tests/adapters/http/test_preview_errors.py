"""A refused preview or save says what is wrong with the prompt, naming it as the admin
knows it (``prompts/rewrite.j2``), never by the server's paths (its temporary draft
folder, the knowledge base's folder, the installation's)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from flexmatch.adapters.http.console.drafts import client_message
from tests.adapters.http.test_preview_limits import _admin, _signed_in
from tests.adapters.http.test_stalls import _serving
from tests.conftest import write_config


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        (
            "/tmp/flexmatch-console-oisq8fpo/prompts/rewrite.j2: could not render: unsafe",
            "prompts/rewrite.j2: could not render: unsafe",
        ),
        (
            "no prompt named 'x' (looked in /tmp/flexmatch-console-a_1/prompts, /srv/kb/prompts)",
            "no prompt named 'x' (looked in prompts, kb/prompts)",
        ),
        ("/opt/venv/lib/flexmatch/_data/prompts/a.j2:3: syntax", "prompts/a.j2:3: syntax"),
        # no path: a URL, a relative path and an id are left alone
        ("fetch https://example.com/a/b/c.html: 404", "fetch https://example.com/a/b/c.html: 404"),
        ("see prompts/x.j2 and 'a/../b'", "see prompts/x.j2 and 'a/../b'"),
    ],
)
def test_client_messages_carry_no_server_paths(message: str, shown: str) -> None:
    assert client_message(message) == shown


@pytest.mark.slow  # a real server
def test_refused_previews_and_saves_name_the_prompt_not_the_server_folder(
    tmp_path: Path,
) -> None:
    kb = tmp_path / "kb"
    write_config(kb, "sources:\n  default: {}\n")
    key = _admin(kb, "default")  # the operator's admin: may save prompt files too
    with _serving(kb) as (_process, client):
        console, csrf = _signed_in(str(client.base_url), key)
        form = {"source": "default", "kind": "query_transform"}

        def preview(template: str) -> httpx.Response:
            return console.post(
                "/console/api/chains/preview",
                data={**form, "template": template},
                headers={"X-CSRF-Token": csrf},
            )

        refused = [
            preview("{{ query.__class__.__mro__ }}"),  # the sandbox refuses it
            preview("{{ query "),  # does not parse
            preview("{{ not_a_variable }}"),  # the chain does not provide it
        ]
        saved = console.post(
            "/console/chains/prompt",
            data={**form, "csrf": csrf, "template": "{{ query "},
            headers={"X-CSRF-Token": csrf},
        )
        console.close()
    for response in refused:
        assert response.status_code == 422, response.text
        message = response.json()["error"]["message"]
        assert message.startswith("prompts/"), message
        assert ".j2" in message
    assert saved.status_code == 422 and "template syntax error" in saved.text, saved.text[:500]
    for text in [r.text for r in refused] + [saved.text]:
        for server_path in ("/tmp/", "flexmatch-console-", str(kb), str(Path.cwd())):
            assert server_path not in text, text[:500]
