"""Optional dependencies, imported on first use with an install hint naming the extra.

Heavy or specialised libraries (torch, FastAPI, the MCP SDK, document parsers) are
extras, so a minimal install stays small; code that needs one calls ``require`` at the
point of use, never at import time.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from flexmatch.errors import MissingExtraError


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module``, or say which extra installs it and what it is needed for."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{purpose} needs the '{extra}' extra (missing module '{exc.name or module}'): "
            f"pip install 'flexmatch[{extra}]'"
        ) from exc
