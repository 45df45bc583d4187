"""Per-document access control: who may read a document, and who is asking.

A document may carry ``access: {public: bool, principals: [...]}`` (principals such as
``user:alice`` or ``group:hr``). It is stored on each of the document's points as a list
of *tokens* (``ACCESS_FIELD``), an indexed keyword field, so a search applies it as a
payload filter inside the search: the top-K is full, never filtered down afterwards.

The rules (documented for users in docs/security.md, "Access control"):

- a document without ``access`` is readable by everyone in its tenant (as before access
  control existed), and so is a ``public`` one;
- a restricted document is readable by the principals on its list and by admins only;
  one with ``public: false`` and no principals is readable by admins only;
- a ``Principal`` reads what is unrestricted, public, or lists its user or one of its
  groups; no principal at all (``None``) is the admin's view and applies no filter.

Access never enters a document's version: changing it rewrites its points' payload, with
no re-embedding and no LLM call.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from flexmatch.errors import ConfigError, WriteRefusedError

# the tenant a call reads and writes when it names none: a light module, so the adapters
# (and ``flexmatch --help``) have it without importing the knowledge base
DEFAULT_TENANT = "default"
ACCESS_FIELD = "access"  # the payload field of points and records, and the metadata key
PUBLIC = "public"  # the token of a public document
NOBODY = "nobody"  # the token of a document no principal may read (admins only)
# the end user a request names (a service or admin key's, or a local MCP server's), and
# their groups, comma-separated: set by the host application, never by a model
PRINCIPAL_HEADER = "X-FlexMatch-Principal"
GROUPS_HEADER = "X-FlexMatch-Groups"
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.@+=-]{0,127}"
_PRINCIPAL = re.compile(rf"^(user|group):{_NAME}$")
_BARE = re.compile(rf"^{_NAME}$")


def check_principal(value: str) -> str:
    """``user:NAME`` or ``group:NAME`` (letters, digits, ``_.@+=-``), or a ``ConfigError``
    naming it."""
    if not isinstance(value, str) or not _PRINCIPAL.match(value):
        raise ConfigError(
            f"principal {str(value)[:80]!r} must be 'user:NAME' or 'group:NAME' (a name of "
            "letters, digits and _.@+=-, at most 128 characters)"
        )
    return value


class Access(BaseModel):
    """Who may read a document: everyone (``public``) and/or the principals listed."""

    model_config = ConfigDict(extra="forbid")

    public: bool = False
    principals: list[str] = Field(default_factory=list, max_length=1_000)

    @field_validator("principals")
    @classmethod
    def _principals(cls, value: list[str]) -> list[str]:
        try:
            return sorted({check_principal(item) for item in value})
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    def tokens(self) -> list[str]:
        """What is stored on the document's points (never empty: an empty list would
        read as unrestricted)."""
        tokens = ([PUBLIC] if self.public else []) + self.principals
        return tokens or [NOBODY]

    @classmethod
    def from_tokens(cls, tokens: Iterable[str]) -> Access:
        kept = [t for t in tokens if t not in (PUBLIC, NOBODY)]
        return cls(public=PUBLIC in tokens, principals=kept)


def parse_access(value: Any, where: str) -> Access:
    """An ``access`` value from a record, metadata or a config, or a ``ConfigError``
    naming ``where``. A list is shorthand for its principals; ``"public"`` for public."""
    if value == PUBLIC:
        value = {"public": True}
    elif isinstance(value, list):
        value = {"principals": value}
    try:
        return Access.model_validate(value)
    except ValidationError as exc:
        problem = "; ".join(error["msg"] for error in exc.errors())
        raise ConfigError(f"{where}: access {str(value)[:120]}: {problem}") from None


class Principal(BaseModel):
    """Who is asking: a user and the groups they belong to. ``Principal()`` (no user, no
    groups) reads only unrestricted and public documents: a missing identity never widens
    access."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user: str | None = None
    groups: tuple[str, ...] = ()

    @field_validator("user")
    @classmethod
    def _user(cls, value: str | None) -> str | None:
        if value is not None and not _BARE.match(value.removeprefix("user:")):
            raise ValueError(f"user {value[:80]!r} is not a name (letters, digits, _.@+=-)")
        return value.removeprefix("user:") if value is not None else None

    @field_validator("groups", mode="before")
    @classmethod
    def _groups(cls, value: Any) -> Any:
        if not isinstance(value, list | tuple | set):
            return value
        names = []
        for group in value:
            name = str(group).removeprefix("group:")
            if not _BARE.match(name):
                problem = "is not a name (letters, digits, _.@+=-)"
                raise ValueError(f"group {str(group)[:80]!r} {problem}")
            names.append(name)
        return tuple(sorted(set(names)))

    def tokens(self) -> list[str]:
        """The access tokens this principal holds: a document listing any of them (or
        none at all) is readable."""
        return [
            PUBLIC,
            *([f"user:{self.user}"] if self.user else []),
            *(f"group:{g}" for g in self.groups),
        ]

    def may_read(self, tokens: list[str] | None) -> bool:
        """Whether a document stored with access ``tokens`` is readable by this principal
        (no tokens: unrestricted)."""
        return not tokens or not set(tokens).isdisjoint(self.tokens())

    def key(self) -> str:
        """One string per distinct principal (the search cache's key)."""
        return "\x1f".join(self.tokens())

    def label(self) -> str:
        user = f"user:{self.user}" if self.user else "no user"
        return user + "".join(f", group:{g}" for g in self.groups)

    @classmethod
    def parse(cls, user: str | None, groups: Iterable[str] = ()) -> Principal:
        """From the CLI's ``--as user:alice --group eng`` or an HTTP header, or a
        ``ConfigError`` naming what is wrong."""
        try:
            return cls(user=user or None, groups=tuple(groups))
        except ValidationError as exc:
            problem = "; ".join(error["msg"] for error in exc.errors())
            raise ConfigError(f"principal: {problem}") from None


