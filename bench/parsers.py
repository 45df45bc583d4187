"""Our parsers against the document libraries a user would pick, on real files.

Why: FlexMatch carries its own parsing over pypdf, pdfminer.six and python-docx; a library
should replace it for a format where it reads more of the text or more of the structure,
at a speed and install size we can live with. This measures, per format family:

- word recall: the share of the reference text's words (counted with repeats) the output
  holds. The reference is the source's own text: ``pdftotext -layout`` for a PDF, the text
  nodes of the XML inside DOCX/PPTX/XLSX/ODT, the text parts of an e-mail, the characters
  outside tags for HTML, the file itself for Markdown, text and Python (RTF has none);
- structure kept: Markdown headings, table rows and list items in each output (and in
  the source, where the source says: Markdown and HTML);
- speed: files per second, the median of ``--runs`` timed runs per file;
- install size: what each library and its dependencies occupy in the candidates' venv.

The candidate libraries run in another interpreter (``--python``, a venv of their own so
the project's is not disturbed); FlexMatch runs in this one. Nothing downloads at run time.

    python3.11 -m venv /tmp/parsers-venv
    /tmp/parsers-venv/bin/pip install pdfplumber 'markitdown[pdf,docx,pptx,xlsx]' \
        kreuzberg docling-parse 'pymupdf4llm<2'  # 2.0 is an empty wheel
    .venv/bin/python bench/parsers.py --python /tmp/parsers-venv/bin/python
"""

from __future__ import annotations

import argparse
import email
import json
import re
import statistics
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections import Counter, defaultdict
from html.parser import HTMLParser
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "tests" / "data" / "docs"
TOOLS = ["flexmatch", "pdfplumber", "pymupdf4llm", "docling-parse", "markitdown", "kreuzberg"]
PDF_ONLY = {"pdfplumber", "pymupdf4llm", "docling-parse"}
DISTRIBUTIONS = {  # tool → the distribution whose dependency closure it installs
    "pdfplumber": "pdfplumber",
    "pymupdf4llm": "pymupdf4llm",  # AGPL-3.0 (PyMuPDF): not adoptable in an Apache project
    "docling-parse": "docling-parse",
    "markitdown": "markitdown",
    "kreuzberg": "kreuzberg",
}
_WORD = re.compile(r"\w+")
_HEADING = re.compile(r"^#{1,6} \S", re.MULTILINE)
_ROW = re.compile(r"^\s*\|(?!\s*:?-{3,}).*\|\s*$", re.MULTILINE)  # not the |---| line
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+\S", re.MULTILINE)

