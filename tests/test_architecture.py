"""The layout is the architecture: these tests read the package's imports and hold it to it.

foundation (errors, models, config, results, templates, …) ← inputs ← engine ← facade
(``KnowledgeBase`` and the public ``flexmatch`` namespace) ← service (API keys, shared
state, …: ``flexmatch.service``) ← adapters (CLI, HTTP, MCP, agent tool). Nothing imports
upward, nothing imports in a circle, and the adapters see only ``flexmatch.__all__`` and
``flexmatch.service.__all__``.
"""

from __future__ import annotations

import ast
import inspect
from functools import cache
from pathlib import Path

import pytest

import flexmatch
import flexmatch.service
from flexmatch import errors

PACKAGE = Path(flexmatch.__file__).resolve().parent

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "foundation",
        (
            "flexmatch.async_bridge",
            "flexmatch.deadlines",
            "flexmatch.errors",
            "flexmatch.extras",
            "flexmatch.lifecycle",
            "flexmatch.models",
            "flexmatch.payloads",
            "flexmatch.plugins",
            "flexmatch.results",
            "flexmatch.text",
            "flexmatch.yamlio",
            "flexmatch.resources",
            "flexmatch.templates",
            "flexmatch.config",
            "flexmatch.config_templates",
            "flexmatch.access",
            "flexmatch.tools",
        ),
    ),
    ("inputs", ("flexmatch.inputs",)),
    ("engine", ("flexmatch.engine",)),
    (
        "facade",
        (
            "flexmatch.sync",
            "flexmatch.sharing",
            "flexmatch.watching",
            "flexmatch.knowledge_base",
            "flexmatch.agent_tools",
            "flexmatch.evaluation",
            "flexmatch.golden",
            "flexmatch.chains",
            "flexmatch.sources",
            "flexmatch.client",
            "flexmatch.contract",
            "flexmatch",
        ),
    ),
    ("service", ("flexmatch.service",)),
    ("adapters", ("flexmatch.adapters",)),
]
# process plumbing a server adapter needs for its worker processes: not knowledge-base API
ADAPTER_PLUMBING = {"flexmatch.lifecycle"}
# what every command shares, the CLI's own and those the other adapters add to it through
# the ``flexmatch.commands`` hook: the common options and the hook's registry. Every
# adapter may import it; it imports only the foundation (``test_the_shared_...`` below)
ADAPTER_SHARED = {"flexmatch.adapters.command_line"}
# packages that are one concept each count as one node of the import graph (the measure
# that gave the old layout its 14 levels); the wings (engine, inputs, adapters) do not
CONCEPT_PACKAGES = (
    "flexmatch.engine.chains",
    "flexmatch.engine.ingest",
    "flexmatch.engine.query",
    "flexmatch.engine.embedders",
    "flexmatch.engine.stores",
    "flexmatch.inputs.parsing",
    "flexmatch.inputs.sources",
    "flexmatch.models",
    "flexmatch.service",
    "flexmatch.adapters.http",
    "flexmatch.adapters.cli",
    "flexmatch.adapters.frameworks",  # one integration per agent framework, on one shared base
    "flexmatch.testing",
)
MAX_DEPTH = 8


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


@cache
def imports() -> dict[str, set[str]]:
    """Every flexmatch module each module imports, at any depth of its code."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in known else node.module)
        graph[name] = {m for m in found if m in known and m != name}
    return graph


def layer_of(module: str) -> int:
    best = (-1, -1)  # (prefix length, layer)
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module.startswith(prefix + ".") and prefix != "flexmatch"
            if (module == prefix or inside) and len(prefix) > best[0]:
                best = (len(prefix), rank)
    return best[1]


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in modules() if layer_of(m) < 0 and not m.startswith("flexmatch.testing")]
    assert unplaced == []


# the one testing helper built on the real store and facade, loaded on first use
TESTING_ON_THE_ENGINE = "flexmatch.testing.store"


def test_the_testing_helpers_stand_alone() -> None:
    """``flexmatch.testing`` (the fake LLM server, the hash embedder) is for plug-in authors
    too: stdlib only, but for the in-memory store, which is the real store and is imported
    only when used (``tests/testing/test_memory_store.py`` checks that at run time)."""
    for name, targets in imports().items():
        if name.startswith("flexmatch.testing") and name != TESTING_ON_THE_ENGINE:
            assert all(t.startswith("flexmatch.testing") for t in targets), (name, targets)


def test_no_upward_imports() -> None:
    upward = [
        f"{source} ({LAYERS[layer_of(source)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for source, targets in imports().items()
        if layer_of(source) >= 0
        for target in targets
        if layer_of(target) > layer_of(source)
    ]
    assert upward == []


def concept(module: str) -> str:
    return next((p for p in CONCEPT_PACKAGES if module == p or module.startswith(p + ".")), module)


def concept_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for source, targets in imports().items():
        node = concept(source)
        graph.setdefault(node, set()).update(concept(t) for t in targets if concept(t) != node)
    return graph


def test_no_module_imports_in_a_circle() -> None:
    _levels(imports())


def test_no_cycles_and_at_most_eight_levels_deep() -> None:
    """Every import counts, lazy ones too; the longest chain has at most eight nodes:
    foundation (three levels) ← the engine's parts ← its stage packages ← the facade ←
    the ``flexmatch`` namespace ← an adapter."""
    graph = concept_graph()
    levels = _levels(graph)
    deepest = max(graph, key=levels.__getitem__)
    assert levels[deepest] <= MAX_DEPTH, f"{deepest} sits {levels[deepest]} levels deep"


def _levels(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each node's depth (1 + its deepest import); fails on a cycle, naming it."""
    depth: dict[str, int] = {}
    visiting: list[str] = []

    def levels(module: str) -> int:
        if module in depth:
            return depth[module]
        assert module not in visiting, "import cycle: " + " → ".join([*visiting, module])
        visiting.append(module)
        depth[module] = 1 + max((levels(t) for t in graph[module]), default=0)
        visiting.pop()
        return depth[module]

    for module in graph:
        levels(module)
    return depth


