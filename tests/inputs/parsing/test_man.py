"""Man pages are untrusted input: roff's ways to read a file or an environment variable
reach nothing of the server, and real pages still parse."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from flexmatch.errors import ParseError
from flexmatch.inputs.parsing import confined, man, parse_file
from flexmatch.inputs.parsing.confined import landlock_available

pytestmark = pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")

SECRET = "S3CRET-in-a-file"
ENV_SECRET = "S3CRET-in-the-environment"

HEAD = ".TH EVIL 1\n.SH NAME\nevil \\- a page that reads what it may not\n.SH DESCRIPTION\n"
MDOC_HEAD = ".Dd March 1, 2024\n.Dt EVIL 1\n.Os\n.Sh NAME\n.Nm evil\n.Nd reads\n.Sh DESCRIPTION\n"

# each trick, given the path of the secret file (F): what the page says after its head
# (.trf is removed too, but groff's plain-text output never shows what it copies)
TRICKS = {
    "so": ".so {F}\n",
    "mso": ".mso {F}\n",
    "cf": ".cf {F}\n",
    "nx": ".nx {F}\n",
    "string into so": ".ds F {F}\n.so \\*F\n",
    "alias of so": ".als include so\n.include {F}\n",
    "renamed cf": ".rn cf copy\n.copy {F}\n",
    "escape character changed": ".ec !\n.so {F}\n.ec\n",
    "control character changed": ".cc ,\n,so {F}\n,cc .\n",
    "macro that includes": ".de inc\n.so \\\\$1\n..\n.inc {F}\n",
    "so through do": ".do so {F}\n",
    "request named by a string": ".ds x so\n.\\*x {F}\n",
    "environment by proc": ".so /proc/self/environ\n",
    "environment variable": "home \\V[FLEXMATCH_TEST_SECRET] end\n",
    "environment through string": ".ds E \\V[FLEXMATCH_TEST_SECRET]\n\\*E\n",
}


@pytest.fixture
def secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file holding a secret, and an environment variable holding another."""
    monkeypatch.setenv("FLEXMATCH_TEST_SECRET", ENV_SECRET)
    path = tmp_path / "secret" / "flexmatch.yaml"
    path.parent.mkdir()
    path.write_text(f"metrics_token: {SECRET}\n.SH LEAKED\n{SECRET}\n")
    return path


@pytest.mark.parametrize("trick", list(TRICKS))
def test_a_man_page_reads_no_file_and_no_environment(
    tmp_path: Path, secret: Path, trick: str
) -> None:
    page = tmp_path / "evil.1"
    page.write_text(HEAD + "before\n" + TRICKS[trick].format(F=secret) + "after\n")
    text = parse_file(page).text
    assert "before" in text and SECRET not in text and ENV_SECRET not in text
    assert "LEAKED" not in text


def test_an_mdoc_page_includes_no_file(tmp_path: Path, secret: Path) -> None:
    page = tmp_path / "evil.1"
    page.write_text(MDOC_HEAD + "before\n.Bd -literal -file " + str(secret) + "\n.Ed\nafter\n")
    text = parse_file(page).text
    assert "before" in text and "after" in text and SECRET not in text


def test_an_mdoc_page_still_parses(tmp_path: Path) -> None:
    page = tmp_path / "frob.1"
    page.write_text(MDOC_HEAD + "The\n.Nm\nutility twiddles bits.\n.Sh SEE ALSO\n.Xr ls 1\n")
    doc = parse_file(page)
    assert [e.text for e in doc.elements if e.kind == "heading"] == [
        "NAME",
        "DESCRIPTION",
        "SEE ALSO",
    ]
    assert "evil utility twiddles bits." in doc.text and "ls(1)" in doc.text


