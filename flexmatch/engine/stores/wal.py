"""The embedded store's write-ahead log, read and rewritten outside the engine.

Why: the engine logs every update before applying it and, when a store opens, decodes
every log entry it has not yet acknowledged. An entry it cannot decode (a payload nested
deeper than its CBOR decoder's limit of about 128 levels, which older versions let in)
stops the store from opening at all. ``scan`` finds such entries; ``rewrite`` replaces the
too-deep values of their payloads with a short text, keeps every other byte of every entry,
and recomputes the log's checksums, so the store opens again (``repair`` then removes the
points those entries wrote).

The format is the ``wal`` crate's (its ``src/segment.rs``): a folder of segment files
named ``closed-<first index>`` and ``open-<id>``. Each file starts with an 8-byte header
("wal", a version byte, a random u32 CRC seed), then entries: the data's length (u64),
the data, zero padding (so that the entry ends on a multiple of 8), and a CRC32-C of
length, data and padding, chained from the previous entry's CRC (the seed for the first).
Reading stops at the first entry whose CRC does not match. The data is the update
operation as CBOR (qdrant's ``shard::wal``).
"""

from __future__ import annotations

import mmap
import os
import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from flexmatch.errors import StoreError

HEADER_LEN = 8
CRC_LEN = 4
MAGIC = b"wal"
# the engine's CBOR decoder refuses data nested deeper than 128 levels (127 in some store
# layouts): entries past this are treated as unreadable, and their payloads cut below it
MAX_DEPTH = 120
REMOVED = "<removed: nested too deeply>"


def _padding(length: int) -> int:
    return (4 - length) & 7


def _reverse_bits(value: int) -> int:
    return int(f"{value:032b}"[::-1], 2)


def _chain(previous: int, chunk: bytes | memoryview) -> int:
    """The crate's chained CRC: ``crc32c_append(!previous.reverse_bits(), chunk)``."""
    import crc32c

    return int(crc32c.crc32c(chunk, value=~_reverse_bits(previous) & 0xFFFFFFFF))


@dataclass
class LogEntry:
    """One entry of a segment file: where it is and what it holds."""

    position: int  # within its file
    offset: int  # of its length field
    data: bytes
    crc: int


@dataclass
class LogFile:
    path: Path
    seed: int
    entries: list[LogEntry]
    first_index: int = 0  # the log index of its first entry


def read_file(path: Path) -> LogFile:
    """The valid entries of one segment file, parsed as the crate parses them."""
    size = path.stat().st_size
    capacity = size & ~7
    if capacity < HEADER_LEN:
        raise StoreError(f"{path}: not a log segment ({size} bytes)")
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as m:
        if m[0:3] != MAGIC or m[3] != 0:
            raise StoreError(f"{path}: not a log segment of a known version")
        crc = seed = struct.unpack_from("<I", m, 4)[0]
        entries: list[LogEntry] = []
        offset = HEADER_LEN
        while offset + HEADER_LEN + CRC_LEN < capacity:
            length = struct.unpack_from("<Q", m, offset)[0]
            padded = length + _padding(length)
            end = offset + HEADER_LEN + padded
            if end + CRC_LEN > capacity:
                break
            stored = struct.unpack_from("<I", m, end)[0]
            if _chain(crc, memoryview(m)[offset:end]) != stored:
                break
            crc = stored
            data = bytes(m[offset + HEADER_LEN : offset + HEADER_LEN + length])
            entries.append(LogEntry(len(entries), offset, data, stored))
            offset = end + CRC_LEN
    return LogFile(path, seed, entries)


def read_log(folder: Path) -> list[LogFile]:
    """Every segment file of the log, in log order (closed ones by first index, then the
    open ones by id), with the log index of each file's first entry."""
    closed: list[tuple[int, Path]] = []
    opened: list[tuple[int, Path]] = []
    for path in folder.iterdir():
        kind, _, number = path.name.partition("-")
        if not path.is_file() or not number.isdigit():
            continue
        if kind == "closed":
            closed.append((int(number), path))
        elif kind == "open":
            opened.append((int(number), path))
    files: list[LogFile] = []
    next_index = min((start for start, _ in closed), default=0)
    for start, path in sorted(closed):
        log = read_file(path)
        log.first_index = start
        next_index = start + len(log.entries)
        files.append(log)
    for _, path in sorted(opened):
        log = read_file(path)
        log.first_index = next_index
        next_index += len(log.entries)
        files.append(log)
    return files


# -- CBOR, walked without recursion -------------------------------------------------------