class Everything(enum.Enum):
    """``ADMIN``: an explicit choice to read and write everything, for the integrations
    (frameworks, agent tools) that otherwise refuse to run unscoped over restricted
    documents. The knowledge base's own methods spell it ``principal=None``."""

    ADMIN = "admin"


ADMIN = Everything.ADMIN

Scope = Principal | Everything
"""Whom an integration acts for: a person, or everything (``ADMIN``)."""


def named_principal(header: Callable[[str], str | None]) -> Principal | None:
    """The end user a request names in its headers (``header(name)`` reads one):
    ``X-FlexMatch-Principal: user:alice`` and ``X-FlexMatch-Groups: eng, hr``; None when
    it names nobody (neither header sent), ``Principal()`` when they are sent empty (the
    empty principal: what the whole tenant may read), a ``ConfigError`` naming the header
    when malformed. The one parser of them: the HTTP API and the MCP server both call it."""
    sent_user, sent_groups = header(PRINCIPAL_HEADER), header(GROUPS_HEADER)
    if sent_user is None and sent_groups is None:
        return None
    user = (sent_user or "").strip()
    groups = [g.strip() for g in (sent_groups or "").split(",") if g.strip()]
    if user and not user.startswith("user:"):
        raise ConfigError(f"{PRINCIPAL_HEADER} {user[:80]!r} must be 'user:NAME'")
    return Principal.parse(user or None, groups)


def principal_headers(principal: Principal | None) -> dict[str, str]:
    """``named_principal``'s inverse: the headers that name ``principal`` (none: no one).
    Both are always set, empty when unused, so they replace a client's defaults whole."""
    if principal is None:
        return {}
    return {
        PRINCIPAL_HEADER: f"user:{principal.user}" if principal.user else "",
        GROUPS_HEADER: ", ".join(principal.groups),
    }


def readable(tokens: list[str] | None, principal: Principal | None) -> bool:
    """Whether a document whose stored access is ``tokens`` is readable by ``principal``
    (``None``: the admin's view, everything)."""
    return principal is None or principal.may_read(tokens)


def access_filter(principal: Principal | None) -> dict[str, list[str]]:
    """The payload condition a search adds for ``principal`` (none for an admin). The
    stores read ``ACCESS_FIELD`` as "any of these tokens, or no access at all"."""
    return {} if principal is None else {ACCESS_FIELD: principal.tokens()}


def resolve_access(
    metadata: Mapping[str, Any],
    path: str,
    rules: Mapping[str, Access],
    default: Access | None,
    where: str,
) -> list[str] | None:
    """A document's stored access tokens: the first rule whose glob matches its ``path``
    (relative to the source's root, case-sensitive), else the source's default, else none
    (unrestricted); narrowed by the document's own ``access`` (a record's field), which
    may never be wider than that: a document's content never opens itself up."""
    ceiling = next(
        (access for pattern, access in rules.items() if path and fnmatchcase(path, pattern)),
        default,
    )
    if ACCESS_FIELD not in metadata:
        return ceiling.tokens() if ceiling is not None else None
    declared = parse_access(metadata[ACCESS_FIELD], where)
    if ceiling is not None and not within(declared, ceiling):
        raise ConfigError(
            f"{where}: access {describe(declared.tokens())} is wider than its source allows "
            f"({describe(ceiling.tokens())}); only an admin can widen a document's access "
            "(PUT /v1/documents/ID/access or `flexmatch docs access`)"
        )
    return declared.tokens()


def within(declared: Access, ceiling: Access) -> bool:
    """Whether every reader ``declared`` admits is one ``ceiling`` admits too."""
    if ceiling.public:
        return True
    return not declared.public and set(declared.principals) <= set(ceiling.principals)


def describe(tokens: list[str] | None) -> str:
    """Who can read a document, in words (``docs show``)."""
    if not tokens:
        return "everyone in the tenant (no access list)"
    access = Access.from_tokens(tokens)
    parts = (["everyone (public)"] if access.public else []) + access.principals
    return ", ".join(parts) if parts else "admins only"


def check_sets_no_access(writer: Principal | None, field: str) -> None:
    """Only an admin says who may read a document: a write by ``writer`` (``None``: an
    admin) that sets a document's access in ``field`` is refused unless it is an
    admin's. The engine applies it to every write; a request that declares access
    up front is refused by it before any work starts."""
    if writer is not None:
        raise WriteRefusedError(f"only an admin may set a document's access ({field})")


def principal_name(principal: Principal | None) -> str:
    """Who acts, by name, as the query log and feedback events name them: never a key,
    a secret or a header."""
    if principal is None:
        return "admin"
    return f"user:{principal.user}" if principal.user else "anonymous"
