"""Source code and config files through tree-sitter: every language's definitions become
headings at their depth (the symbol path), their code stays whole, nothing is lost."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from flexmatch.errors import EmptyDocumentError, MissingExtraError, ParseError
from flexmatch.inputs.parsing import SUPPORTED_SUFFIXES, parse_file
from flexmatch.inputs.parsing.code import LANGUAGES, grammars, outline, symbol_name
from flexmatch.models import ParsedDocument

PYTHON = '''"""Tools for greeting."""
import os

LIMIT = 3


@cache
def greet(name: str) -> str:
    """Say hello to someone. Used by the CLI."""
    return f"hello {name}"


class Greeter(Base):
    """Greets many people."""

    loud = False

    # the one method that matters
    def run(self, names):
        for name in names:
            print(greet(name))

    async def close(self):
        pass


if __name__ == "__main__":
    greet(os.environ["USER"])
'''

# (file name, source, the headings expected: level and text, in reading order)
SAMPLES: list[tuple[str, str, list[tuple[int, str]]]] = [
    (
        "greet.py",
        PYTHON,
        [
            (0, "greet.py"),
            (1, "def greet"),
            (1, "class Greeter"),
            (2, "def run"),
            (2, "async def close"),
            (0, "greet.py"),
        ],
    ),
    (
        "shapes.js",
        "import x from 'y';\n/** Adds two numbers. */\nfunction add(a, b) { return a + b; }\n"
        "const mul = (a, b) => a * b;\nexport class Shape extends Base {\n  area() { return 0; }\n"
        "  static unit() { return new Shape(); }\n}\nexport default function main() {}\n",
        [
            (0, "shapes.js"),
            (1, "function add"),
            (1, "const mul"),
            (1, "class Shape"),
            (2, "method area"),
            (2, "method unit"),
            (1, "function main"),
        ],
    ),
    (
        "shapes.ts",
        "interface Shape { area(): number; }\ntype Id = string;\nenum Color { Red }\n"
        "export function area(s: Shape): number { return s.area(); }\n"
        "class Square implements Shape {\n  constructor(private n: number) {}\n"
        "  area(): number { return this.n * this.n; }\n}\n"
        "namespace Geometry { export function origin() { return 0; } }\n",
        [
            (0, "shapes.ts"),
            (1, "interface Shape"),
            (1, "type Id"),
            (1, "enum Color"),
            (1, "function area"),
            (1, "class Square"),
            (2, "method constructor"),
            (2, "method area"),
            (1, "namespace Geometry"),
            (2, "function origin"),
        ],
    ),
    (
        "view.tsx",
        "export function Hello({ name }: { name: string }) {\n"
        "  return <div>Hello {name}</div>;\n}\n",
        [(0, "view.tsx"), (1, "function Hello")],
    ),
    (
        "server.go",
        'package main\n\nimport "fmt"\n\n// Hello says hi.\nfunc Hello(name string) string {\n'
        '\treturn fmt.Sprintf("hi %s", name)\n}\n\ntype Server struct {\n\tAddr string\n}\n\n'
        "// Start starts the server.\nfunc (s *Server) Start() error {\n\treturn nil\n}\n",
        [
            (0, "server.go"),
            (1, "func Hello"),
            (1, "type Server"),
            (1, "func (s *Server) Start"),
        ],
    ),
    (
        "Store.java",
        "package a.b;\n\nimport java.util.List;\n\n/** Keeps items. */\npublic class Store {\n"
        "  private int size;\n\n  /** Adds one item. */\n"
        "  public void add(String item) { size++; }\n\n"
        "  public Store() {}\n\n  interface Listener { void changed(); }\n\n"
        "  static class Entry {\n    int weight() { return 1; }\n  }\n}\n",
        [
            (0, "Store.java"),
            (1, "class Store"),
            (2, "method add"),
            (2, "constructor Store"),
            (2, "interface Listener"),
            (2, "class Entry"),
            (3, "method weight"),
        ],
    ),
    (
        "point.rs",
        "use std::fmt;\n\n/// A point on a plane.\n#[derive(Debug)]\n"
        "pub struct Point { x: i32 }\n\nimpl Point {\n    /// Makes a point at the origin.\n"
        "    pub fn origin() -> Self { Point { x: 0 } }\n}\n\n"
        "impl fmt::Display for Point {\n    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result "
        '{ write!(f, "p") }\n}\n\ntrait Shape { fn area(&self) -> f64; }\n\n'
        "mod util { pub fn clamp() {} }\n",
        [
            (0, "point.rs"),
            (1, "struct Point"),
            (1, "impl Point"),
            (2, "fn origin"),
            (1, "impl fmt::Display for Point"),
            (2, "fn fmt"),
            (1, "trait Shape"),
            (1, "mod util"),
            (2, "fn clamp"),
        ],
    ),
    (
        "list.c",
        "#include <stdio.h>\n#define MAX 10\n\n/* Adds two numbers. */\nint add(int a, int b) "
        "{ return a + b; }\n\nstruct node { int value; };\n\ntypedef struct { int y; } pair;\n\n"
        "static int count = 0;\n\nint *first(struct node *n) { return &n->value; }\n",
        [
            (0, "list.c"),
            (1, "function add"),
            (1, "struct node"),
            (1, "typedef pair"),
            (0, "list.c"),
            (1, "function first"),
        ],
    ),
    (
        "guard.h",
        "#ifndef GUARD_H\n#define GUARD_H\n\nint twice(int x) { return 2 * x; }\n\n#endif\n",
        [(0, "guard.h"), (1, "function twice"), (0, "guard.h")],  # then its #endif
    ),
    (
        "shapes.cpp",
        "#include <vector>\nnamespace geo {\nclass Circle {\n public:\n  double area() const "
        "{ return 3.14 * r * r; }\n private:\n  double r;\n};\nvoid Circle::grow() {}\n"
        "template <typename T> T twice(T x) { return x + x; }\n}\nint main() { return 0; }\n",
        [
            (0, "shapes.cpp"),
            (1, "namespace geo"),
            (2, "class Circle"),
            (3, "function area"),
            (2, "class Circle"),  # back in the class: its private members
            (2, "function Circle::grow"),
            (2, "function twice"),
            (1, "function main"),
        ],
    ),
    (
        "deploy.sh",
        "#!/bin/bash\n# Build the site.\nbuild() {\n  make all\n}\n\nfunction clean {\n"
        "  rm -rf out\n}\n\nbuild\n",
        [(0, "deploy.sh"), (1, "function build"), (1, "function clean"), (0, "deploy.sh")],
    ),
    (
        "config.yaml",
        "# service settings\nname: demo\nserver:\n  host: localhost\n  port: 8080\n"
        "features:\n  - search\n",
        [(0, "config.yaml"), (1, "name"), (1, "server"), (1, "features")],
    ),
    (
        "pyproject.toml",
        'title = "demo"\n\n[server]\nhost = "localhost"\n\n[[workers]]\nname = "a"\n\n'
        "[tool.ruff]\nline-length = 100\n",
        [(0, "pyproject.toml"), (1, "[server]"), (1, "[[workers]]"), (1, "[tool.ruff]")],
    ),
    (
        "package.json",
        '{\n  "name": "demo",\n  "scripts": {"test": "jest"},\n  "dependencies": {"x": "1"}\n}\n',
        [(0, "package.json"), (1, "name"), (1, "scripts"), (1, "dependencies")],
    ),
]


def _parse(tmp_path: Path, name: str, source: str) -> ParsedDocument:
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    return parse_file(path)


def _headings(doc: ParsedDocument) -> list[tuple[int, str]]:
    return [(e.level, e.text) for e in doc.elements if e.kind in ("title", "heading")]


@pytest.mark.parametrize(("name", "source", "expected"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_each_language_gives_its_symbol_path(
    tmp_path: Path, name: str, source: str, expected: list[tuple[int, str]]
) -> None:
    doc = _parse(tmp_path, name, source)
    assert doc.title == name
    assert doc.metadata["language"] == LANGUAGES[Path(name).suffix]
    assert _headings(doc) == expected
    assert all(e.kind in ("title", "heading", "code") for e in doc.elements)
    # nothing is lost or moved: the code elements hold every word of the file, in order
    code = "\n".join(e.text for e in doc.elements if e.kind == "code")
    assert re.findall(r"\w+", code) == re.findall(r"\w+", source)


def test_every_listed_suffix_is_supported() -> None:
    wanted = ".py .js .mjs .cjs .jsx .ts .tsx .go .java .rs .c .h .cc .cpp .hpp .cxx .sh .bash"
    assert set((wanted + " .yaml .yml .toml .json").split()) <= SUPPORTED_SUFFIXES


def test_python_definitions_keep_decorators_comments_and_docstrings(tmp_path: Path) -> None:
    doc = _parse(tmp_path, "greet.py", PYTHON)
    texts = [e.text for e in doc.elements]
    greet = texts[texts.index("def greet") + 1]
    assert greet.startswith("@cache\ndef greet(name: str) -> str:")
    assert '"""Say hello to someone. Used by the CLI."""' in greet
    greeter = texts[texts.index("class Greeter") + 1]
    assert greeter == 'class Greeter(Base):\n    """Greets many people."""\n\n    loud = False'
    run = texts[texts.index("def run") + 1]  # dedented, with the comment above it
    assert run.startswith("# the one method that matters\ndef run(self, names):\n    for name")
    module = texts[1]
    assert module.startswith('"""Tools for greeting."""') and "LIMIT = 3" in module
    assert texts[-2:] == ["greet.py", 'if __name__ == "__main__":\n    greet(os.environ["USER"])']


def test_outline_finds_signatures_and_docs() -> None:
    found = outline(PYTHON, "python")
    assert found.doc == "Tools for greeting."
    symbols = {(tuple(parents), d.name): d for parents, d in found.walk()}
    greet = symbols[((), "greet")]
    assert greet.signature == "def greet(name: str) -> str"
    assert greet.doc == "Say hello to someone. Used by the CLI."
    run = symbols[(("Greeter",), "run")]
    assert run.signature == "def run(self, names)" and run.doc == "the one method that matters"
    go = outline("// Hello says hi\n// to a name.\nfunc Hello(n string) string { return n }", "go")
    assert go.definitions[0].doc == "Hello says hi\nto a name."
    assert go.definitions[0].signature == "func Hello(n string) string"
    java = outline(
        "class A {\n  /**\n   * Adds one item.\n   */\n  void add(\n String item\n) { }\n}", "java"
    )
    add = java.definitions[0].children[0]
    assert (add.doc, add.signature) == ("Adds one item.", "void add(String item)")
    rust = outline("/// Makes a point.\n#[inline]\npub fn origin() -> Point { Point {} }", "rust")
    assert rust.definitions[0].doc == "Makes a point."
    assert rust.definitions[0].signature == "pub fn origin() -> Point"
    assert symbol_name("async def close", "python") == "close"
    assert symbol_name("impl fmt::Display for Point", "rust") == "fmt::Display for Point"


def test_code_between_definitions_is_filed_under_its_scope(tmp_path: Path) -> None:
    doc = _parse(tmp_path, "shapes.cpp", SAMPLES[9][1])
    kinds = [(e.kind, e.text) for e in doc.elements]
    private = kinds.index(("heading", "function Circle::grow")) - 1
    assert "private:" in kinds[private][1] and kinds[private - 1] == ("heading", "class Circle")


def test_a_file_without_definitions_is_one_piece_of_code(tmp_path: Path) -> None:
    doc = _parse(tmp_path, "run.sh", "#!/bin/sh\nset -e\nmake test\n")
    assert [(e.kind, e.text) for e in doc.elements] == [
        ("title", "run.sh"),
        ("code", "#!/bin/sh\nset -e\nmake test"),
    ]


def test_empty_and_binary_code_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(EmptyDocumentError, match=r"blank\.py"):
        _parse(tmp_path, "blank.py", "\n\n   \n")
    with pytest.raises(EmptyDocumentError, match=r"empty\.json"):
        _parse(tmp_path, "empty.json", "{}\n")
    (tmp_path / "blob.go").write_bytes(b"\x00\x01\x02package main")
    with pytest.raises(ParseError, match=r"blob\.go: looks like a binary file"):
        parse_file(tmp_path / "blob.go")


def test_syntax_errors_still_give_the_code(tmp_path: Path) -> None:
    doc = _parse(tmp_path, "broken.py", "def ok():\n    return 1\n\ndef broken(:\n    pass\n")
    assert ("heading", "def ok") in [(e.kind, e.text) for e in doc.elements]
    assert "def broken(:" in "\n".join(e.text for e in doc.elements)


def test_a_missing_extra_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    monkeypatch.setitem(sys.modules, "tree_sitter_language_pack", None)  # not installed
    grammars._language.cache_clear()
    try:
        with pytest.raises(MissingExtraError, match=r"'code' extra.*flexmatch\[code\]"):
            parse_file(path)
    finally:
        grammars._language.cache_clear()
