"""What every CLI command module shares: where it writes (``console``: the result, on
standard output; ``errors``: notes, warnings and errors, on standard error), tenant text
made safe to print (``shown``, shared with the commands other adapters add), and the
knowledge base ``--kb`` names, opened.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

import flexmatch as fm  # names load on first use: `flexmatch --help` imports no engine
from flexmatch.adapters.command_line import kb_folder, shown

console = Console()
errors = Console(stderr=True)
__all__ = ["console", "errors", "open_kb", "say_notices", "shown"]


def open_kb(kb: Path) -> fm.KnowledgeBase:
    """The knowledge base ``--kb`` names; a folder that is not one is refused."""
    return fm.KnowledgeBase.open(kb_folder(kb))


def say_notices(kb: fm.KnowledgeBase) -> None:
    """What the knowledge base noticed as it opened (a chain file it could not use, …)."""
    for notice in kb.notices:
        errors.print(f"[yellow]note:[/] {shown(notice)}")
