"""Many processes, one knowledge base: the process that holds the embedded store shares it.

The embedded engine admits one process (``engine.stores.edge``). So the process that holds
the store (``flexmatch serve``, ``flexmatch mcp``, a watch, a long ingest or sync, a Python
program with a knowledge base open) serves a Unix socket beside it (``<store>.sock``, mode
0600 in the store's 700 folder, and each caller's uid checked by the kernel's peer
credentials: the same OS user only, who could open the store's files anyway). Another
process that meets the store held works through it: each call of ``ROUTED`` (search,
ingest, sync, the document reads, …) is sent with its arguments, the caller's principal
and tenant among them, and the owner runs it on its own knowledge base, the same engine
path and the same access rules as its own calls; progress and the result come back.

The owner answers each connection on a thread of its own, with its own event loop, so a
query is answered while the owner's own ingest runs. When the owner closes the store the
socket goes; one killed leaves a file nobody listens on, which a caller treats as no owner
(and the next holder replaces). A call that finds no owner runs here, opening the store.

Wire format, one request per connection: a JSON line ``{"call", "args"}``; then lines
``{"progress": [...]}`` as the owner goes and a last ``{"result": ...}`` or
``{"error": {"type", "args", "message"}}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import inspect
import json
import logging
import os
import socket
import struct
import threading
import typing
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Base64Bytes, TypeAdapter

from flexmatch import errors
from flexmatch.engine.stores.holders import IN_USE, describe
from flexmatch.errors import FlexMatchError, StoreError
from flexmatch.inputs import named_inputs
from flexmatch.models import IngestReport
from flexmatch.results import check_depth
from flexmatch.tools import check_expand

log = logging.getLogger("flexmatch.sharing")
T = TypeVar("T")
SOCKET_SUFFIX = ".sock"
# the calls another process may make through the owner: wire name -> the facade's method
ROUTED = {
    "search": "asearch",
    "query": "aquery",
    "similar": "asimilar",
    "ingest": "aingest",
    "ingest_urls": "aingest_urls",
    "ingest_upload": "aingest_upload",
    "sync": "async_sync",
    "estimate": "aestimate",
    "reindex": "areindex",
    "list_documents": "list_documents",
    "get_document": "get_document",
    "remove_document": "remove_document",
    "stats": "stats",
    "outline": "outline",
    "read": "read",
    "grep": "grep",
    "has_restricted_documents": "has_restricted_documents",
    "stored_copy": "stored_copy",
    "get_original": "get_original",
    "reindex_plan": "areindex_plan",
    "ingest_documents": "aingest_documents",
    "add_records": "aadd_records",
    "update_metadata": "aupdate_metadata",
    "set_access": "set_access",
    "add_feedback": "aadd_feedback",
    "remove_learned": "remove_learned",
}
WRITES = frozenset(
    {
        "ingest",
        "ingest_urls",
        "ingest_upload",
        "sync",
        "reindex",
        "remove_document",
        "ingest_documents",
        "add_records",
        "update_metadata",
        "set_access",
        "add_feedback",
        "remove_learned",
    }
)
# bytes of one request line: an upload's bytes travel as base64 (4/3 of them), so one
# of the largest documents any config admits (HARD_MAX_DOCUMENT_BYTES) fits, with room
MAX_REQUEST = 32 * 1024 * 1024
_PATH_MAX = 100  # longer socket paths are reached through /proc/self/fd (sun_path: 108)
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
# the threads that answer calls: each keeps its event loop (``run_sync``) between calls
_ANSWERING_NAME = "flexmatch-shared"
_ANSWERING = ThreadPoolExecutor(max_workers=8, thread_name_prefix=_ANSWERING_NAME)
STOP_WAIT = 60.0  # seconds a closing owner waits for the calls in flight (an ingest's)


def socket_path(store: Path) -> Path:
    """Where the owner of the embedded store ``store`` listens."""
    return store.parent / f"{store.name}{SOCKET_SUFFIX}"


@contextlib.contextmanager
def _address(path: Path) -> Iterator[str]:
    """An address for ``path`` that fits a socket's 108 bytes: a long one is named
    through a descriptor of its folder (Linux)."""
    if len(os.fsencode(path)) <= _PATH_MAX:
        yield str(path)
        return
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{folder}/{path.name}"
    finally:
        os.close(folder)


def _peer(conn: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end (the kernel's word)."""
    pid, uid, _ = _CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return pid, uid


def _hints(method: Callable[..., Any]) -> dict[str, Any]:
    return typing.get_type_hints(method)


