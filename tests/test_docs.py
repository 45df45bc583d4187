"""What a user reads stays a user's: the README a landing page whose quick start works on
a fresh machine, an extras table that matches pyproject.toml, and no development history
(issue numbers, work sessions) in the README or the documentation site. The site itself
is built with ``mkdocs build --strict`` by ./scripts/test (broken links fail there)."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import REPO

README = REPO / "README.md"
PAGES = sorted((REPO / "docs").rglob("*.md"))
HISTORY = re.compile(
    r"\bissue\s+#?\d+|\(issue\b|\bthe issue\b|\b(this|that|the|each|a|one)"
    r" (session|sessions) (before|after|ago)\b|\bthis session\b|sessions? ago",
    re.IGNORECASE,
)
# "session" is a word of the web console's sign-in (its cookie, its CSRF token): a
# paragraph that uses it must be about that
SIGN_IN = re.compile(r"console|cookie|sign|CSRF|sticky|revok", re.IGNORECASE)


def paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def test_readme_is_a_landing_page_with_the_two_command_quick_start() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "../shared" not in text  # the quick start needs nothing outside the package
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", quick, re.DOTALL)
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert [c for c in commands if c] == ["./scripts/demo", "./scripts/test"]
    assert "flexmatch demo" in text  # the quick start after pip install


def test_extras_table_lists_every_extra_once_in_two_cells() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    text = README.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z-]+)` \|(.*)$", text, re.MULTILINE)
    assert sorted(name for name, _ in rows) == sorted(extras)
    for name, rest in rows:
        assert rest.endswith("|") and rest.count("|") == 1, f"the '{name}' row is malformed"


def test_no_development_history_where_users_read() -> None:
    problems = []
    for path in [README, *PAGES]:
        for paragraph in paragraphs(path.read_text(encoding="utf-8")):
            where = f"{path.relative_to(REPO)}: {paragraph.strip()[:80]!r}"
            if HISTORY.search(paragraph):
                problems.append(f"{where}: development history")
            if re.search(r"\bsessions?\b", paragraph, re.IGNORECASE) and not SIGN_IN.search(
                paragraph
            ):
                problems.append(f"{where}: 'session' outside the console's sign-in")
    assert problems == []
