"""Cost proportional to the change: what a re-ingest of an edited document costs against
its first ingest.

1. A 20-section Markdown document, ingested with the LLM chains (questions, context)
   against the fake LLM server (``python -m flexmatch.testing.fake_llm`` on loopback),
   then again with one section's body edited: the LLM calls and chunk answers asked
   (target: at most 2), the matching texts embedded (target: at most the changed chunk's
   texts plus 2) and reused.
2. A generated HTML page of ~3,000 matching texts, ingested with the offline defaults
   (no LLM: the packaged embedding model), then again after a one-character fix: the
   second ingest's time against the first's (target: under 10 %).

Run:  .venv/bin/python bench/incremental.py [--sections 340] [--html PAGE.html]
Not a test: times vary with the machine's load; the counts do not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from flexmatch import KnowledgeBase
from flexmatch.engine.embedders import OnnxEmbedder
from flexmatch.models import IngestReport

WORDS = [
    "harbour",
    "pilot",
    "berth",
    "tide",
    "crane",
    "cargo",
    "manifest",
    "customs",
    "shed",
    "quay",
    "tug",
    "buoy",
    "channel",
    "dredging",
    "ballast",
    "mooring",
    "bollard",
    "fender",
    "draught",
    "gantry",
    "reefer",
    "lashing",
    "stevedore",
    "bunker",
    "hawser",
    "winch",
    "slipway",
    "breakwater",
    "lighthouse",
    "beacon",
    "ferry",
]


def sentence(seed: int, length: int = 12) -> str:
    """A deterministic sentence of harbour words (no two sections alike)."""
    picks = hashlib.blake2b(str(seed).encode(), digest_size=length).digest()
    words = [WORDS[byte % len(WORDS)] for byte in picks]
    return f"{words[0].capitalize()} {' '.join(words[1:])} number {seed}."


def markdown(sections: int, edited: int | None = None) -> str:
    parts = ["# Port operations handbook\n\nHow the port runs, one section per berth.\n"]
    for number in range(sections):
        body = " ".join(sentence(number * 10 + k) for k in range(6))
        if number == edited:
            body = body.replace(sentence(number * 10 + 3), "Tugs now escort every tanker.")
        parts.append(f"## Berth {number}\n\n{body}\n")
    return "\n".join(parts)


def html(sections: int, fix: bool = False) -> str:
    parts = ["<html><head><title>Port reference</title></head><body><h1>Port reference</h1>"]
    for number in range(sections):
        parts.append(f"<h2>Berth {number}</h2>")
        for paragraph in range(2):
            seed = number * 100 + paragraph * 10
            text = " ".join(sentence(seed + k) for k in range(4))
            if fix and number == sections // 2 and paragraph == 1:
                text = text.replace("number", "numbr", 1)  # the one-character fix
            parts.append(f"<p>{text}</p>")
    return "\n".join(parts) + "</body></html>\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fake_llm() -> tuple[subprocess.Popen[bytes], str]:
    """The fake LLM server as its own process on loopback, once it answers."""
    port = free_port()
    command = [sys.executable, "-m", "flexmatch.testing.fake_llm", "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            stats(root)
            return process, root
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the fake LLM server did not start")


def stats(root: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{root}/stats", timeout=5) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def asked(report: IngestReport, chains: int = 2) -> int:
    """Chunk answers asked of the LLM: every chunk's answer from each LLM chain, less
    those the cache gave."""
    return report.chunks * chains - report.usage.cached_calls


def markdown_case(folder: Path, embedder: OnnxEmbedder, root: str) -> dict[str, object]:
    page = folder / "handbook.md"
    page.write_text(markdown(20), encoding="utf-8")
    (folder / "kb").mkdir()
    config = f"models:\n  llm: openai/fake\n  llm_api_base: {root}/v1\n  llm_api_key: k\n"
    (folder / "kb" / "flexmatch.yaml").write_text(config, encoding="utf-8")
    with KnowledgeBase.open(folder / "kb", embedder=embedder, env={}) as kb:
        calls = stats(root)["calls"]
        first = kb.ingest([page])
        first_calls = stats(root)["calls"] - calls
        page.write_text(markdown(20, edited=12), encoding="utf-8")
        calls = stats(root)["calls"]
        second = kb.ingest([page])
        second_calls = stats(root)["calls"] - calls
        (record,) = kb.list_documents()
        detail = kb.get_document(record.id)
        assert detail is not None
        changed = next(c for c in detail.chunks if c.heading_path[-1:] == ["Berth 12"])
    return {
        "chunks": first.chunks,
        "first": {
            "llm_calls": first_calls,
            "chunk_answers_asked": asked(first),
            "texts_embedded": first.texts_embedded,
        },
        "edit": {
            "llm_calls": second_calls,
            "chunk_answers_asked": asked(second),
            "texts_embedded": second.texts_embedded,
            "texts_reused": second.texts_reused,
            "changed_chunk_texts": len(changed.matching_texts),
        },
        "targets_met": asked(second) <= 2
        and second.texts_embedded <= len(changed.matching_texts) + 2,
    }


def html_case(folder: Path, embedder: OnnxEmbedder, sections: int, page: Path | None) -> dict:
    if page is None:
        page = folder / "reference.html"
        page.write_text(html(sections), encoding="utf-8")
        fix = html(sections, fix=True)
    else:
        original = page.read_text(encoding="utf-8")
        page = folder / page.name
        page.write_text(original, encoding="utf-8")
        middle = original.index("<p>", len(original) // 2) + 3  # a letter of a paragraph
        fix = original[:middle] + ("X" if original[middle] != "X" else "Y") + original[middle + 1 :]
    with KnowledgeBase.open(folder / "kb-html", embedder=embedder, env={}) as kb:
        started = time.perf_counter()
        first = kb.ingest([page])
        first_seconds = time.perf_counter() - started
        page.write_text(fix, encoding="utf-8")
        started = time.perf_counter()
        second = kb.ingest([page])
        second_seconds = time.perf_counter() - started
    return {
        "matching_texts": first.matching_texts,
        "first_seconds": round(first_seconds, 2),
        "fix_seconds": round(second_seconds, 2),
        "ratio": round(second_seconds / first_seconds, 3),
        "fix_texts_embedded": second.texts_embedded,
        "fix_texts_reused": second.texts_reused,
        "targets_met": second.changed == 1 and second_seconds < 0.1 * first_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", type=int, default=340, help="of the generated page")
    parser.add_argument("--html", type=Path, help="a real HTML page instead of the generated")
    args = parser.parse_args()
    embedder = OnnxEmbedder()
    embedder.embed(["warm up"])  # the model's load is no part of either ingest
    process, root = fake_llm()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            results = {
                "markdown_20_sections": markdown_case(folder, embedder, root),
                "html_one_character_fix": html_case(folder, embedder, args.sections, args.html),
            }
    finally:
        process.terminate()
        process.wait(timeout=10)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
