"""FlexMatch: a question-indexed knowledge base for AI agents.

Everything an application may use is named in ``__all__``; the modules behind it are
internal and may move. What only a service needs (API keys, shared state, ...) is in
``flexmatch.service``. Names load on first use (``EXPORTS`` says from where), so
``import flexmatch`` and ``flexmatch --help`` stay fast: nothing heavy is imported until
it is needed.
"""

from __future__ import annotations

import os
import warnings
from importlib import import_module
from typing import TYPE_CHECKING, Any

# The process's environment, set once, where every process that uses FlexMatch starts
# (library, CLI, server workers), and only where not set already. ONNX Runtime's Linux
# build writes a device id and an event cache under ~/.cache and sends usage events from
# the moment it is imported unless this is set before; its disable_telemetry_events()
# comes too late to stop the writes, and an offline tool must not make them.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

# public name → (module, name in it)
EXPORTS: dict[str, tuple[str, str]] = {
    "Answer": ("flexmatch.results", "Answer"),
    "DepthError": ("flexmatch.errors", "DepthError"),
    "SearchCost": ("flexmatch.results", "SearchCost"),
    "check_depth": ("flexmatch.results", "check_depth"),
    "BeirDataset": ("flexmatch.evaluation", "BeirDataset"),
    "CONFIG_FILE": ("flexmatch.config", "CONFIG_FILE"),
    "ChainError": ("flexmatch.errors", "ChainError"),
    "ChainUse": ("flexmatch.models", "ChainUse"),
    "Chunk": ("flexmatch.models", "Chunk"),
    "ChunkView": ("flexmatch.models", "ChunkView"),
    "Client": ("flexmatch.client", "Client"),
    "ConfigError": ("flexmatch.errors", "ConfigError"),
    "CostEstimate": ("flexmatch.models", "CostEstimate"),
    "DEFAULT_TENANT": ("flexmatch.access", "DEFAULT_TENANT"),
    "Document": ("flexmatch.models", "Document"),
    "DoctorReport": ("flexmatch.engine.stores.repair", "DoctorReport"),
    "DocumentDetail": ("flexmatch.models", "DocumentDetail"),
    "DocumentNotFoundError": ("flexmatch.errors", "DocumentNotFoundError"),
    "DocumentOutcome": ("flexmatch.models", "DocumentOutcome"),
    "DocumentRecord": ("flexmatch.models", "DocumentRecord"),
    "DocumentStatus": ("flexmatch.models", "DocumentStatus"),
    "DocumentTooLargeError": ("flexmatch.errors", "DocumentTooLargeError"),
    "Element": ("flexmatch.models", "Element"),
    "ExpandMode": ("flexmatch.models", "ExpandMode"),
    "ExpandedContext": ("flexmatch.models", "ExpandedContext"),
    "EmbeddingError": ("flexmatch.errors", "EmbeddingError"),
    "EmptyDocumentError": ("flexmatch.errors", "EmptyDocumentError"),
    "EncryptedDocumentError": ("flexmatch.errors", "EncryptedDocumentError"),
    "FILTERABLE_FIELDS": ("flexmatch.engine.points", "FILTERABLE_FIELDS"),
    "Access": ("flexmatch.access", "Access"),
    "FailedDocument": ("flexmatch.models", "FailedDocument"),
    "FeedbackEvent": ("flexmatch.models", "FeedbackEvent"),
    "Gap": ("flexmatch.models", "Gap"),
    "GoldenItem": ("flexmatch.models", "GoldenItem"),
    "LogEntry": ("flexmatch.models", "LogEntry"),
    "FilterError": ("flexmatch.errors", "FilterError"),
    "Filters": ("flexmatch.engine.points", "Filters"),
    "FlexMatchError": ("flexmatch.errors", "FlexMatchError"),
    "IngestReport": ("flexmatch.models", "IngestReport"),
    "Job": ("flexmatch.models", "Job"),
    "JobCounts": ("flexmatch.models", "JobCounts"),
    "JobKind": ("flexmatch.models", "JobKind"),
    "JobStatus": ("flexmatch.models", "JobStatus"),
    "KBConfig": ("flexmatch.config", "KBConfig"),
    "KeyRequestError": ("flexmatch.errors", "KeyRequestError"),
    "KnowledgeBase": ("flexmatch.knowledge_base", "KnowledgeBase"),
    "KnowledgeBaseProtocol": ("flexmatch.contract", "KnowledgeBaseProtocol"),
    "LLMError": ("flexmatch.errors", "LLMError"),
    "Location": ("flexmatch.models", "Location"),
    "GrepHit": ("flexmatch.models", "GrepHit"),
    "GrepRequest": ("flexmatch.models", "GrepRequest"),
    "GrepResult": ("flexmatch.models", "GrepResult"),
    "Outline": ("flexmatch.models", "Outline"),
    "OutlineEntry": ("flexmatch.models", "OutlineEntry"),
    "ReadChunk": ("flexmatch.models", "ReadChunk"),
    "Reading": ("flexmatch.models", "Reading"),
    "ReadRequest": ("flexmatch.models", "ReadRequest"),
    "GrepArguments": ("flexmatch.tools", "GrepArguments"),
    "OutlineArguments": ("flexmatch.tools", "OutlineArguments"),
    "ReadArguments": ("flexmatch.tools", "ReadArguments"),
    "MatchingText": ("flexmatch.models", "MatchingText"),
    "MissingExtraError": ("flexmatch.errors", "MissingExtraError"),
    "ModelMismatchError": ("flexmatch.errors", "ModelMismatchError"),
    "NotProseError": ("flexmatch.errors", "NotProseError"),
    "Original": ("flexmatch.engine.archive", "Original"),
    "Outcome": ("flexmatch.models", "Outcome"),
    "ParseError": ("flexmatch.errors", "ParseError"),
    "ParsedDocument": ("flexmatch.models", "ParsedDocument"),
    "PayloadError": ("flexmatch.errors", "PayloadError"),
    "Principal": ("flexmatch.access", "Principal"),
    "ADMIN": ("flexmatch.access", "ADMIN"),
    "Everything": ("flexmatch.access", "Everything"),
    "GROUPS_HEADER": ("flexmatch.access", "GROUPS_HEADER"),
    "PRINCIPAL_HEADER": ("flexmatch.access", "PRINCIPAL_HEADER"),
    "Scope": ("flexmatch.access", "Scope"),
    "named_principal": ("flexmatch.access", "named_principal"),
    "PromptError": ("flexmatch.errors", "PromptError"),
    "QueryConfig": ("flexmatch.config", "QueryConfig"),
    "QueryCounts": ("flexmatch.engine.query.log", "QueryCounts"),
    "ReindexPlan": ("flexmatch.models", "ReindexPlan"),
    "ServiceError": ("flexmatch.errors", "ServiceError"),
    "ResultItem": ("flexmatch.results", "ResultItem"),
    "Scores": ("flexmatch.evaluation", "Scores"),
    "SearchResult": ("flexmatch.models", "SearchResult"),
    "Section": ("flexmatch.models", "Section"),
    "Setup": ("flexmatch.evaluation", "Setup"),
    "Signals": ("flexmatch.models", "Signals"),
    "SkippedDocument": ("flexmatch.models", "SkippedDocument"),
    "SourceChoiceError": ("flexmatch.errors", "SourceChoiceError"),
    "SourceConfig": ("flexmatch.config", "SourceConfig"),
    "SourceStats": ("flexmatch.models", "SourceStats"),
    "Stats": ("flexmatch.models", "Stats"),
    "SourceSync": ("flexmatch.models", "SourceSync"),
    "SyncReport": ("flexmatch.models", "SyncReport"),
    "StoreError": ("flexmatch.errors", "StoreError"),
    "ToolCallError": ("flexmatch.errors", "ToolCallError"),
    "ToolResult": ("flexmatch.results", "ToolResult"),
    "UnsupportedFormatError": ("flexmatch.errors", "UnsupportedFormatError"),
    "Usage": ("flexmatch.models", "Usage"),
    "WatchEvent": ("flexmatch.models", "WatchEvent"),
    "WebImportError": ("flexmatch.errors", "WebImportError"),
    "WriteConflictError": ("flexmatch.errors", "WriteConflictError"),
    "WriteRefusedError": ("flexmatch.errors", "WriteRefusedError"),
    "answer_result": ("flexmatch.results", "answer_result"),
    "describe_access": ("flexmatch.access", "describe"),
    "check_sets_no_access": ("flexmatch.access", "check_sets_no_access"),
    "parse_access": ("flexmatch.access", "parse_access"),
    "doctor_store": ("flexmatch.engine.stores.repair", "doctor_store"),
    "evaluate": ("flexmatch.evaluation", "evaluate"),
    "golden_yaml": ("flexmatch.engine.query.gaps", "golden_yaml"),
    "evaluate_golden": ("flexmatch.knowledge_base", "evaluate_golden"),
    "evaluate_setups": ("flexmatch.knowledge_base", "evaluate_setups"),
    "generate_golden": ("flexmatch.knowledge_base", "generate_golden"),
    "load_golden": ("flexmatch.golden", "load_golden"),
    "save_golden": ("flexmatch.golden", "save_golden"),
    "load_config": ("flexmatch.config", "load_config"),
    "source_chain_refs": ("flexmatch.config", "source_chain_refs"),
    "ChainChoice": ("flexmatch.config", "ChainChoice"),
    "SOURCE_SIDE": ("flexmatch.config", "SOURCE_SIDE"),
    "QUERY_SIDE": ("flexmatch.config", "QUERY_SIDE"),
    "load_setup": ("flexmatch.evaluation", "load_setup"),
    "prepare_local_model": ("flexmatch.engine.embedders", "prepare_local_model"),
    "readable_suffixes": ("flexmatch.inputs.parsing", "readable_suffixes"),
    "record_id": ("flexmatch.inputs.sources.records", "record_id"),
    "registered_chains": ("flexmatch.engine.chains.registry", "registered"),
    "broken_plugins": ("flexmatch.engine.plugin_failures", "broken_plugins"),
    "search_filters": ("flexmatch.engine.points", "search_filters"),
    "tool_result": ("flexmatch.results", "tool_result"),
    "AGENT_TOOLS": ("flexmatch.agent_tools", "AGENT_TOOLS"),
    "AgentTool": ("flexmatch.agent_tools", "AgentTool"),
    "ToolCaller": ("flexmatch.agent_tools", "ToolCaller"),
    "describe_tools": ("flexmatch.agent_tools", "describe_tools"),
    "scoped": ("flexmatch.agent_tools", "scoped"),
    "AddRecordArguments": ("flexmatch.tools", "AddRecordArguments"),
    "GetDocumentArguments": ("flexmatch.tools", "GetDocumentArguments"),
    "GoldenEvaluation": ("flexmatch.golden", "GoldenEvaluation"),
    "GoldenQuestion": ("flexmatch.golden", "GoldenQuestion"),
    "IngestUrlArguments": ("flexmatch.tools", "IngestUrlArguments"),
    "ListDocumentsArguments": ("flexmatch.tools", "ListDocumentsArguments"),
    "MAX_QUERY_CHARS": ("flexmatch.tools", "MAX_QUERY_CHARS"),
    "MAX_TOP_N": ("flexmatch.tools", "MAX_TOP_N"),
    "QueryError": ("flexmatch.errors", "QueryError"),
    "FeedbackRateError": ("flexmatch.errors", "FeedbackRateError"),
    "FeedbackReceipt": ("flexmatch.models", "FeedbackReceipt"),
    "Learned": ("flexmatch.models", "Learned"),
    "FeedbackArguments": ("flexmatch.tools", "FeedbackArguments"),
    "SearchArguments": ("flexmatch.tools", "SearchArguments"),
    "TOOL_ARGUMENTS": ("flexmatch.tools", "TOOL_ARGUMENTS"),
    "ToolArguments": ("flexmatch.tools", "ToolArguments"),
    "check_expand": ("flexmatch.tools", "check_expand"),
    "check_query": ("flexmatch.tools", "check_query"),
    "tool_schema": ("flexmatch.tools", "tool_schema"),
}
__all__ = sorted(EXPORTS)
__version__ = "0.1.0"