# Runs inside the candidates' interpreter: read file paths, print one JSON line per result.
CHILD = r"""
import json, sys, time, statistics, warnings, logging
from importlib import metadata
from pathlib import Path
warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)
request = json.loads(sys.stdin.read())
runs = request["runs"]

def pdfplumber_read(path):
    import pdfplumber
    parts = []
    with pdfplumber.open(path) as pdf:
        for page in pdf.pages:
            tables = page.find_tables()
            boxes = [t.bbox for t in tables]
            def outside(obj, boxes=boxes):
                return not any(b[0] <= obj["x0"] and obj["x1"] <= b[2] and b[1] <= obj["top"]
                               and obj["bottom"] <= b[3] for b in boxes)
            parts.append(page.filter(outside).extract_text() or "")
            for table in tables:
                rows = table.extract()
                parts.append("\n".join("| " + " | ".join((c or "").replace("\n", " ")
                                       for c in row) + " |" for row in rows))
    return "\n".join(parts)

def pymupdf4llm_read(path):
    import pymupdf4llm
    return pymupdf4llm.to_markdown(str(path), show_progress=False)

def docling_read(path):
    from docling_parse.pdf_parser import DoclingPdfParser
    parser = DoclingPdfParser(loglevel="fatal")
    document = parser.load(path_or_stream=str(path))
    lines = []
    for _, page in document.iterate_pages():
        for line in page.iterate_cells(unit_type=__import__(
                "docling_core.types.doc.page", fromlist=["TextCellUnit"]).TextCellUnit.LINE):
            lines.append(line.text)
    return "\n".join(lines)

_MARKITDOWN = []

def markitdown_read(path):
    from markitdown import MarkItDown
    if not _MARKITDOWN:  # one converter, as an application keeps it
        _MARKITDOWN.append(MarkItDown(enable_plugins=False))
    return _MARKITDOWN[0].convert(str(path)).text_content

def kreuzberg_read(path):
    import kreuzberg
    config = kreuzberg.ExtractionConfig(output_format="markdown", use_cache=False,
                                        disable_ocr=True)
    return kreuzberg.extract_file_sync(str(path), config=config).content

READERS = {"pdfplumber": pdfplumber_read, "pymupdf4llm": pymupdf4llm_read,
           "docling-parse": docling_read, "markitdown": markitdown_read,
           "kreuzberg": kreuzberg_read}

def closure_bytes(name):
    from packaging.requirements import Requirement
    seen, todo, total = set(), [name], 0
    while todo:
        dist_name = todo.pop().lower().replace("_", "-")
        if dist_name in seen:
            continue
        seen.add(dist_name)
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            continue
        for f in dist.files or []:
            try:
                total += f.locate().stat().st_size
            except OSError:
                pass
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return total, len(seen)

for tool in request["tools"]:
    read = READERS[tool]
    try:
        read.__call__  # import lazily below; a missing library is one line
        size, count = closure_bytes(request["distributions"][tool])
        print(json.dumps({"tool": tool, "install_bytes": size, "distributions": count,
                          "version": metadata.version(request["distributions"][tool])}))
    except Exception as exc:
        print(json.dumps({"tool": tool, "install_error": repr(exc)}))
    for path in request["files"]:
        if tool in request["pdf_only"] and not path.lower().endswith(".pdf"):
            continue
        times, text, error = [], "", ""
        for _ in range(runs):
            start = time.perf_counter()
            try:
                text = read(path) or ""
            except BaseException as exc:
                error = f"{type(exc).__name__}: {exc}"[:200]
                break
            times.append(time.perf_counter() - start)
        print(json.dumps({"tool": tool, "file": path, "text": text, "error": error,
                          "seconds": statistics.median(times) if times else None}), flush=True)
"""


def family(path: Path) -> str:
    """The format family a file is reported under."""
    suffix = path.suffix.lower().lstrip(".")
    if str(path).startswith("/usr/share/doc"):
        return "doc-html" if suffix in ("html", "htm") else "doc-text"
    if suffix in ("", "txt"):
        return "doc-text"
    return {"htm": "html", "py": "stdlib-py"}.get(suffix, suffix)


