"""Does a code result point to the function that answers? Questions about standard-library
functions, asked of the offline default configuration over a seeded sample of the
standard library.

Protocol. ``QUESTIONS`` were written before any query was run: each is a question a
developer would ask, with the file that answers it and the function (or class) that does.
The sample is every answer file plus other ``*.py`` files of ``--stdlib`` drawn with a
fixed seed (no tests, no ``site-packages``), ``--files`` in all, copied into one folder and
ingested with ``KBConfig()`` (the offline default: no LLM). A question's top result is
right when it comes from the answer file and holds the answering definition: its
``def``/``class`` line is in the chunk, or its heading path names the symbol (a later piece
of a long definition). Printed: top-1 right file, top-1 right function, and the function
in the top 5, with every miss and what came first instead.

Run:  .venv/bin/python bench/code_citations.py [--files 150] [--seed 7] [--stdlib PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from flexmatch.config import KBConfig
from flexmatch.knowledge_base import KnowledgeBase
from flexmatch.models import SearchResult


@dataclass(frozen=True)
class Question:
    text: str
    file: str  # relative to the standard library's folder
    symbol: (
        str  # the answering definition: ``get_content_charset``, ``Message.get_content_charset``
    )


# Written before the first query was run; not tuned afterwards.
QUESTIONS = [
    Question(
        "how do I get the charset of an email message",
        "email/message.py",
        "Message.get_content_charset",
    ),
    Question("copy a file together with its permission bits and timestamps", "shutil.py", "copy2"),
    Question("find the longest common sub-path of several paths", "posixpath.py", "commonpath"),
    Question("remove common leading whitespace from every line of a text", "textwrap.py", "dedent"),
    Question("compute the median of a list of numbers", "statistics.py", "median"),
    Question(
        "escape a string so it can be used safely in a shell command line", "shlex.py", "quote"
    ),
    Question("parse a URL query string into a dictionary of lists", "urllib/parse.py", "parse_qs"),
    Question("check whether a file name matches a shell wildcard pattern", "fnmatch.py", "fnmatch"),
    Question("get the n largest elements of a dataset", "heapq.py", "nlargest"),
    Question("compare two lists of lines and produce a unified diff", "difflib.py", "unified_diff"),
    Question(
        "find the words in a list that are close matches of a misspelled word",
        "difflib.py",
        "get_close_matches",
    ),
    Question(
        "turn a datetime into an RFC 2822 date string for an email header",
        "email/utils.py",
        "format_datetime",
    ),
    Question(
        "split an email address header into the display name and the address",
        "email/utils.py",
        "parseaddr",
    ),
    Question("guess the MIME type of a file from its name", "mimetypes.py", "guess_type"),
    Question("walk a directory tree yielding the folders and file names in each", "os.py", "walk"),
    Question("compute the relative path from one directory to another", "posixpath.py", "relpath"),
    Question(
        "base64 encode bytes with the URL and filename safe alphabet",
        "base64.py",
        "urlsafe_b64encode",
    ),
    Question("split a string into tokens the way a shell does", "shlex.py", "split"),
    Question(
        "read a boolean option from an INI configuration file",
        "configparser.py",
        "RawConfigParser.getboolean",
    ),
    Question("how many days are in a given month of a year", "calendar.py", "monthrange"),
    Question(
        "create a temporary directory that is deleted when I am done with it",
        "tempfile.py",
        "TemporaryDirectory",
    ),
    Question("insert an item into a sorted list keeping it sorted", "bisect.py", "insort_right"),
]

_SKIP = re.compile(r"(^|/)(tests?|test_\w+\.py|idle_test|site-packages|dist-packages|__pycache__)")


def sample(stdlib: Path, files: int, seed: int) -> list[str]:
    """The answer files, then other files of ``stdlib`` drawn with ``seed``, ``files`` in
    all (relative paths, sorted)."""
    answers = sorted({q.file for q in QUESTIONS})
    others = sorted(
        path.relative_to(stdlib).as_posix()
        for path in stdlib.rglob("*.py")
        if not _SKIP.search(path.relative_to(stdlib).as_posix())
    )
    others = [name for name in others if name not in answers]
    drawn = random.Random(seed).sample(others, max(0, files - len(answers)))
    return sorted([*answers, *drawn])


def holds(result: SearchResult, question: Question) -> bool:
    """The result is the answering definition: its ``def``/``class`` line is in the chunk,
    or its heading path names it (a later piece of a long definition)."""
    name = question.symbol.rsplit(".", 1)[-1]
    if not result.uri.endswith("/" + question.file):
        return False
    if re.search(rf"^\s*(async\s+def|def|class)\s+{re.escape(name)}\b", result.content, re.M):
        return True
    return any(re.search(rf"\b{re.escape(name)}\b", part) for part in result.heading_path[1:])


def where(result: SearchResult) -> str:
    return f"{result.cite} [{' › '.join(result.heading_path[1:]) or 'module'}]"


def signals(result: SearchResult) -> str:
    s = result.signals
    return (
        f"dense {s.dense or 0:.3f} (#{s.dense_rank}) lexical {s.lexical or 0:.2f} "
        f"(#{s.lexical_rank}) first {s.first_stage or 0:.3f} rerank {s.rerank or 0:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=150)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--explain", action="store_true", help="for a miss: each signal of the first and the right"
    )
    parser.add_argument(
        "--stdlib",
        type=Path,
        default=Path(f"/usr/lib/python{sys.version_info[0]}.{sys.version_info[1]}"),
    )
    parser.add_argument(
        "--keep", type=Path, help="keep the knowledge base here; one already there is queried"
    )
    args = parser.parse_args()
    names = sample(args.stdlib, args.files, args.seed)
    work = Path(tempfile.mkdtemp(prefix="flexmatch-code-citations-"))
    try:
        corpus = work / "stdlib"
        for name in names:
            target = corpus / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(args.stdlib / name, target)
        kb_dir = args.keep or work / "kb"
        fresh = not kb_dir.exists()
        with KnowledgeBase.open(kb_dir, config=KBConfig(), env={}) as kb:
            if fresh:
                started = time.perf_counter()
                report = kb.ingest([corpus])
                ingest_s = time.perf_counter() - started
                print(f"{len(names)} files, {report.chunks} chunks, ingest {ingest_s:.0f}s")
            file_hits = function_hits = top5 = 0
            for question in QUESTIONS:
                results = asyncio.run(kb.aquery(question.text, top_n=10 if args.explain else 5))
                first = results[0] if results else None
                right_file = first is not None and first.uri.endswith("/" + question.file)
                right = first is not None and holds(first, question)
                file_hits += right_file
                function_hits += right
                top5 += any(holds(r, question) for r in results[:5])
                if not right:
                    got = where(first) if first else "nothing"
                    print(f"  miss: {question.text!r} ({question.symbol}): first {got}")
                    if args.explain and first is not None:
                        rank = next((i for i, r in enumerate(results) if holds(r, question)), None)
                        print(f"    first: {signals(first)}")
                        if rank is not None:
                            print(f"    right (#{rank + 1}): {signals(results[rank])}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = len(QUESTIONS)
    print(
        f"top-1 right file {file_hits}/{total}, top-1 right function {function_hits}/{total}, "
        f"function in top 5 {top5}/{total}"
    )


if __name__ == "__main__":
    main()