@functools.lru_cache(maxsize=64)
def _parameters(method: Callable[..., Any]) -> frozenset[str]:
    """The arguments a call takes through the socket (``progress`` is the wire's own)."""
    return frozenset(list(inspect.signature(method).parameters)[1:]) - {"progress"}


# arguments with the engine's own check: the same error through the socket as here
_CHECKS: dict[str, Callable[[object], Any]] = {"depth": check_depth, "expand": check_expand}


def _checked(key: str, value: Any) -> Any:
    check = _CHECKS.get(key)
    if check is not None and value is not None:
        check(value)
    return value


def _valid(kind: Any, key: str, value: Any) -> Any:
    return _adapter(kind).validate_python(_checked(key, value))


@functools.lru_cache(maxsize=256)
def _adapter(kind: Any) -> TypeAdapter[Any]:
    """The wire's (de)coder of ``kind``: bytes (an upload's) travel as base64 text."""
    return TypeAdapter(Base64Bytes if kind is bytes else kind)


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode("utf-8") + b"\n")


# -- the owner ------------------------------------------------------------------------------
class Owner:
    """Serves a knowledge base's calls to other processes while this one holds its store
    (``held`` is the store's hook)."""

    def __init__(self, kb: Any, store: Path) -> None:
        self.kb = kb
        self.path = socket_path(store)
        self._listener: socket.socket | None = None
        self._inode = 0
        # writes through the socket apply one at a time, on a thread of their own
        self._writes = ThreadPoolExecutor(max_workers=1, thread_name_prefix=_ANSWERING_NAME)
        self._state = threading.Lock()
        self._busy = threading.Condition()  # calls in flight, waited for before the store closes
        self._in_flight = 0

    @property
    def serving(self) -> bool:
        return self._listener is not None

    def held(self, holding: bool) -> None:
        """The store was taken (start serving) or is about to be let go (stop)."""
        if holding:
            try:
                self._start()
            except OSError as exc:  # the store stays usable here; others wait as before
                log.warning("cannot share the store at %s: %s", self.path, exc)
        else:
            self._stop()

    def _start(self) -> None:
        with self._state:
            if self._listener is not None:
                return
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                with _address(self.path) as address:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.path)  # a killed owner's: this process holds the store
                    old = os.umask(0o177)  # the socket is made 0600, never wider for a moment
                    try:
                        listener.bind(address)
                    finally:
                        os.umask(old)
                os.chmod(self.path, 0o600)
                listener.listen(64)
                listener.settimeout(0.2)  # how soon a stop is seen
            except OSError:
                listener.close()
                raise
            self._inode = os.stat(self.path).st_ino
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _stop(self) -> None:
        with self._state:
            listener, self._listener = self._listener, None
            if listener is None:
                return
            with contextlib.suppress(OSError):
                if os.stat(self.path).st_ino == self._inode:  # ours, not a later owner's
                    os.unlink(self.path)
            listener.close()

    def release(self) -> bool:
        """Stop serving unless calls are in flight (then False: the store stays open and
        served, as those calls hold it; the next release closes it)."""
        with self._busy:
            if self._in_flight:
                return False
            self._stop()
            return True

    def close(self) -> None:
        """Stop serving and let the calls in flight end (an ingest another process asked
        for) before the knowledge base closes the store under them."""
        self._stop()
        if not threading.current_thread().name.startswith(_ANSWERING_NAME):
            with self._busy:
                self._busy.wait_for(lambda: self._in_flight == 0, timeout=STOP_WAIT)

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            conn.settimeout(None)
            with self._busy:  # counted at once: a release between here and the answer waits
                if self._listener is not listener:
                    conn.close()
                    return
                self._in_flight += 1
            _ANSWERING.submit(self._answer, conn)

    def _answer(self, conn: socket.socket) -> None:
        """Read the call; a write goes to this owner's one writing thread (writes apply
        one at a time, and one waiting for its turn holds no thread a query needs)."""
        request = None
        try:
            request = self._request(conn)
        except ValueError as exc:  # said to the caller, who is still there to read it
            with contextlib.suppress(OSError):
                _send(conn, _error(StoreError(f"a call through the store's socket: {exc}")))
        except OSError as exc:
            log.debug("a call through the socket ended early: %s", exc)
        if request is None:
            self._done(conn)
        elif request.get("call") in WRITES:
            self._writes.submit(self._reply, conn, request)
        else:
            self._reply(conn, request)

    def _request(self, conn: socket.socket) -> dict[str, Any] | None:
        _, uid = _peer(conn)
        if uid != os.getuid():  # the file's mode says so too; the kernel's word is final
            _send(conn, _error(StoreError("refused: another OS user")))
            return None
        request = json.loads(_read_line(conn.makefile("rb")))
        if not isinstance(request, dict):
            raise ValueError("a request is a JSON object")
        return request

    def _reply(self, conn: socket.socket, request: dict[str, Any]) -> None:
        try:
            try:
                answer = self._run(conn, request)
            finally:  # the store is no longer used: a caller told "done" finds it released
                self._finished()
            _send(conn, answer)
        except OSError as exc:
            log.debug("a caller went away before its answer: %s", exc)
        finally:
            conn.close()

    def _done(self, conn: socket.socket) -> None:
        conn.close()
        self._finished()

    def _finished(self) -> None:
        with self._busy:
            self._in_flight -= 1
            self._busy.notify_all()

    def _run(self, conn: socket.socket, request: dict[str, Any]) -> dict[str, Any]:
        name = request.get("call")
        if name not in ROUTED:
            return _error(StoreError(f"unknown call {name!r} through the store's socket"))
        method = getattr(type(self.kb), ROUTED[name])
        hints = _hints(method)
        try:
            given = dict(request.get("args") or {})
            unknown = sorted(set(given) - _parameters(method))
            if unknown:  # refused, never dropped: a dropped principal would run as the admin
                raise StoreError(
                    f"{name} through the store's socket has no argument {', '.join(unknown)}"
                )
            args = {key: _valid(hints[key], key, value) for key, value in given.items()}
            if "progress" in hints and request.get("progress"):
                args["progress"] = functools.partial(_tell, conn)
            result = getattr(self.kb, name)(**args)
            return {"result": _adapter(hints["return"]).dump_python(result, mode="json")}
        except Exception as exc:
            return _error(exc)