@pytest.mark.parametrize("page", ["man1/ls.1.gz", "man1/bash.1.gz", "man1/file.1.gz"])
def test_real_man_pages_still_parse(tmp_path: Path, page: str) -> None:
    source = Path("/usr/share/man") / page
    if not source.is_file():
        pytest.skip(f"no {source} here")
    copy = tmp_path / source.name
    shutil.copy(source, copy)
    doc = parse_file(copy)
    headings = [e.text for e in doc.elements if e.kind == "heading" and e.level == 2]
    assert headings[:2] == ["NAME", "SYNOPSIS"] and "DESCRIPTION" in headings
    assert len(doc.text) > 1000


@pytest.mark.parametrize(
    "select",
    [".ft {F}\n", ".fp 5 {F}\n", "text \\f[{F}]bold\\fR\n", ".ds P {F}\n.ft \\*P\n"],
)
def test_a_font_named_by_a_path_quotes_no_file_in_the_error(
    tmp_path: Path, secret: Path, select: str
) -> None:
    """groff 1.22 opens a font named by a relative path, and its complaints about what it
    read quote the file (``unrecognised ligature 'WORD'``): they are never shown."""
    font = secret.parent / "ligfile"
    font.write_text(f"ligatures {SECRET} 0\ncharset\n{SECRET} x\n")
    climb = "../" * 12 + str(font).lstrip("/")
    page = tmp_path / "fonts.1"
    page.write_text(select.format(F=climb) + ".ab\n" + HEAD + "body\n")
    with pytest.raises(ParseError) as raised:
        parse_file(page)
    assert SECRET not in str(raised.value) and "groff could not render" in str(raised.value)
    page.write_text(HEAD + "before\n" + select.format(F=climb) + "after\n")
    assert SECRET not in parse_file(page).text


@pytest.mark.skipif(not landlock_available(), reason="this kernel has no Landlock")
def test_groff_is_confined_to_the_system_and_its_own_folder(tmp_path: Path, secret: Path) -> None:
    """A font named by a path still opens a file in groff 1.22: confined, it opens
    nothing outside the system's programs and data, so a page can neither test whether
    a file exists nor read a font file's numbers."""
    font = secret.parent / "font"
    font.write_text("name font\nspacewidth 4242\ncharset\nQ 24 0 0x0041\n")
    climb = "../" * 12 + str(font).lstrip("/")
    page = tmp_path / "probe.1"
    page.write_text(
        HEAD
        + f".ie F {climb} FILE-IS-THERE\n.el FILE-NOT-SEEN\n"
        + ".ie F ../../../../../../../../proc/self/environ ENVIRON-IS-THERE\n"
        + ".el ENVIRON-NOT-SEEN\n"
        + ".ie F R ROMAN-IS-THERE\n.el ROMAN-NOT-SEEN\n"
    )
    text = parse_file(page).text
    assert "FILE-NOT-SEEN" in text and "ENVIRON-NOT-SEEN" in text
    assert "ROMAN-IS-THERE" in text  # groff's own fonts, in /usr/share, are readable


def test_a_page_that_loops_is_ended_with_every_process_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """groff starts troff and grotty; at the timeout the whole process group is killed,
    none left running on a core."""
    started: list[int] = []
    real = subprocess.Popen

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        process = real(*args, **kwargs)
        if kwargs.get("start_new_session"):  # a group of its own: the pid names it
            started.append(process.pid)
        return process

    monkeypatch.setattr(man, "TIMEOUT", 1.0)
    monkeypatch.setattr(confined.subprocess, "Popen", popen)
    page = tmp_path / "loop.1"
    page.write_text(HEAD + ".nr x 0\n.while 1 .nr x +1\n")
    began = time.monotonic()
    with pytest.raises(ParseError, match="longer than 1s"):
        parse_file(page)
    assert time.monotonic() - began < 30  # the 1 s timeout on a loaded machine, not forever
    [group] = started
    deadline = time.monotonic() + 30  # a killed process takes a moment to die
    while running_in(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running_in(group) == []  # none of its processes is left running


def running_in(group: int) -> list[int]:
    """The processes of process group ``group`` still running (not dead, not zombies)."""
    left = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group and fields[0] not in ("Z", "X"):
            left.append(int(entry.name))
    return left