# names that left the public API for flexmatch.service (2026-12): they still resolve, with
# a DeprecationWarning on each use, until they are removed
MOVED_TO_SERVICE = frozenset(
    {
        "ApiKey",
        "BASELINES",
        "JobRecord",
        "KeyIdentity",
        "KeyStore",
        "PERMISSIONS",
        "Permission",
        "SharedState",
        "bounded_previews",
        "check_tenant",
        "key_identity",
        "require_extra",
        "run_sync",
        "safe_filename",
    }
)


def __getattr__(name: str) -> Any:
    if name in EXPORTS:
        module, attribute = EXPORTS[name]
        value = getattr(import_module(module), attribute)
        globals()[name] = value  # later look-ups are plain attribute reads
        return value
    if name in MOVED_TO_SERVICE:  # not cached: every use warns
        warnings.warn(
            f"flexmatch.{name} is deprecated: import it from flexmatch.service",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(import_module("flexmatch.service"), name)
    raise AttributeError(f"module 'flexmatch' has no attribute {name!r}")


def __dir__() -> list[str]:
    return [*__all__, "__version__"]


if TYPE_CHECKING:  # the same names, for type checkers and editors
    from flexmatch.access import (
        ADMIN,
        DEFAULT_TENANT,
        GROUPS_HEADER,
        PRINCIPAL_HEADER,
        Everything,
        Scope,
        check_sets_no_access,
        named_principal,
    )
    from flexmatch.agent_tools import AGENT_TOOLS, AgentTool, ToolCaller, describe_tools, scoped
    from flexmatch.client import Client
    from flexmatch.config import (
        CONFIG_FILE,
        QUERY_SIDE,
        SOURCE_SIDE,
        ChainChoice,
        KBConfig,
        QueryConfig,
        SourceConfig,
        load_config,
        source_chain_refs,
    )
    from flexmatch.contract import KnowledgeBaseProtocol
    from flexmatch.engine.archive import Original
    from flexmatch.engine.chains.registry import registered as registered_chains
    from flexmatch.engine.embedders import prepare_local_model
    from flexmatch.engine.plugin_failures import broken_plugins
    from flexmatch.engine.points import FILTERABLE_FIELDS, Filters, search_filters
    from flexmatch.engine.query.gaps import golden_yaml
    from flexmatch.engine.query.log import QueryCounts
    from flexmatch.engine.stores.repair import DoctorReport, doctor_store
    from flexmatch.errors import (
        ChainError,
        ConfigError,
        DepthError,
        DocumentNotFoundError,
        DocumentTooLargeError,
        EmbeddingError,
        EmptyDocumentError,
        EncryptedDocumentError,
        FilterError,
        FlexMatchError,
        KeyRequestError,
        LLMError,
        MissingExtraError,
        ModelMismatchError,
        NotProseError,
        ParseError,
        PayloadError,
        PromptError,
        QueryError,
        ServiceError,
        SourceChoiceError,
        StoreError,
        ToolCallError,
        UnsupportedFormatError,
        WebImportError,
        WriteConflictError,
        WriteRefusedError,
    )
    from flexmatch.evaluation import BeirDataset, Scores, Setup, evaluate, load_setup
    from flexmatch.golden import GoldenEvaluation, GoldenQuestion, load_golden, save_golden
    from flexmatch.inputs.parsing import readable_suffixes
    from flexmatch.inputs.sources.records import record_id
    from flexmatch.knowledge_base import (
        KnowledgeBase,
        evaluate_golden,
        evaluate_setups,
        generate_golden,
    )
    from flexmatch.models import (
        ChainUse,
        Chunk,
        ChunkView,
        CostEstimate,
        Document,
        DocumentDetail,
        DocumentOutcome,
        DocumentRecord,
        DocumentStatus,
        Element,
        ExpandedContext,
        ExpandMode,
        FailedDocument,
        FeedbackEvent,
        Gap,
        GoldenItem,
        GrepHit,
        GrepRequest,
        GrepResult,
        IngestReport,
        Job,
        JobCounts,
        JobKind,
        JobStatus,
        Location,
        LogEntry,
        MatchingText,
        Outcome,
        Outline,
        OutlineEntry,
        ParsedDocument,
        ReadChunk,
        Reading,
        ReadRequest,
        ReindexPlan,
        SearchResult,
        Section,
        Signals,
        SkippedDocument,
        SourceStats,
        SourceSync,
        Stats,
        SyncReport,
        Usage,
        WatchEvent,
    )
    from flexmatch.results import (
        Answer,
        ResultItem,
        SearchCost,
        ToolResult,
        answer_result,
        check_depth,
        tool_result,
    )
    from flexmatch.tools import (
        MAX_QUERY_CHARS,
        MAX_TOP_N,
        TOOL_ARGUMENTS,
        AddRecordArguments,
        GetDocumentArguments,
        GrepArguments,
        IngestUrlArguments,
        ListDocumentsArguments,
        OutlineArguments,
        ReadArguments,
        SearchArguments,
        ToolArguments,
        check_expand,
        check_query,
        tool_schema,
    )
