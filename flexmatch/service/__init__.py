"""The service layer: what a running service needs beyond the knowledge base itself.

API keys (``keys``), the state every replica shares (``shared_state``: keys, job records,
cache generations, sync leases and last runs, in ``syncs``) in one database
(``state_db``), saved eval runs for the console (``evals``) and sandboxed prompt
previews (``previews``). It sits between the facade (``flexmatch``) and the adapters,
which import from here the names in ``__all__`` and, from ``flexmatch``, the public API.
Applications need none of it: they use ``flexmatch.__all__``. Names load on first use,
as in ``flexmatch``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# name → (module, name in it)
EXPORTS: dict[str, tuple[str, str]] = {
    "ApiKey": ("flexmatch.service.keys", "ApiKey"),
    "BASELINES": ("flexmatch.evaluation", "BASELINES"),
    "EvalRow": ("flexmatch.service.evals", "EvalRow"),
    "EvalRun": ("flexmatch.service.evals", "EvalRun"),
    "JobRecord": ("flexmatch.service.shared_state", "JobRecord"),
    "KeyIdentity": ("flexmatch.service.keys", "KeyIdentity"),
    "KeyStore": ("flexmatch.service.keys", "KeyStore"),
    "PERMISSIONS": ("flexmatch.service.keys", "PERMISSIONS"),
    "Permission": ("flexmatch.service.keys", "Permission"),
    "SharedState": ("flexmatch.service.shared_state", "SharedState"),
    "SyncLease": ("flexmatch.service.syncs", "SyncLease"),
    "SyncRun": ("flexmatch.service.syncs", "SyncRun"),
    "SyncState": ("flexmatch.service.syncs", "SyncState"),
    "bounded_previews": ("flexmatch.service.previews", "bounded_previews"),
    "check_tenant": ("flexmatch.service.keys", "check_tenant"),
    "grants": ("flexmatch.service.keys", "grants"),
    "key_identity": ("flexmatch.service.keys", "key_identity"),
    "load_eval": ("flexmatch.service.evals", "load_eval"),
    "require_extra": ("flexmatch.extras", "require"),
    "run_sync": ("flexmatch.async_bridge", "run_sync"),
    "safe_filename": ("flexmatch.inputs.sources", "safe_filename"),
    "save_eval": ("flexmatch.service.evals", "save_eval"),
}
__all__ = sorted(EXPORTS)


def __getattr__(name: str) -> Any:
    if name in EXPORTS:
        module, attribute = EXPORTS[name]
        value = getattr(import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'flexmatch.service' has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)


if TYPE_CHECKING:  # the same names, for type checkers and editors
    from flexmatch.async_bridge import run_sync
    from flexmatch.evaluation import BASELINES
    from flexmatch.extras import require as require_extra
    from flexmatch.inputs.sources import safe_filename
    from flexmatch.service.evals import EvalRow, EvalRun, load_eval, save_eval
    from flexmatch.service.keys import (
        PERMISSIONS,
        ApiKey,
        KeyIdentity,
        KeyStore,
        Permission,
        check_tenant,
        grants,
        key_identity,
    )
    from flexmatch.service.previews import bounded_previews
    from flexmatch.service.shared_state import JobRecord, SharedState
    from flexmatch.service.syncs import SyncLease, SyncRun, SyncState