def test_adapters_use_only_the_public_api() -> None:
    """An adapter imports names from ``flexmatch`` itself (each one in ``__all__``), from
    ``flexmatch.service`` (each one in its ``__all__``), modules of its own adapter and
    the one module they share (``ADAPTER_SHARED``); none imports another (the CLI starts
    the others through the ``flexmatch.commands`` plug-in hook)."""
    exported = {
        "flexmatch": set(flexmatch.__all__) | {"__version__"},
        "flexmatch.service": set(flexmatch.service.__all__),
    }
    problems: list[str] = []
    for name, path in modules().items():
        if not name.startswith("flexmatch.adapters.") or name in ADAPTER_SHARED:
            continue  # the shared module has a rule of its own
        own = name.split(".")[2]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in exported:
                public = exported[node.module]
                problems += [
                    f"{name}: {node.module}.{a.name} is not exported"
                    for a in node.names
                    if a.name not in public
                ]
                continue
            targets = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for target in targets:
                if target in exported or not target.startswith("flexmatch."):
                    continue
                if target in ADAPTER_PLUMBING or target in ADAPTER_SHARED:
                    continue
                parts = target.split(".")
                if parts[1] != "adapters":
                    problems.append(f"{name} imports internal module {target}")
                elif len(parts) > 2 and parts[2] != own:
                    problems.append(f"{name} imports another adapter: {target}")
    assert problems == [], problems


def test_the_shared_command_line_module_stands_on_the_foundation() -> None:
    """The one module every adapter may share imports nothing above the foundation, so
    sharing it neither joins two adapters nor adds a level above ``flexmatch``."""
    for shared in ADAPTER_SHARED:
        above = [t for t in imports()[shared] if layer_of(t) > 0]
        assert above == [], f"{shared} imports {above}"


def test_adapters_read_only_exported_names_by_attribute() -> None:
    """``import flexmatch as fm`` then ``fm.KeyStore`` is held to the same lists as a
    ``from`` import (a moved name would only warn at run time)."""
    exported = {
        "flexmatch": set(flexmatch.__all__) | {"__version__"},
        "flexmatch.service": set(flexmatch.service.__all__),
    }
    problems: list[str] = []
    for name, path in modules().items():
        if not name.startswith("flexmatch.adapters."):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = {
            a.asname: a.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for a in node.names
            if a.name in exported and a.asname
        }
        problems += [
            f"{name}: {aliases[node.value.id]}.{node.attr} is not exported"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr not in exported[aliases[node.value.id]]
        ]
    assert problems == [], problems


def test_every_public_name_resolves() -> None:
    for name in flexmatch.__all__:
        assert getattr(flexmatch, name, None) is not None, name


def test_one_error_tree_every_error_public() -> None:
    classes = [
        obj
        for obj in vars(errors).values()
        if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == errors.__name__
    ]
    assert all(issubclass(c, errors.FlexMatchError) for c in classes)
    assert {c.__name__ for c in classes} <= set(flexmatch.__all__)
    tree = errors.__doc__ or ""
    assert all(c.__name__ in tree for c in classes), "errors.py's docstring draws the whole tree"
    elsewhere = [
        f"{name}: {node.name}"
        for name, path in modules().items()
        if name != "flexmatch.errors"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
        and any(
            getattr(b, "id", getattr(b, "attr", "")).endswith(("Error", "Exception"))
            for b in node.bases
        )
    ]
    # HTTP responses in exception form, raised and caught inside the HTTP adapter only
    transport = [
        "flexmatch.adapters.http.errors: ApiError",
        "flexmatch.adapters.http.limits: BodyTooLarge",
    ]
    assert sorted(elsewhere) == transport, "every error class lives in flexmatch/errors.py"


