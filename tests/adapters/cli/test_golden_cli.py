"""``flexmatch eval --kb KB golden.yaml`` through the real command on a small built
knowledge base: a golden question fails the run when its document stops coming first,
``must_not`` and ``optional`` work, the ``--json`` shape, setups side by side, the
ablation, and ``--generate`` against the fake LLM server."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from flexmatch import load_golden
from flexmatch.testing import FakeLLMServer
from flexmatch.testing.fake_llm import default_responder
from tests.conftest import run

DOCS = {
    "harbour.md": "# Harbour\n\nMooring costs twelve euros per night. The harbour office "
    "opens at six in the morning.\n",
    "orchard.md": "# Orchard\n\nThe tractor harvests apples in autumn. Pears are picked by "
    "hand in September.\n",
    "tax.md": "# Taxes\n\nIncome tax returns are due on the thirtieth of April. Late filing "
    "costs a penalty of fifty euros.\n",
    "library.md": "# Library\n\nThe reading room lends up to six books for three weeks. "
    "Overdue books cost ten cents a day.\n",
    "codes.md": "# Part codes\n\nReplacement valve ZQX-4471 fits the old boiler only.\n",
    "ferry.md": "# Ferry\n\nThe island ferry leaves the pier every hour between eight and "
    "eight in summer.\n",
}
GOLDEN = """\
- question: How much does it cost to moor a boat overnight?
  expect: {document: harbour.md}
- question: When must I file my income tax return?
  expect: {citation: tax.md}
- question: How many books may I borrow at once?
  expect: {citation: "library.md:3"}
"""
KEYS = ("OPENAI_API_KEY", "FLEXMATCH_LLM", "FLEXMATCH_LLM_API_KEY", "FLEXMATCH_LLM_API_BASE")


def offline() -> dict[str, str]:
    """The caller's environment without any LLM setting."""
    return {k: v for k, v in os.environ.items() if k not in KEYS}