def _tell(conn: socket.socket, *values: Any) -> None:
    """Send one progress event; a caller that went away leaves the work going on."""
    shown = [v.model_dump(mode="json") if isinstance(v, IngestReport) else v for v in values]
    with contextlib.suppress(OSError):
        _send(conn, {"progress": shown})


def _error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, FlexMatchError):
        kind, args = type(exc).__name__, [a for a in exc.args if isinstance(a, str | int)]
    else:  # a bug or an OS error in the owner: its words, under the store's error
        kind, args = "StoreError", [f"{type(exc).__name__}: {exc}"]
    message = str(exc) if isinstance(exc, FlexMatchError) else args[0]
    code = exc.code if isinstance(exc, FlexMatchError) else "internal_error"
    return {"error": {"type": kind, "args": args, "message": message, "code": code}}


def _read_line(stream: Any) -> bytes:
    line = stream.readline(MAX_REQUEST + 1)
    if len(line) > MAX_REQUEST:
        raise ValueError(f"the request is over {MAX_REQUEST:,} bytes")
    if not line.endswith(b"\n"):
        raise ValueError("no whole line")
    return bytes(line)


# -- the callers -----------------------------------------------------------------------------
HERE: Any = object()  # what ``call`` returns when no other process shares the store


def _connect(path: Path) -> tuple[socket.socket, int] | None:
    """A connection to the other process sharing the store at ``path``, and its pid;
    None when none listens (no file, a killed owner's file, or this process)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _address(path) as address:
            conn.connect(address)
        pid, uid = _peer(conn)
    except OSError as exc:
        conn.close()
        gone = (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR)
        if isinstance(exc, FileNotFoundError | ConnectionRefusedError) or exc.errno in gone:
            return None
        raise StoreError(f"cannot reach the process holding the store at {path}: {exc}") from exc
    if pid == os.getpid() or uid != os.getuid():
        conn.close()
        return None
    return conn, pid


def call(
    path: Path,
    name: str,
    args: Callable[[], dict[str, Any]],
    progress: Callable[..., None] | None,
) -> Any:
    """Run call ``name`` in the process sharing the store (``HERE``: none does); its
    JSON result, or its error raised here as the same ``FlexMatchError``."""
    connected = _connect(path)
    if connected is None:
        return HERE
    conn, pid = connected
    with conn, conn.makefile("rb") as stream:
        message = {"call": name, "args": args(), "progress": progress is not None}
        request = json.dumps(message).encode("utf-8")
        if len(request) >= MAX_REQUEST:  # refused here, before a byte is sent
            hint = "; give the file by path (ingest) instead" if name == "ingest_upload" else ""
            raise StoreError(
                f"{name} through the process holding the store at {path.parent}: the request "
                f"is {len(request):,} bytes, over the socket's {MAX_REQUEST:,}{hint}"
            )
        conn.sendall(request + b"\n")
        while True:
            line = stream.readline()
            if not line.endswith(b"\n"):  # nothing, or a line cut short: the owner died
                holder = describe(pid).describe()
                raise StoreError(
                    f"the process holding the store at {path.parent} ({holder}) ended "
                    f"before answering {name}; try again"
                )
            message = json.loads(line)
            if "progress" in message:
                if progress is not None:
                    progress(*[_progress_value(v) for v in message["progress"]])
                continue
            if "error" in message:
                raise _raised(message["error"], pid)
            return message.get("result")


def _progress_value(value: Any) -> Any:
    return IngestReport.model_validate(value) if isinstance(value, dict) else value


def _raised(error: dict[str, Any], pid: int) -> FlexMatchError:
    """The owner's error as the same class here (a bad input reads the same either way)."""
    kind = getattr(errors, str(error.get("type")), None)
    if isinstance(kind, type) and issubclass(kind, FlexMatchError):
        with contextlib.suppress(Exception):
            if kind.codes:  # its code says which of several (``QueryError``'s invalid_expand)
                return kind.from_answer(str(error.get("code")), str(error.get("message")))
            return kind(*error.get("args", []))
    holder = describe(pid).describe()
    return StoreError(f"the process holding the store ({holder}) failed: {error.get('message')}")


