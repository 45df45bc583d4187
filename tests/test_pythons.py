"""The Pythons FlexMatch supports are those every dependency of ``[all]`` ships wheels for:
for each version ``requires-python`` admits, the whole ``[all]`` install is resolved
against the package index for that Python, binary wheels only (the registry is asked; the
suite itself runs on one of them, see docs/development.md).

The resolution is done here rather than by ``pip install --dry-run``: the index serves no
PEP 658 metadata files, so pip downloads each whole wheel it considers to read its
dependencies (the CUDA torch build and its nvidia wheels alone are about 1.4 GB a Python,
3 to 6 minutes each). Instead the index's JSON simple API lists each project's files, and
each package takes the newest version its requirements admit that has a wheel whose tags
that CPython takes on this platform (pip's choice too); that wheel's METADATA is read out
of it with HTTP range requests, a few kB, for the next requirements, markers evaluated for
that Python. A version that fails a later requirement, or needs a package with no such
wheel, is ruled out and the walk starts again, as pip backtracks, so a pass means a full
set of wheels meeting every requirement exists. The Pythons' resolutions run at once."""

from __future__ import annotations

import functools
import os
import re
import struct
import sys
import threading
import time
import tomllib
import zlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from email.parser import HeaderParser

import httpx
import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags, platform_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from tests.conftest import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
SUPPORTED = ("3.11", "3.12", "3.13", "3.14")
# pure-Python packages published as a source archive only (no wheel for any Python, so a
# wheels-only resolution cannot take them): their own dependencies are resolved instead
SOURCE_ONLY: dict[str, tuple[str, ...]] = {"odfpy": ("defusedxml",)}


def requirements(extra: str = "all") -> list[str]:
    """The core dependencies and those of ``extra``, its nested extras expanded."""
    extras = PROJECT["optional-dependencies"]
    found: list[str] = list(PROJECT["dependencies"])
    pending, seen = [extra], {extra}
    while pending:
        for requirement in extras[pending.pop()]:
            nested = re.fullmatch(r"flexmatch\[(.+)\]", requirement)
            if nested is None:
                found.append(requirement)
                continue
            for name in nested.group(1).split(","):
                if name not in seen:
                    seen.add(name)
                    pending.append(name)
    return found


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()


def test_requires_python_admits_exactly_the_supported_versions() -> None:
    admitted = SpecifierSet(PROJECT["requires-python"])
    assert [v for v in SUPPORTED if Version(v) in admitted] == list(SUPPORTED)
    newest = Version(SUPPORTED[-1])
    assert Version(f"{newest.major}.{newest.minor + 1}") not in admitted  # not yet checked
    assert Version("3.10") not in admitted
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert running in SUPPORTED  # the suite runs on a supported Python


def test_the_all_extra_reaches_every_extra() -> None:
    everything = {_name(r) for r in requirements()}
    for extra in PROJECT["optional-dependencies"]:
        if extra in ("all", "dev", "docs"):
            continue
        assert {_name(r) for r in requirements(extra)} <= everything, extra


def _index_reachable() -> bool:
    try:
        return httpx.head("https://pypi.org/simple/pip/", timeout=10).status_code < 500
    except httpx.HTTPError:
        return False


INDEX = "https://pypi.org/simple/"
Wheel = tuple[Version, frozenset[Tag], SpecifierSet, dict]