def corpus(sample: int) -> list[Path]:
    """The sample documents plus a real sample: /usr/share/doc HTML and text, stdlib."""
    files = sorted(
        p
        for p in DOCS.iterdir()
        if p.is_file() and p.suffix != ".tsv" and not p.name.startswith("LICENSE")
    )
    html, text = [], []
    for p in sorted(Path("/usr/share/doc").rglob("*")):
        if not p.is_file() or p.is_symlink() or p.stat().st_size < 200:
            continue
        if p.suffix in (".html", ".htm"):
            html.append(p)
        elif p.suffix in ("", ".txt") and p.name not in ("copyright",) and _is_text(p):
            text.append(p)
    stdlib = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    return files + _every(html, sample) + _every(text, sample) + _every(stdlib, sample // 2)


def _every(paths: list[Path], n: int) -> list[Path]:
    """n paths spread evenly over a sorted list (deterministic)."""
    if len(paths) <= n:
        return paths
    step = len(paths) / n
    return [paths[int(i * step)] for i in range(n)]


def _is_text(path: Path) -> bool:
    head = path.read_bytes()[:4096]
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\x00" not in head


class _HtmlText(HTMLParser):
    """Text outside tags, scripts and styles; counts headings, rows and list items."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.skip = 0
        self.tags: Counter[str] = Counter()

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self.skip += tag in ("script", "style")
        self.tags[tag] += 1

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in ("script", "style") and self.skip > 0

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def reference(path: Path) -> tuple[str | None, dict[str, int] | None]:
    """The source's own text (None where it has none) and its structure where it says."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        done = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True)
        return (done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None), None
    if suffix in (".html", ".htm"):
        parser = _HtmlText()
        parser.feed(path.read_bytes().decode("utf-8", "replace"))
        tags = parser.tags
        heads = sum(tags[f"h{i}"] for i in range(1, 7))
        return " ".join(parser.parts), {"headings": heads, "rows": tags["tr"], "items": tags["li"]}
    if suffix in (".docx", ".pptx", ".xlsx", ".odt"):
        return _office_text(path), None
    if suffix == ".eml":
        message = email.message_from_bytes(path.read_bytes())
        texts = [
            part.get_payload(decode=True).decode(part.get_content_charset() or "utf-8", "replace")
            for part in message.walk()
            if part.get_content_type() == "text/plain"
        ]
        return "\n".join(texts), None
    if suffix == ".rtf":
        return None, None
    text = path.read_bytes().decode("utf-8", "replace")
    if suffix == ".md":
        return text, structure(text)
    return text, None


def _office_text(path: Path) -> str:
    """Text nodes of the parts that hold an office file's body text."""
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        if path.suffix == ".docx":
            parts = ["word/document.xml"]
        elif path.suffix == ".pptx":
            parts = [n for n in names if re.fullmatch(r"ppt/slides/slide\d+\.xml", n)]
        elif path.suffix == ".odt":
            parts = ["content.xml"]
        else:
            strings = "xl/sharedStrings.xml"
            shared = archive.read(strings).decode() if strings in names else ""
            values = []
            for n in names:
                if n.startswith("xl/worksheets/sheet"):
                    sheet = archive.read(n).decode()
                    values += re.findall(r'<c [^>]*?(?<!t="s")>\s*<v>([^<]*)</v>', sheet)
            return re.sub(r"<[^>]+>", " ", shared) + " " + " ".join(values)
        xml = " ".join(archive.read(p).decode("utf-8", "replace") for p in parts if p in names)
    xml = re.sub(r"<w:tab/>|</w:p>|</a:p>|</text:p>|<text:s/>", " ", xml)
    return re.sub(r"<[^>]+>", "", xml)


def structure(text: str) -> dict[str, int]:
    """Markdown headings, table rows and list items in an output."""
    return {
        "headings": len(_HEADING.findall(text)),
        "rows": len(_ROW.findall(text)),
        "items": len(_ITEM.findall(text)),
    }


def recall(ref: str, out: str) -> float:
    """Share of the reference's words (with repeats) the output holds."""
    want = Counter(w.lower() for w in _WORD.findall(ref))
    have = Counter(w.lower() for w in _WORD.findall(out))
    total = sum(want.values())
    return sum(min(n, have[w]) for w, n in want.items()) / total if total else 1.0


def flexmatch_results(files: list[Path], runs: int) -> list[dict[str, object]]:
    """Our own parsers, rendered as Markdown the way chunks read them."""
    from flexmatch.inputs.parsing import parse_file

    def render(path: Path) -> str:
        lines = []
        for element in parse_file(path).elements:
            if element.kind in ("heading", "title"):
                lines.append("#" * max(element.level, 1) + " " + element.text)
            elif element.kind == "table":
                lines += ["| " + row + " |" for row in element.text.splitlines()]
            else:
                lines.append(element.text)
        return "\n".join(lines)

    results: list[dict[str, object]] = []
    for path in files:
        times, text, error = [], "", ""
        for _ in range(runs):
            start = time.perf_counter()
            try:
                text = render(path)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"[:200]
                break
            times.append(time.perf_counter() - start)
        results.append(
            {
                "tool": "flexmatch",
                "file": str(path),
                "text": text,
                "error": error,
                "seconds": statistics.median(times) if times else None,
            }
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="the candidates' interpreter")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per file (median)")
    parser.add_argument("--sample", type=int, default=150, help="files per real-sample kind")
    parser.add_argument("--tools", default=",".join(TOOLS[1:]), help="candidates to run")
    args = parser.parse_args()
    files = corpus(args.sample)
    tools = [t for t in args.tools.split(",") if t]
    request = {
        "runs": args.runs,
        "tools": tools,
        "files": [str(p) for p in files],
        "pdf_only": sorted(PDF_ONLY),
        "distributions": DISTRIBUTIONS,
    }
    env = {"DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [args.python, "-c", CHILD],
        input=json.dumps(request),
        text=True,
        capture_output=True,
        env=env,
    )
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    rows += flexmatch_results(files, args.runs)
    report(files, rows, ["flexmatch", *tools])


def report(files: list[Path], rows: list[dict[str, object]], tools: list[str]) -> None:
    """Print the per-family table and the install sizes (Markdown)."""
    refs = {str(p): reference(p) for p in files}
    fam = {str(p): family(p) for p in files}
    agg: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    ref_struct: dict[str, Counter[str]] = defaultdict(Counter)
    for path, (_, struct) in refs.items():
        if struct:
            ref_struct[fam[path]].update(struct)
    for row in rows:
        if "file" not in row:
            continue
        path, text = str(row["file"]), str(row["text"])
        cell = agg[(fam[path], str(row["tool"]))]
        cell["files"].append(1)
        if row["error"]:
            cell["failed"].append(1)
            text = ""
        else:
            cell["seconds"].append(float(row["seconds"]))  # type: ignore[arg-type]
        ref = refs[path][0]
        if ref is not None and ref.strip():
            cell["recall"].append(recall(ref, text))
        for key, n in structure(text).items():
            cell[key].append(n)
    families = sorted({fam[str(p)] for p in files})
    columns = ["read", "word recall", "headings", "table rows", "list items", "files/s"]
    print("| format (files) | parser | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for f in families:
        count = sum(1 for p in files if fam[str(p)] == f)
        if f in ref_struct:
            s = ref_struct[f]
            counts = f"{s['headings']} | {s['rows']} | {s['items']}"
            print(f"| {f} ({count}) | *source* | | | {counts} | |")
        for tool in tools:
            cell = agg.get((f, tool))
            if not cell:
                continue
            read = len(cell["files"]) - len(cell["failed"])
            rec = f"{statistics.mean(cell['recall']):.3f}" if cell["recall"] else "—"
            secs = sum(cell["seconds"])
            speed = f"{len(cell['seconds']) / secs:.0f}" if secs else "—"
            print(
                f"| {f} ({count}) | {tool} | {read}/{len(cell['files'])} | {rec} | "
                f"{sum(cell['headings']):.0f} | {sum(cell['rows']):.0f} | "
                f"{sum(cell['items']):.0f} | {speed} |"
            )
    print()
    print("| parser | version | installs (MB, with its dependencies) | distributions |")
    print("|---|---|---|---|")
    for row in rows:
        if "install_bytes" in row:
            print(
                f"| {row['tool']} | {row['version']} | "
                f"{int(row['install_bytes']) / 1e6:.0f} | {row['distributions']} |"
            )
        elif "install_error" in row:
            print(f"| {row['tool']} | not installed: {row['install_error']} | | |")
    failures = [r for r in rows if r.get("error")]
    if failures:
        print()
        for reason, n in Counter(
            (str(r["tool"]), fam[str(r["file"])], str(r["error"])[:80]) for r in failures
        ).most_common(25):
            print(f"- {reason[0]} on {reason[1]}: {reason[2]} ({n}×)")


if __name__ == "__main__":
    main()
