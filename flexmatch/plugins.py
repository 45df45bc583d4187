"""The plug-in spine: what users extend, and the one way everything extensible registers.

The hooks (one entry-point group each; a plug-in package declares its objects there):

``flexmatch.chains``   chain types: ``type = "pkg:Class"``, a subclass of one chain
                       kind's base (``Chunker``, ``Reranker``, …); its kind is its base.
``flexmatch.sources``  source types: ``type = "pkg:Class"``, a ``SourceType`` subclass.
``flexmatch.parsers``  parsers: ``name = "pkg:function"``, ``Path -> ParsedDocument``; a
                       ``suffixes`` attribute claims file suffixes no built-in reads.
``flexmatch.commands`` commands: ``name = "pkg:function"``, given the ``flexmatch`` typer
                       app, adds the command ``name`` (or a group of that name) to it,
                       in the manner of llm's ``register_commands``; ``serve``, ``mcp``
                       and ``agent-demo`` come from the HTTP, MCP and agent adapters so.

The built-ins register through the very same path: each hook's registry loads its
built-in table (name → ``module:attribute``, the entry points this package declares)
first, then the installed entry points, then takes in-process ``register`` calls.

One failure rule for every hook: a plug-in that fails to load, has the wrong shape,
claims a name two plug-ins declare, or a built-in's name, is remembered with the reason
and never raised. It is named when a setting asks for a name nobody registered (and by
``flexmatch chains``; a broken command, when it is run); every other plug-in keeps
working, and no plug-in replaces a built-in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from flexmatch.errors import ConfigError

K = TypeVar("K")
T = TypeVar("T")
_log = logging.getLogger("flexmatch.plugins")


@dataclass(frozen=True)
class Hook:
    """One thing users extend: its name in messages, and its entry-point group."""

    what: str
    group: str


CHAIN_TYPES = Hook("chain type", "flexmatch.chains")
SOURCE_TYPES = Hook("source type", "flexmatch.sources")
PARSERS = Hook("parser", "flexmatch.parsers")
HOOKS = (CHAIN_TYPES, SOURCE_TYPES, PARSERS)  # what the knowledge base reads
COMMANDS = Hook("command", "flexmatch.commands")  # what the command line reads

Accept = Callable[[str, Any, str], Iterable[tuple[Any, Any]]]
"""Checks one loaded object (its name, the object, where it came from) and gives the
(key, object) pairs to register, or raises (``TypeError``, ``ValueError``) to refuse it."""


def where(obj: Any) -> str:
    """``module:qualname`` of a registered object, marked when it is a built-in."""
    module = str(getattr(obj, "__module__", None) or getattr(obj, "__name__", "?"))
    name = getattr(obj, "__qualname__", type(obj).__name__)
    built_in = " (built-in)" if module.split(".")[0] == "flexmatch" else ""
    return f"{module}:{name}{built_in}"


@dataclass
class Registry(Generic[K, T]):
    """Everything one hook registers, keyed by ``K`` (a name; a chain type is keyed by
    ``(kind, type)``), loaded once on first use: built-ins, then entry points."""

    hook: Hook
    builtin: Iterable[tuple[str, str]]
    accept: Accept
    items: dict[K, T] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)  # plug-in name → why it is not used
    loaded: bool = False
    in_process: list[tuple[str, Any, str]] = field(default_factory=list)  # ``register``
    importing: str | None = None  # the entry point being loaded now
    # what a plug-in module registered with ``register`` as it was imported (a module is
    # imported once: on a second load, its registrations are taken from here)
    by_module: dict[str, list[tuple[str, Any, str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _REGISTRIES.append(self)

    def add(self, name: str, obj: Any, origin: str) -> None:
        """The one registration path: built-ins, entry points and in-process ``register``.
        A key another object holds is refused (``ValueError`` naming both)."""
        for key, value in list(self.accept(name, obj, origin)):
            holder = self.items.get(key)
            if holder is not None and holder is not value and where(holder) != where(value):
                raise ValueError(
                    f"{self._label(key)} is already registered by "
                    f"{where(holder)}; {where(value)} cannot replace it (register it under "
                    f"another name)"
                )
            self.items[key] = value

    def register(self, name: str, obj: Any, origin: str) -> None:
        """Register ``obj`` from code in this process (a decorator), after the built-ins
        and plug-ins, and again whenever they load again."""
        self.load()
        self.add(name, obj, origin)
        if self.importing is None:
            self.in_process.append((name, obj, origin))
        else:  # a plug-in module registering as it is imported: the plug-in's
            self.by_module.setdefault(self.importing, []).append((name, obj, origin))

    def load(self) -> None:
        """Register the built-ins, then every installed plug-in, once."""
        if self.loaded:
            return
        self.loaded = True
        builtin = dict(self.builtin)
        for name, value in self.builtin:
            self._take(name, EntryPoint(name, value, self.hook.group), plugin=False)
        found: dict[str, list[EntryPoint]] = {}
        for entry_point in entry_points(group=self.hook.group):
            if entry_point.name in builtin and entry_point.value == builtin[entry_point.name]:
                continue  # this package's own declaration of a built-in
            same = found.setdefault(entry_point.name, [])
            if all(e.value != entry_point.value for e in same):
                same.append(entry_point)
        for name, candidates in sorted(found.items()):
            if len(candidates) > 1:
                values = " and ".join(f"'{e.value}'" for e in candidates)
                self._broken(name, f"two plug-ins declare it ({values})")
            else:
                self._take(name, candidates[0], plugin=True)
        for name, obj, origin in self.in_process:
            try:
                self.add(name, obj, origin)
            except (TypeError, ValueError) as exc:  # a plug-in on the path took it since
                self._broken(name, f"'{origin}' was refused: {exc}")

    def _take(self, name: str, entry_point: EntryPoint, *, plugin: bool) -> None:
        try:
            known = self.by_module.get(entry_point.value)
            self.importing = entry_point.value
            try:
                loaded = entry_point.load()
            finally:
                self.importing = None
            self.add(name, loaded, entry_point.value)
            for registered in known or ():  # imported before: its registrations again
                self.add(*registered)
        except Exception as exc:  # any error in a plug-in's import or shape is the plug-in's
            if not plugin:
                raise
            reason = f"'{entry_point.value}' failed to load: {type(exc).__name__}: {exc}"
            if isinstance(exc, ValueError | TypeError):
                reason = f"'{entry_point.value}' was refused: {exc}"
            self._broken(name, reason)

    def _label(self, key: Any) -> str:
        if isinstance(key, tuple):  # (kind, name)
            return f"{key[0]} {self.hook.what} '{key[1]}'"
        return f"{self.hook.what} '{key}'"

    def refuse(self, name: str, reason: str) -> None:
        """A plug-in found broken once used (a command plug-in that fails as it adds its
        command): taken out, and remembered like one that failed to load."""
        for key in [key for key in self.items if _key_text(key) == name]:
            del self.items[key]
        self._broken(name, reason)

    def _broken(self, name: str, reason: str) -> None:
        self.broken[name] = reason
        _log.info("%s plug-in '%s': %s", self.hook.what, name, reason)

    def get(self, key: K, where: str, known: Iterable[str] | None = None) -> T:
        """What ``key`` names, or a ConfigError at ``where`` naming the known ones and any
        plug-in that failed to load (it may have been the one to provide it)."""
        self.load()
        if key in self.items:
            return self.items[key]
        name = _key_text(key)
        if name in self.broken:
            raise ConfigError(f"{where}: {self.hook.what} plug-in '{name}': {self.broken[name]}")
        listed = ", ".join(sorted(known if known is not None else map(_key_text, self.items)))
        failed = "".join(
            f"; {self.hook.what} plug-in '{plugin}' may provide it, but {reason}"
            for plugin, reason in sorted(self.broken.items())
        )
        raise ConfigError(
            f"{where}: no {self._label(key)} (known {self.hook.what}s: {listed or 'none'}; "
            f"a plug-in adds one through the '{self.hook.group}' entry points){failed}"
        )

    def names(self) -> list[K]:
        self.load()
        return sorted(self.items)  # type: ignore[type-var]

    def failures(self) -> dict[str, str]:
        """The plug-ins of this hook that are not used, and why."""
        self.load()
        return dict(self.broken)

    def reset(self) -> None:
        """Forget the registrations, to load them again on next use (tests that add
        plug-ins); in-process ones are registered again then."""
        self.items.clear()
        self.broken.clear()
        self.loaded = False


_REGISTRIES: list[Registry[Any, Any]] = []


def reset() -> None:
    """Forget every hook's registrations, to load them again on next use (for tests that
    put plug-ins on the path)."""
    for registry in _REGISTRIES:
        registry.reset()


def _key_text(key: Any) -> str:
    return key[-1] if isinstance(key, tuple) else str(key)