class Index:
    """The index's JSON simple API and wheels' METADATA read by HTTP range requests; both
    kept for the module (the Pythons share most files)."""

    def __init__(self) -> None:
        self.client = httpx.Client(timeout=60, follow_redirects=True)
        self.pool = ThreadPoolExecutor(24)
        self.lock = threading.Lock()
        self.projects: dict[str, Future[list[Wheel]]] = {}
        self.metadata: dict[str, Future[list[str]]] = {}
        self.chosen: dict[tuple[str, str, str], dict | None] = {}  # see _wheel

    def prefetch(self, name: str) -> None:
        with self.lock:
            if name not in self.projects:
                self.projects[name] = self.pool.submit(self._files, name)

    def wheels(self, name: str) -> list[Wheel]:
        self.prefetch(name)
        return self.projects[name].result()

    def listed(self, name: str) -> bool:
        """Whether the project's files are already here (asking for them never waits)."""
        with self.lock:
            future = self.projects.get(name)
        return future is not None and future.done()

    def prefetch_metadata(self, file: dict) -> None:
        with self.lock:
            if file["url"] not in self.metadata:
                self.metadata[file["url"]] = self.pool.submit(self._requires, file)

    def _files(self, name: str) -> list[Wheel]:
        """The project's wheels not yanked: version, tags, Requires-Python, the file."""
        answer = self._get(
            f"{INDEX}{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
        )
        if answer.status_code == 404:
            return []
        answer.raise_for_status()
        wheels = []
        for file in answer.json()["files"]:
            if not file["filename"].endswith(".whl") or file.get("yanked"):
                continue
            try:
                _, release, _, tags = parse_wheel_filename(file["filename"])
            except (ValueError, InvalidVersion):
                continue
            python = _requires_python(file.get("requires-python") or "")
            wheels.append((release, tags, python, file))
        return sorted(wheels, key=lambda wheel: wheel[0], reverse=True)  # newest first

    def requires(self, file: dict) -> list[str]:
        self.prefetch_metadata(file)
        return self.metadata[file["url"]].result()

    def _requires(self, file: dict) -> list[str]:
        """The wheel's ``Requires-Dist`` lines, read once however often the walks ask."""
        text = self._metadata(file)
        return HeaderParser().parsestr(text, headersonly=True).get_all("Requires-Dist") or []

    def _get(self, url: str, headers: dict[str, str]) -> httpx.Response:
        """A GET asked again, twice at most, when the connection or the index failed
        (many requests run at once; one lost on the way says nothing of the wheels)."""
        for attempt in range(3):
            try:
                answer = self.client.get(url, headers=headers)
                if answer.status_code < 500 and answer.status_code != 429:
                    return answer
            except httpx.TransportError:
                if attempt == 2:
                    raise
            time.sleep(0.5 * (attempt + 1))
        return answer

    def _range(self, url: str, start: int, end: int) -> bytes:
        answer = self._get(url, headers={"Range": f"bytes={start}-{end}"})
        answer.raise_for_status()
        assert answer.status_code == 206, f"{url}: no range requests"
        return answer.content

    def _metadata(self, file: dict) -> str:
        """The wheel's ``*.dist-info/METADATA``: the zip's end records, its central
        directory, then that one member (a few hundred kB at most, never the wheel)."""
        url, size = file["url"], file["size"]
        tail = self._range(url, max(0, size - 65536), size - 1)
        at = tail.rfind(b"PK\x05\x06")
        directory_size, directory_at = struct.unpack("<II", tail[at + 12 : at + 20])
        if tail[at - 20 : at - 16] == b"PK\x06\x07":  # zip64: the directory lies elsewhere
            (record_at,) = struct.unpack("<Q", tail[at - 12 : at - 4])
            record = self._range(url, record_at, record_at + 55)
            directory_size, directory_at = struct.unpack("<QQ", record[40:56])
        directory = self._range(url, directory_at, directory_at + directory_size - 1)
        position = 0
        while position + 46 <= len(directory):
            fields = struct.unpack("<IHHHHHHIIIHHHHHII", directory[position : position + 46])
            method, packed, name_length, extra_length, comment_length = (
                fields[4],
                fields[8],
                fields[10],
                fields[11],
                fields[12],
            )
            header_at = fields[16]
            member = directory[position + 46 : position + 46 + name_length].decode()
            position += 46 + name_length + extra_length + comment_length
            if member.count("/") == 1 and member.endswith(".dist-info/METADATA"):
                local = self._range(url, header_at, header_at + 30 + 1024 + packed)
                skip = 30 + sum(struct.unpack("<HH", local[26:30]))
                data = local[skip : skip + packed]
                return (zlib.decompress(data, -15) if method == 8 else data).decode()
        raise AssertionError(f"{url}: no METADATA in the wheel")


@pytest.fixture(scope="module")
def index() -> Iterator[Index]:
    found = Index()
    yield found
    found.pool.shutdown(cancel_futures=True)
    found.client.close()


@functools.cache
def _requires_python(text: str) -> SpecifierSet:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:  # pip ignores one it cannot read, and so does this
        return SpecifierSet()


_requirement = functools.cache(Requirement)  # the same lines are read on every walk


@functools.cache
def _tags(version: str) -> frozenset[Tag]:
    """The wheel tags pip takes for that CPython on this platform."""
    python = tuple(int(part) for part in version.split("."))
    platforms = list(platform_tags())
    return frozenset(cpython_tags(python, platforms=platforms)) | frozenset(
        compatible_tags(python, f"cp{python[0]}{python[1]}", platforms)
    )


def _wheel(index: Index, name: str, specifier: SpecifierSet, version: str) -> dict | None:
    """The newest wheel of ``name`` in ``specifier`` that Python ``version`` takes (kept:
    the walks ask again after each restart)."""
    key = (name, str(specifier), version)
    if key in index.chosen:
        return index.chosen[key]
    tags, python = _tags(version), Version(version)
    best = None
    for release, file_tags, requires_python, file in index.wheels(name):  # newest first
        if release.is_prerelease and not specifier.prereleases:
            continue
        if release in specifier and file_tags & tags and python in requires_python:
            best = file
            break
    index.chosen[key] = best
    return best


def _look_ahead(
    index: Index,
    pending: deque[tuple[str | None, Requirement]],
    chosen: dict[str, tuple[str, list[str]]],
    learned: dict[str, SpecifierSet],
    version: str,
    seen: set[tuple[str, str]],
) -> None:
    """Start reading the METADATA of the wheels the walk will likely take next, so the
    walk waits for one round trip at a time, not three a package in a row."""
    for _, requirement in pending:
        name = canonicalize_name(requirement.name)
        if name in chosen or not index.listed(name):
            continue
        specifier = learned.get(name, SpecifierSet()) & requirement.specifier
        if (name, str(specifier)) in seen:
            continue
        seen.add((name, str(specifier)))
        file = _wheel(index, name, specifier, version)
        if file is not None:
            index.prefetch_metadata(file)