def test_public_api_is_pinned() -> None:
    assert sorted(flexmatch.__all__) == [
        "ADMIN",
        "AGENT_TOOLS",
        "Access",
        "AddRecordArguments",
        "AgentTool",
        "Answer",
        "BeirDataset",
        "CONFIG_FILE",
        "ChainChoice",
        "ChainError",
        "ChainUse",
        "Chunk",
        "ChunkView",
        "Client",
        "ConfigError",
        "CostEstimate",
        "DEFAULT_TENANT",
        "DepthError",
        "DoctorReport",
        "Document",
        "DocumentDetail",
        "DocumentNotFoundError",
        "DocumentOutcome",
        "DocumentRecord",
        "DocumentStatus",
        "DocumentTooLargeError",
        "Element",
        "EmbeddingError",
        "EmptyDocumentError",
        "EncryptedDocumentError",
        "Everything",
        "ExpandMode",
        "ExpandedContext",
        "FILTERABLE_FIELDS",
        "FailedDocument",
        "FeedbackArguments",
        "FeedbackEvent",
        "FeedbackRateError",
        "FeedbackReceipt",
        "FilterError",
        "Filters",
        "FlexMatchError",
        "GROUPS_HEADER",
        "Gap",
        "GetDocumentArguments",
        "GoldenEvaluation",
        "GoldenItem",
        "GoldenQuestion",
        "GrepArguments",
        "GrepHit",
        "GrepRequest",
        "GrepResult",
        "IngestReport",
        "IngestUrlArguments",
        "Job",
        "JobCounts",
        "JobKind",
        "JobStatus",
        "KBConfig",
        "KeyRequestError",
        "KnowledgeBase",
        "KnowledgeBaseProtocol",
        "LLMError",
        "Learned",
        "ListDocumentsArguments",
        "Location",
        "LogEntry",
        "MAX_QUERY_CHARS",
        "MAX_TOP_N",
        "MatchingText",
        "MissingExtraError",
        "ModelMismatchError",
        "NotProseError",
        "Original",
        "Outcome",
        "Outline",
        "OutlineArguments",
        "OutlineEntry",
        "PRINCIPAL_HEADER",
        "ParseError",
        "ParsedDocument",
        "PayloadError",
        "Principal",
        "PromptError",
        "QUERY_SIDE",
        "QueryConfig",
        "QueryCounts",
        "QueryError",
        "ReadArguments",
        "ReadChunk",
        "ReadRequest",
        "Reading",
        "ReindexPlan",
        "ResultItem",
        "SOURCE_SIDE",
        "Scope",
        "Scores",
        "SearchArguments",
        "SearchCost",
        "SearchResult",
        "Section",
        "ServiceError",
        "Setup",
        "Signals",
        "SkippedDocument",
        "SourceChoiceError",
        "SourceConfig",
        "SourceStats",
        "SourceSync",
        "Stats",
        "StoreError",
        "SyncReport",
        "TOOL_ARGUMENTS",
        "ToolArguments",
        "ToolCallError",
        "ToolCaller",
        "ToolResult",
        "UnsupportedFormatError",
        "Usage",
        "WatchEvent",
        "WebImportError",
        "WriteConflictError",
        "WriteRefusedError",
        "answer_result",
        "broken_plugins",
        "check_depth",
        "check_expand",
        "check_query",
        "check_sets_no_access",
        "describe_access",
        "describe_tools",
        "doctor_store",
        "evaluate",
        "evaluate_golden",
        "evaluate_setups",
        "generate_golden",
        "golden_yaml",
        "load_config",
        "load_golden",
        "load_setup",
        "named_principal",
        "parse_access",
        "prepare_local_model",
        "readable_suffixes",
        "record_id",
        "registered_chains",
        "save_golden",
        "scoped",
        "search_filters",
        "source_chain_refs",
        "tool_result",
        "tool_schema",
    ]


def test_the_service_names_are_pinned() -> None:
    """What the adapters take from the service layer (not public API, but one list)."""
    assert flexmatch.service.__all__ == [
        "ApiKey",
        "BASELINES",
        "EvalRow",
        "EvalRun",
        "JobRecord",
        "KeyIdentity",
        "KeyStore",
        "PERMISSIONS",
        "Permission",
        "SharedState",
        "SyncLease",
        "SyncRun",
        "SyncState",
        "bounded_previews",
        "check_tenant",
        "grants",
        "key_identity",
        "load_eval",
        "require_extra",
        "run_sync",
        "safe_filename",
        "save_eval",
    ]
    assert all(
        getattr(flexmatch.service, name, None) is not None for name in flexmatch.service.__all__
    )


def test_names_moved_to_the_service_still_resolve_with_a_warning() -> None:
    """``flexmatch.KeyStore`` and the other moved names keep working for a while, each use
    warning where the name lives now; none of them is public any more."""
    assert set(flexmatch.service.__all__) >= flexmatch.MOVED_TO_SERVICE
    assert not flexmatch.MOVED_TO_SERVICE & set(flexmatch.__all__)
    for name in sorted(flexmatch.MOVED_TO_SERVICE):
        with pytest.warns(
            DeprecationWarning, match=f"flexmatch.{name} is deprecated.*flexmatch.service"
        ):
            value = getattr(flexmatch, name)
        assert value is getattr(flexmatch.service, name)
    with pytest.warns(DeprecationWarning):  # every use warns, not only the first
        from flexmatch import KeyStore  # noqa: F401
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        flexmatch.NoSuchName  # noqa: B018