def build(folder: Path) -> tuple[Path, Path]:
    """A knowledge base of ``DOCS`` (offline: sentences and chunk text) and its docs."""
    docs = folder / "docs"
    docs.mkdir(parents=True)
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    kb = folder / "kb"
    assert run("init", str(kb)).returncode == 0
    done = run("ingest", "--kb", str(kb), str(docs), env=offline())
    assert done.returncode == 0, done.stderr
    return kb, docs


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A knowledge base the tests below read and never change."""
    return build(tmp_path_factory.mktemp("golden"))


def golden(folder: Path, text: str = GOLDEN) -> Path:
    path = folder / "golden.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def evaluated(kb: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, Any, str]:
    done = run("eval", "--kb", str(kb), *args, "--json", env=env or offline())
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


def test_a_golden_question_fails_the_run_when_its_document_stops_coming_first(
    tmp_path: Path,
) -> None:
    kb, docs = build(tmp_path)
    path = golden(tmp_path)
    code, report, _ = evaluated(kb, str(path))
    assert code == 0, report
    outcomes = report["runs"][0]["outcomes"]
    assert [o["rank"] for o in outcomes] == [1, 1, 1] and report["failed"] == 0
    assert outcomes[0]["first"] == "harbour.md:3"
    table = run("eval", "--kb", str(kb), str(path), env=offline())
    assert table.returncode == 0 and table.stdout.count("│ pass │") == 3, table.stdout
    # the harbour page is rewritten: it no longer says what mooring costs
    (docs / "harbour.md").write_text("# Harbour\n\nThe harbour has a blue crane.\n")
    assert run("ingest", "--kb", str(kb), str(docs), env=offline()).returncode == 0
    code, report, _ = evaluated(kb, str(path))
    assert code == 1 and report["failed"] == 1
    first = report["runs"][0]["outcomes"][0]
    assert first["passed"] is False and first["rank"] != 1 and first["first"] != "harbour.md:3"
    table = run("eval", "--kb", str(kb), str(path), env=offline())
    assert table.returncode == 1 and "FAIL" in table.stdout
    assert "1 golden question failed" in table.stderr
    # --at 5: the answer need only be among the first five documents
    code, report, _ = evaluated(kb, str(path), "--at", "5")
    assert report["at"] == 5 and code == (0 if (first["rank"] or 99) <= 5 else 1)


def test_must_not_and_optional(built: tuple[Path, Path], tmp_path: Path) -> None:
    kb, _ = built
    text = (
        "- question: How much does it cost to moor a boat overnight?\n"
        "  expect: {document: harbour.md}\n"
        "  must_not: [tax.md, nothing-like-it.md]\n"
        "- question: When does the island ferry leave?\n"
        "  expect: {document: orchard.md}\n"
        "  optional: true\n"
    )
    code, report, _ = evaluated(kb, str(golden(tmp_path, text)))
    mooring, ferry = report["runs"][0]["outcomes"]
    # six one-chunk documents: the agent is shown five, tax.md among them
    assert mooring["rank"] == 1 and mooring["shown_must_not"] == ["tax.md"]
    assert mooring["passed"] is False and code == 1 and report["failed"] == 1
    assert ferry["passed"] is False and ferry["optional"] is True  # warns only
    assert ferry["first"] == "ferry.md:3"
    only_optional = golden(
        tmp_path,
        text.split("- question: When")[0].replace(
            "  must_not: [tax.md, nothing-like-it.md]\n", "  must_not: [nothing-like-it.md]\n"
        )
        + "- question: When does the island ferry leave?\n  expect: {document: orchard.md}\n"
        "  optional: true\n",
    )
    code, report, _ = evaluated(kb, str(only_optional))
    assert code == 0 and report["failed"] == 0 and report["runs"][0]["scores"]["passed"] == 1


def test_the_json_shape_and_the_scores(built: tuple[Path, Path], tmp_path: Path) -> None:
    kb, _ = built
    code, report, _ = evaluated(kb, str(golden(tmp_path)))
    assert code == 0 and set(report) == {"at", "runs", "ablation", "failed"}
    (current,) = report["runs"]
    assert current["setup"] == "current"
    assert current["scores"] == {
        "questions": 3,
        "passed": 3,
        "failed": 0,
        "hit_at_1": 1.0,
        "hit_at_5": 1.0,
        "mrr_at_10": 1.0,
        "ndcg_at_10": 1.0,
    }
    outcome = current["outcomes"][1]
    assert set(outcome) == {
        "question",
        "expect",
        "rank",
        "first",
        "shown_must_not",
        "optional",
        "passed",
    }
    assert outcome["expect"] == {"document": None, "citation": "tax.md"}
    # another tenant holds nothing: every question fails
    code, report, _ = evaluated(kb, str(golden(tmp_path)), "--tenant", "elsewhere")
    assert code == 1 and all(o["rank"] is None for o in report["runs"][0]["outcomes"])


def flat(text: str) -> str:
    """A message as read, whatever width its box was wrapped at (a long path wraps)."""
    return " ".join(text.replace("│", " ").split())


def test_a_bad_golden_file_is_one_line(built: tuple[Path, Path], tmp_path: Path) -> None:
    kb, _ = built
    path = golden(tmp_path, "- question: Where?\n  expect: {document: a.md}\n- question: Q\n")
    done = run("eval", "--kb", str(kb), str(path), env=offline())
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "item 2 ('Q'): field 'expect': Field required" in flat(done.stderr)
    missing = run("eval", "--kb", str(kb), str(tmp_path / "nope.yaml"), env=offline())
    assert missing.returncode == 2 and "nope.yaml: file not found" in flat(missing.stderr)
    nothing = run("eval", "--kb", str(kb), env=offline())
    assert nothing.returncode == 2 and "golden questions (a YAML file" in flat(nothing.stderr)
    mixed = run("eval", "--kb", str(kb), str(path), "--baselines", env=offline())
    assert mixed.returncode == 2 and "knowledge base's own config" in flat(mixed.stderr)


def test_setups_side_by_side_and_the_ablation(built: tuple[Path, Path], tmp_path: Path) -> None:
    kb, _ = built
    # BM25 puts codes.md first ("boiler"), the dense signals tax.md ("penalty")
    text = GOLDEN + "- question: boiler penalty\n  expect: {document: codes.md}\n"
    (tmp_path / "first-stage.yaml").write_text("query:\n  reranker: none\n")
    (tmp_path / "tiny.yaml").write_text("ingest:\n  max_document_bytes: 10\n")
    code, report, _ = evaluated(
        kb,
        str(golden(tmp_path, text)),
        "--setup",
        "bm25",
        "--setup",
        str(tmp_path / "first-stage.yaml"),
        "--setup",
        str(tmp_path / "tiny.yaml"),
        "--ablate",
    )
    assert code == 0, report
    runs = {r["setup"]: r for r in report["runs"]}
    assert list(runs) == ["current", "bm25", "first-stage", "tiny"]
    assert runs["bm25"]["note"] == "re-indexed 6 documents"
    assert runs["first-stage"]["note"] == "query settings only: the same index"
    assert all(r["scores"]["questions"] == 4 for r in runs.values())
    # a setup whose index takes none of the documents says so, and answers nothing
    assert runs["tiny"]["note"].startswith("re-indexed 6 documents; 6 failed, the first: ")
    assert runs["tiny"]["scores"]["hit_at_5"] == 0
    rows = {row["signal"]: row for row in report["ablation"]}
    assert list(rows) == [
        "questions",
        "sentences",
        "chunk text",
        "learned",
        "BM25",
        "context",
        "reranker",
    ]
    base = runs["current"]["scores"]
    for name, row in rows.items():
        if name == "context":  # not matched at query time: no scores, a note
            assert row["scores"] is None and "not matched" in row["note"]
            continue
        assert row["scores"]["questions"] == 4
        assert row["ndcg_drop"] == pytest.approx(base["ndcg_at_10"] - row["scores"]["ndcg_at_10"])
    # an offline knowledge base has no LLM questions: switching them off changes nothing
    assert rows["questions"]["ndcg_drop"] == 0 and rows["questions"]["scores"] == base
    assert rows["learned"]["scores"] == base  # nor learned texts without feedback
    # without BM25 the part codes page no longer comes first
    assert rows["BM25"]["hit_at_1_drop"] > 0 and rows["BM25"]["scores"]["failed"] >= 1
    table = run("eval", "--kb", str(kb), str(golden(tmp_path, text)), "--ablate", env=offline())
    assert table.returncode == 0 and "Each signal switched off" in table.stdout


def test_generate_against_the_fake_llm(built: tuple[Path, Path], tmp_path: Path) -> None:
    kb, _ = built
    without = run("eval", "--kb", str(kb), "--generate", "3", env=offline())
    assert without.returncode == 2 and "--generate needs an LLM" in without.stderr
    with FakeLLMServer() as server:
        env = {
            **offline(),
            "FLEXMATCH_LLM": "openai/fake",
            "FLEXMATCH_LLM_API_BASE": server.base_url,
        }
        kept = tmp_path / "generated.yaml"
        code, report, said = evaluated(
            kb, "--generate", "3", "--seed", "7", "--write-golden", str(kept), env=env
        )
        asked = [
            r.body["messages"][-1]["content"]
            for r in server.requests_to()
            if "<passage>" in r.body["messages"][-1]["content"]
        ]
    assert len(asked) == 3 and all("has NOT read this passage" in p for p in asked)
    items = load_golden(kept)
    assert len(items) == 3 and "3 generated questions written" in said
    assert {i.expect.document for i in items} <= set(DOCS)
    assert [o["question"] for o in report["runs"][0]["outcomes"]] == [i.question for i in items]
    assert code == (1 if report["failed"] else 0)
    with FakeLLMServer() as server:
        env = {
            **offline(),
            "FLEXMATCH_LLM": "openai/fake",
            "FLEXMATCH_LLM_API_BASE": server.base_url,
        }
        again = tmp_path / "again.yaml"
        evaluated(kb, "--generate", "3", "--seed", "7", "--write-golden", str(again), env=env)
    assert load_golden(again) == items  # the same seed draws the same chunks


def test_whose_view_is_judged(tmp_path: Path) -> None:
    """``--as``: a question whose document the user may not read fails for them; a setup
    that re-indexes takes only the documents they may read."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    kb = tmp_path / "kb"
    assert run("init", str(kb)).returncode == 0
    config = kb / "flexmatch.yaml"
    rules = (
        "  default:\n    access: {public: true}\n"
        '    access_rules:\n      "tax.md": {principals: ["user:alice"]}\n'
    )
    config.write_text(config.read_text().replace("  default:\n", rules, 1))
    assert run("ingest", "--kb", str(kb), str(docs), env=offline()).returncode == 0
    path = golden(tmp_path)
    code, report, _ = evaluated(kb, str(path), "--as", "user:alice")
    assert code == 0 and report["failed"] == 0
    code, report, _ = evaluated(kb, str(path), "--as", "user:bob", "--setup", "bm25")
    mooring, tax, library = report["runs"][0]["outcomes"]
    assert code == 1 and tax["rank"] is None and mooring["passed"] and library["passed"]
    assert report["runs"][1]["note"] == "re-indexed 5 documents"
    assert report["runs"][1]["outcomes"][1]["rank"] is None


def test_a_generated_question_that_repeats_an_indexed_text_is_dropped(
    built: tuple[Path, Path],
) -> None:
    """A held-out question may not be one of its chunk's matching texts word for word
    (here: the LLM answers with the passage's first sentence, which the offline index
    holds as a sentence)."""

    def echo(messages: list[dict[str, Any]]) -> str:
        prompt = str(messages[-1]["content"])
        if "<passage>" not in prompt:
            return default_responder(messages)
        passage = prompt.split("<passage>", 1)[1].split("</passage>", 1)[0].strip()
        return json.dumps({"question": passage.split(". ")[0] + "."})

    kb, _ = built
    with FakeLLMServer() as server:
        server.responder = echo
        env = {
            **offline(),
            "FLEXMATCH_LLM": "openai/fake",
            "FLEXMATCH_LLM_API_BASE": server.base_url,
        }
        done = run("eval", "--kb", str(kb), "--generate", "2", "--seed", "3", env=env)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and "Traceback" not in said
    assert "wrote no usable question for 2 chunks" in said
    assert "2 repeated a text its chunk is indexed by, word for word" in said
