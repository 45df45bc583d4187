"""Ingest memory and disk: peak RSS, RSS over time and the knowledge base's disk use for
seeded samples of a folder (default /usr/share/doc), each ingested by a fresh child process
with the offline defaults.

For each sample size it prints: files, extracted text (bytes of the stored documents'
text), peak RSS of the child (``os.wait4``'s rusage), RSS sampled every second
(from /proc/PID/status), the knowledge base folder's real (allocated blocks) and apparent
size, their ratio, disk per extracted byte, and the largest files of the folder.

    nice -n 10 .venv/bin/python bench/footprint.py --sizes 150 300 600
    nice -n 10 .venv/bin/python bench/footprint.py --embedder hash --code /tmp/before

``--embedder hash`` stores vectors of the model's size without running it (the model's
session, ~0.2 GB, is then not in the figures); ``--code`` runs another checkout (before
and after a change, back to back).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CHILD = r"""
import json, sys
from pathlib import Path
from flexmatch import KnowledgeBase
kb_dir, docs, hashed = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "hash"
embedder = None
if hashed:  # the vectors' size and count of the real model, none of its time or memory
    from flexmatch.testing.embedder import HashEmbedder
    embedder = HashEmbedder(384)
with KnowledgeBase.open(kb_dir, env={}, embedder=embedder) as kb:
    report = kb.ingest([docs])
    text = 0
    for record in kb.list_documents():
        copy = kb.stored_copy(record.id)
        text += len(copy.text.encode("utf-8")) if copy else 0
import flexmatch
print(json.dumps({"flexmatch": flexmatch.__file__, "added": report.added,
                  "failed": len(report.failed), "chunks": report.chunks,
                  "matching_texts": report.matching_texts, "text_bytes": text,
                  "seconds": report.seconds}))
"""


def sample(root: Path, size: int, seed: int, target: Path) -> int:
    """``size`` regular files of ``root`` chosen with ``seed``, copied under ``target``;
    their total bytes."""
    files = sorted(
        p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and os.access(p, os.R_OK)
    )
    chosen = random.Random(seed).sample(files, min(size, len(files)))
    total = 0
    for path in chosen:
        copy = target / path.relative_to(root)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy)
        total += copy.stat().st_size
    return total


def du(path: Path, apparent: bool) -> int:
    args = ["du", "-s", "--block-size=1"] + (["--apparent-size"] if apparent else []) + [str(path)]
    return int(subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()[0])


def largest(path: Path, count: int = 8) -> list[tuple[str, int, int]]:
    """(file, real bytes, apparent bytes) of the folder's largest files by real use."""
    rows = []
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            stat = p.stat()
            rows.append((str(p.relative_to(path)), stat.st_blocks * 512, stat.st_size))
    return sorted(rows, key=lambda row: -row[1])[:count]


def rss_kb(pid: int) -> dict[str, int]:
    """VmRSS and its parts (RssAnon: heap and anonymous maps; RssFile: mapped file pages,
    which the kernel can drop and reread) in kB; empty once the process is gone."""
    found: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                found[key] = int(line.split()[1])
    except OSError:
        pass
    return found


def measure(
    root: Path, size: int, seed: int, embedder: str, code: Path | None
) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="flexmatch-footprint-") as folder:
        docs, kb_dir = Path(folder) / "docs", Path(folder) / "kb"
        docs.mkdir()
        kb_dir.mkdir()
        source_bytes = sample(root, size, seed, docs)
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(kb_dir), str(docs), embedder],
            stdout=subprocess.PIPE,
            text=True,
            cwd=folder,  # not this checkout's folder: ``--code`` decides what is imported
            env={**os.environ, "HF_HUB_OFFLINE": "1"} | ({"PYTHONPATH": str(code)} if code else {}),
        )
        samples: list[dict[str, int]] = []

        def watch() -> None:
            while (now := rss_kb(child.pid)).get("VmRSS"):
                samples.append(now)
                time.sleep(1.0)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        assert child.stdout is not None
        out = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not the largest so far
        child.returncode = os.waitstatus_to_exitcode(status)
        watcher.join()
        peak_kb = usage.ru_maxrss
        if child.returncode != 0:
            raise SystemExit(f"the ingest of {size} files failed ({child.returncode})")
        result = json.loads(out.strip().splitlines()[-1])
        state = kb_dir / ".flexmatch"
        real, apparent = du(state, False), du(state, True)
        text = int(result["text_bytes"]) or 1
        every = samples[:: max(1, len(samples) // 20)]
        return {
            "code": str(code or "."),
            "embedder": embedder,
            "files": size,
            "source_mb": round(source_bytes / 1e6, 2),
            **result,
            "peak_rss_mb": round(peak_kb / 1024),
            "rss_max_sampled_mb": round(max((s["VmRSS"] for s in samples), default=0) / 1024),
            "anon_max_sampled_mb": round(
                max((s.get("RssAnon", 0) for s in samples), default=0) / 1024
            ),
            "rss_timeline_mb": [round(s["VmRSS"] / 1024) for s in every],
            "anon_timeline_mb": [round(s.get("RssAnon", 0) / 1024) for s in every],
            "file_timeline_mb": [round(s.get("RssFile", 0) / 1024) for s in every],
            "disk_real_mb": round(real / 1e6, 2),
            "disk_apparent_mb": round(apparent / 1e6, 2),
            "apparent_over_real": round(apparent / real, 2),
            "disk_over_text": round(real / text, 2),
            "largest": largest(state),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/usr/share/doc"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[150, 300, 600])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--embedder",
        choices=["model", "hash"],
        default="model",
        help="model: the offline default; hash: 384-d hashed vectors (same store, no model)",
    )
    parser.add_argument("--code", type=Path, help="flexmatch checkout the child imports")
    args = parser.parse_args()
    for size in args.sizes:
        row = measure(args.root, size, args.seed, args.embedder, args.code)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