def _head(data: bytes, pos: int) -> tuple[int, int, int | None, int]:
    """(major type, additional info, argument, position after the head)."""
    try:
        first = data[pos]
        major, info = first >> 5, first & 31
        if info < 24:
            return major, info, info, pos + 1
        if info == 31:
            return major, info, None, pos + 1
        if info > 27:
            raise StoreError(f"not CBOR: reserved value at byte {pos}")
        width = 1 << (info - 24)
        if pos + 1 + width > len(data):
            raise IndexError
        return major, info, int.from_bytes(data[pos + 1 : pos + 1 + width], "big"), pos + 1 + width
    except IndexError:
        raise StoreError(f"not CBOR: cut short at byte {pos}") from None


@dataclass
class _Frame:
    kind: str  # array, map, tag or chunks (the last two are not a nesting level)
    remaining: int | None  # items still to read; None until a break
    start: int
    level: int
    role: str  # key or value (in a map), item (in an array or tag), root
    key: str | None  # the key this frame is the value of
    payload: bool = False  # a point's payload (the outermost map under a "payload" key)
    inside_payload: bool = False
    deepest: int = 0
    expect_key: bool = True
    last_key: str | None = None
    fields: list[tuple[int, int, int]] = field(default_factory=list)  # a payload's values
    cuts: list[tuple[int, int]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # "id" or "points" of a map


@dataclass
class EntryDepth:
    """How deep an entry nests, and what to cut to bring it within the limit."""

    deepest: int
    cuts: list[tuple[int, int]]  # byte spans of payload values nested too deeply
    point_ids: list[str]  # the points whose payload those values are in
    unknown_points: bool  # a cut payload names no point (an update by filter)


def _point_id(major: int, value: int | None, content: bytes | None) -> str | None:
    if major == 0 and value is not None:
        return str(value)
    if major == 2 and content is not None and len(content) == 16:
        return str(uuid.UUID(bytes=content))
    if major == 3 and content is not None:
        return content.decode("utf-8", "replace")
    return None


def measure(data: bytes, limit: int = MAX_DEPTH) -> EntryDepth:
    """Walk one CBOR item: its deepest nesting and, for payloads nested deeper than
    ``limit``, the spans of their top-level values that reach past it."""
    result = EntryDepth(0, [], [], False)
    stack: list[_Frame] = []
    pos = 0
    started = False
    while True:
        while stack and stack[-1].remaining == 0:
            _close(stack, stack.pop(), pos, limit, result)
        if started and not stack:
            break
        started = True
        major, info, value, after = _head(data, pos)
        parent = stack[-1] if stack else None
        if major == 7 and info == 31:  # the break of an indefinite container
            if parent is None or parent.remaining is not None:
                raise StoreError(f"not CBOR: stray break at byte {pos}")
            parent.remaining = 0
            pos = after
            continue
        role, key = "root", None
        if parent is not None:
            if parent.remaining is not None:
                parent.remaining -= 1
            if parent.kind == "map":
                role = "key" if parent.expect_key else "value"
                key = None if parent.expect_key else parent.last_key
                parent.expect_key = not parent.expect_key
            else:
                role, key = "item", parent.key if parent.kind == "tag" else None
        level = parent.level if parent else 0
        start, pos = pos, after
        if major in (4, 5):
            frame = _Frame(
                kind="array" if major == 4 else "map",
                remaining=None if value is None else value * (2 if major == 5 else 1),
                start=start,
                level=level + 1,
                role=role,
                key=key,
            )
            frame.deepest = frame.level
            if parent is not None:
                frame.inside_payload = parent.inside_payload or parent.payload
                frame.payload = (
                    major == 5 and key == "payload" and role == "value" and not frame.inside_payload
                )
            stack.append(frame)
            continue
        if major == 6 or (major in (2, 3) and value is None):
            stack.append(
                _Frame(
                    kind="tag" if major == 6 else "chunks",
                    remaining=1 if major == 6 else None,
                    start=start,
                    level=level,
                    role=role,
                    key=key,
                )
            )
            continue
        content = None
        if major in (2, 3):
            assert value is not None
            if pos + value > len(data):
                raise StoreError(f"not CBOR: a string runs past the end at byte {start}")
            content = data[pos : pos + value]
            pos += value
        if parent is not None:
            _child_done(parent, role, key, start, pos, level, _point_id(major, value, content))
    if pos != len(data):
        raise StoreError(f"not CBOR: {len(data) - pos} bytes after the item")
    return result


def _child_done(
    parent: _Frame,
    role: str,
    key: str | None,
    start: int,
    end: int,
    deepest: int,
    scalar: str | None,
) -> None:
    parent.deepest = max(parent.deepest, deepest)
    if parent.kind == "map":
        if role == "key":
            parent.last_key = scalar
            return
        if parent.payload:
            parent.fields.append((start, end, deepest))
        if key == "id" and scalar is not None:
            parent.ids.append(scalar)
    elif parent.key == "points" and scalar is not None:  # a list of point ids
        parent.ids.append(scalar)


def _close(stack: list[_Frame], frame: _Frame, end: int, limit: int, result: EntryDepth) -> None:
    if frame.payload and frame.deepest > limit:
        frame.cuts = [(s, e) for s, e, deep in frame.fields if deep > limit]
    parent = stack[-1] if stack else None
    if parent is None:
        result.deepest = frame.deepest
        _settle(frame, result)
        return
    _child_done(parent, frame.role, frame.key, frame.start, end, frame.deepest, None)
    if frame.kind in ("tag", "chunks"):  # transparent: what it found is its parent's
        parent.cuts += frame.cuts
        parent.ids += frame.ids
        return
    if frame.key == "points" and frame.kind == "array":
        parent.ids += frame.ids
    if frame.payload:
        parent.cuts += frame.cuts
    elif frame.kind == "map":
        _settle(frame, result)
    else:
        parent.cuts += frame.cuts


def _settle(frame: _Frame, result: EntryDepth) -> None:
    """A map closes that holds cut payloads: its ids are the points they belong to."""
    if not frame.cuts:
        return
    result.cuts += frame.cuts
    result.point_ids += frame.ids
    result.unknown_points |= not frame.ids


def _text(value: str) -> bytes:
    raw = value.encode()
    assert len(raw) < 256
    return (bytes([0x60 | len(raw)]) if len(raw) < 24 else bytes([0x78, len(raw)])) + raw


def repaired(data: bytes, cuts: list[tuple[int, int]]) -> bytes:
    """``data`` with each span replaced by the text ``REMOVED`` (a shorter item)."""
    out = bytearray()
    pos = 0
    for start, end in sorted(cuts):
        out += data[pos:start] + _text(REMOVED)
        pos = end
    return bytes(out + data[pos:])


# -- the log as a whole ------------------------------------------------------------------


@dataclass
class BadEntry:
    """A log entry the engine cannot decode."""

    file: str
    index: int  # in the log
    depth: int
    point_ids: list[str]
    repairable: bool
    reason: str = ""


@dataclass
class LogScan:
    files: list[LogFile]
    bad: list[BadEntry]
    fixes: dict[Path, dict[int, bytes]]  # per file: entry position -> repaired data

    @property
    def entries(self) -> int:
        return sum(len(f.entries) for f in self.files)


def scan(folder: Path) -> LogScan:
    """Every entry the engine cannot decode, and the repaired data of each that can be."""
    files = read_log(folder)
    bad: list[BadEntry] = []
    fixes: dict[Path, dict[int, bytes]] = {}
    for log in files:
        for entry in log.entries:
            depth = measure(entry.data)
            if depth.deepest <= MAX_DEPTH:
                continue
            index = log.first_index + entry.position
            found = BadEntry(log.path.name, index, depth.deepest, [], False)
            bad.append(found)
            if not depth.cuts:
                found.reason = "nested too deeply outside any payload"
                continue
            fixed = repaired(entry.data, depth.cuts)
            if measure(fixed).deepest > MAX_DEPTH:
                found.reason = "still nested too deeply once its payload values are cut"
                continue
            found.point_ids = list(dict.fromkeys(depth.point_ids))
            found.repairable = True
            if depth.unknown_points:
                found.reason = "an update by filter: the points it changed are found by reading"
            fixes.setdefault(log.path, {})[entry.position] = fixed
    return LogScan(files, bad, fixes)


def rewrite(log: LogFile, fixes: dict[int, bytes], scratch: Path) -> None:
    """Rewrite ``log``'s file with ``fixes`` applied: the entries before the first fix are
    kept byte for byte, the rest written again with their CRC chain recomputed; the file
    keeps its size (the tail is zeros, which the crate reads as the end). Written beside
    in ``scratch`` and renamed into place, so a crash leaves the old file or the new one."""
    first = min(fixes)
    crc = log.seed if first == 0 else log.entries[first - 1].crc
    start = log.entries[first].offset
    size = log.path.stat().st_size
    temporary = scratch / f".{log.path.name}.rewrite-{os.getpid()}"
    try:
        with log.path.open("rb") as source, temporary.open("wb") as target:
            target.write(source.read(start))
            for entry in log.entries[first:]:
                data = fixes.get(entry.position, entry.data)
                chunk = struct.pack("<Q", len(data)) + data + bytes(_padding(len(data)))
                crc = _chain(crc, chunk)
                target.write(chunk + struct.pack("<I", crc))
            target.truncate(size)
            target.flush()
            os.fsync(target.fileno())
        os.chmod(temporary, log.path.stat().st_mode & 0o777)
        os.replace(temporary, log.path)
    finally:
        temporary.unlink(missing_ok=True)
    directory = os.open(log.path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