def _applies(requirement: Requirement, environment: dict[str, str], extras: set[str]) -> bool:
    return requirement.marker is None or any(
        requirement.marker.evaluate({**environment, "extra": extra}) for extra in {"", *extras}
    )


def _resolve(index: Index, roots: list[str], version: str) -> tuple[dict[str, str], list[str]]:
    """A version with a wheel for ``version`` for each of ``roots`` and their dependencies,
    breadth first, each the newest its requirements admit; problems found. A version that
    fails a later requirement, or whose dependency has no wheel, is ruled out and the walk
    starts again (pip backtracks likewise), so what is returned meets every requirement."""
    environment = {
        **default_environment(),
        "python_version": version,
        "python_full_version": f"{version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }
    learned: dict[str, SpecifierSet] = {}  # what the earlier walks ruled out, and why
    why: dict[str, list[str]] = {}
    roots = [r for r in roots if _applies(Requirement(r), environment, set())]
    seen: set[tuple[str, str]] = set()  # looked ahead at
    for root in roots:
        index.prefetch(canonicalize_name(_requirement(root).name))
    for _ in range(100):
        chosen: dict[str, tuple[str, list[str]]] = {}
        expanded: dict[str, set[str]] = {}
        problems: list[str] = []
        pending = deque((None, _requirement(r)) for r in roots)
        restart = False
        while pending and not restart:
            parent, requirement = pending.popleft()
            name = canonicalize_name(requirement.name)
            if name not in chosen:
                specifier = learned.get(name, SpecifierSet()) & requirement.specifier
                file = _wheel(index, name, specifier, version)
                if file is None and parent is not None:  # try another version of the parent
                    learned[parent] = learned.get(parent, SpecifierSet()) & SpecifierSet(
                        f"!={chosen[parent][0]}"
                    )
                    why.setdefault(parent, []).append(
                        f"{parent} {chosen[parent][0]} needs {requirement}, no wheel"
                    )
                    restart = True
                    continue
                if file is None:
                    problems.append(
                        "; ".join(
                            [
                                f"[all] needs {requirement}: no wheel for Python {version}",
                                *why.get(name, [])[-3:],
                            ]
                        )
                    )
                    continue
                release = str(parse_wheel_filename(file["filename"])[1])
                _look_ahead(index, pending, chosen, learned, version, seen)
                chosen[name] = (release, index.requires(file))
            elif not requirement.specifier.contains(chosen[name][0], prereleases=True):
                learned[name] = learned.get(name, SpecifierSet()) & requirement.specifier
                why.setdefault(name, []).append(f"{parent} needs {requirement}")
                restart = True
                continue
            release, requires = chosen[name]
            wanted = {"", *requirement.extras} - expanded.setdefault(name, set())
            expanded[name] |= wanted
            for line in requires if wanted else ():
                dependency = _requirement(line)
                if _applies(dependency, environment, wanted):
                    pending.append((name, dependency))
                    index.prefetch(canonicalize_name(dependency.name))
        if not restart:
            return {name: release for name, (release, _) in chosen.items()}, problems
    raise AssertionError(
        f"Python {version}: no versions of [all] found that fit together; "
        + "; ".join(reason for reasons in why.values() for reason in reasons[-1:])
    )


def _wanted() -> list[str]:
    wanted = [r for r in requirements() if _name(r) not in SOURCE_ONLY]
    return wanted + [d for name in SOURCE_ONLY for d in SOURCE_ONLY[name]]


@pytest.fixture(scope="module")
def resolutions(
    request: pytest.FixtureRequest, index: Index
) -> Iterator[dict[str, Future[tuple[dict[str, str], list[str]]]]]:
    """The resolution for each Python the session tests, all started at once."""
    versions = [
        item.callspec.params["version"]
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.originalname == "test_every_dependency_has_wheels_for"
        and hasattr(item, "callspec")
    ]
    if not _index_reachable() and not os.environ.get("CI"):
        versions = []
    with ThreadPoolExecutor(max(1, len(versions))) as pool:
        yield {v: pool.submit(_resolve, index, _wanted(), v) for v in dict.fromkeys(versions)}


@pytest.mark.parametrize("version", SUPPORTED)
def test_every_dependency_has_wheels_for(
    version: str, resolutions: dict[str, Future[tuple[dict[str, str], list[str]]]]
) -> None:
    if version not in resolutions:
        pytest.skip("the package index (pypi.org) cannot be reached")
    wanted = _wanted()
    installed, problems = resolutions[version].result(timeout=600)
    assert not problems, f"Python {version}: " + "\n".join(problems)
    for requirement in wanted:  # each one resolved (a marker may leave some out)
        if ";" not in requirement:
            assert canonicalize_name(_name(requirement)) in installed, requirement
    assert installed["torch"].startswith("2.13.")  # the pinned torch has wheels there too