def _wire_args(
    method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """A call's arguments as JSON: paths made absolute (the owner runs elsewhere)."""
    bound = inspect.signature(method).bind(None, *args, **kwargs)
    hints = _hints(method)
    wire: dict[str, Any] = {}
    for key, value in list(bound.arguments.items())[1:]:
        if key == "progress":
            continue
        if key == "inputs":  # files, folders, URLs
            wire[key] = [_absolute(item) for item in named_inputs(value)]
        elif key == "urls":
            wire[key] = named_inputs(value)
        else:
            wire[key] = _adapter(hints[key]).dump_python(_checked(key, value), mode="json")
    return wire


def _absolute(item: Any) -> str:
    text = str(item)
    return text if "://" in text else str(Path(text).expanduser().absolute())


def _replayable(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Iterators (a generator of paths or URLs) as lists: a call tried here and then sent
    to a holder that took the store meanwhile must send them whole, not used up."""

    def whole(value: Any) -> Any:
        return list(value) if isinstance(value, Iterator) else value

    return tuple(whole(a) for a in args), {k: whole(v) for k, v in kwargs.items()}


def through_owner(method: Callable[..., T]) -> Callable[..., T]:
    """``method`` of the facade, sent to the process sharing the store when another one
    does (``self.shared_store``: where it listens, or None: here), else run here. The
    same parameters and docstring (a wrapper made with ``functools.wraps``)."""
    name = method.__name__.removeprefix("async_").removeprefix("a")
    name = method.__name__ if method.__name__ in ROUTED else name
    result_type = _hints(method).get("return")

    def remote(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        path = self.shared_store
        if path is None:
            return HERE
        progress = kwargs.get("progress")
        wire = functools.partial(_wire_args, method, args, kwargs)
        raw = call(path, name, wire, progress)
        return raw if raw is HERE else _adapter(result_type).validate_python(raw)

    def again(self: Any, exc: StoreError, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A call that found no owner, then the store taken meanwhile by a process that
        shares it: sent there once; else the error stands."""
        done = remote(self, args, kwargs) if IN_USE in str(exc) else HERE
        if done is HERE:
            raise exc
        return done

    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def routed_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            args, kwargs = _replayable(args, kwargs)
            if self.shared_store is None:  # this process holds the store: no thread hop
                return await method(self, *args, **kwargs)
            done = await asyncio.to_thread(remote, self, args, kwargs)
            if done is not HERE:
                return done
            try:
                return await method(self, *args, **kwargs)
            except StoreError as exc:
                return await asyncio.to_thread(again, self, exc, args, kwargs)

        return routed_async  # type: ignore[return-value]

    @functools.wraps(method)
    def routed(self: Any, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = _replayable(args, kwargs)
        done = remote(self, args, kwargs)
        if done is not HERE:
            return done
        try:
            return method(self, *args, **kwargs)
        except StoreError as exc:
            return again(self, exc, args, kwargs)

    return routed
