"""The console's pieces that need no browser: sessions, where sign-in may send you, saved
eval results, and the wheel carrying the templates and static files."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from flexmatch import Scores
from flexmatch.adapters.http.console.sessions import SessionStore, same_token
from flexmatch.adapters.http.console.web import TEMPLATES, safe_next
from flexmatch.service.evals import EVAL_FILE, EvalRow, EvalRun, load_eval, save_eval
from tests.conftest import run_installed


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_sessions_end_when_idle_too_long_or_too_old_and_ids_are_never_reused() -> None:
    clock = Clock()
    store = SessionStore(idle=60, lifetime=300, clock=clock)
    first = store.create("fm_key")
    second = store.create("fm_key")
    assert first.id != second.id and first.csrf != second.csrf
    clock.now += 59
    assert store.get(first.id) is first  # seen: the idle time starts again
    clock.now += 59
    assert store.get(first.id) is first
    assert store.get(second.id) is None  # 118 s unused
    for _ in range(4):
        clock.now += 50
        store.get(first.id)
    clock.now += 50
    assert store.get(first.id) is None  # 300 s old, however busy
    assert store.get(None) is None and store.get("") is None


def test_sessions_are_bounded_and_end_on_request() -> None:
    store = SessionStore(max_sessions=2)
    a, b, c = (store.create(f"fm_{n}") for n in range(3))
    assert store.get(a.id) is None and len(store) == 2
    store.end(b.id)
    assert store.get(b.id) is None and store.get(c.id) is c


def test_csrf_tokens_compare_exactly() -> None:
    assert same_token("abc", "abc")
    assert not same_token("abd", "abc")
    assert not same_token(None, "abc") and not same_token("", "")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("/console/documents?q=a", "/console/documents?q=a"),
        (None, "/console/"),
        ("https://evil.example/console/", "/console/"),
        ("//evil.example/console", "/console/"),
        ("/console\\@evil.example", "/console/"),
        ("/v1/documents", "/console/"),
        ("/console/api/jobs/1", "/console/"),
    ],
)
def test_sign_in_only_sends_you_to_a_console_page(given: str | None, expected: str) -> None:
    assert safe_next(given) == expected


def test_eval_results_round_trip_and_a_bad_file_reads_as_none(tmp_path: Path) -> None:
    assert load_eval(tmp_path) is None
    scores = Scores(
        queries=2,
        ndcg_at_10=0.9,
        recall_at_5=1.0,
        recall_at_10=1.0,
        mrr_at_10=0.85,
        latency_median_ms=30.0,
        latency_p95_ms=41.0,
    )
    run = EvalRun(dataset="scifact", rows=[EvalRow(setup="default", **scores.model_dump())])
    save_eval(tmp_path, run)
    assert load_eval(tmp_path) == run
    (tmp_path / EVAL_FILE).write_text("{not json", encoding="utf-8")
    assert load_eval(tmp_path) is None


def test_the_wheel_carries_the_console_and_serves_it_installed(wheel: Path, tmp_path: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    console = Path(TEMPLATES).parent
    for path in console.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            relative = path.relative_to(console.parents[3]).as_posix()
            assert relative in names, relative
    target = tmp_path / "site"  # where run_installed puts it
    script = (
        "import pathlib\n"
        "from fastapi.testclient import TestClient\n"
        "from flexmatch import KnowledgeBase\n"
        "from flexmatch.adapters.http import create_app\n"
        "from flexmatch.adapters.http.console import web\n"
        f"assert web.TEMPLATES.is_relative_to({str(target)!r})\n"
        "KnowledgeBase.init('kb')\n"
        "app = create_app(KnowledgeBase.open('kb', env={}))\n"
        "client = TestClient(app)\n"
        "page = client.get('/console/signin')\n"
        "assert page.status_code == 200 and 'API key' in page.text, page.text\n"
        "assert client.get('/console/static/console.js').status_code == 200\n"
        "assert client.get('/console/static/console.css').status_code == 200\n"
        "print('ok')\n"
    )
    result = run_installed(wheel, tmp_path, script)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
