"""The last ``flexmatch eval --save-to KB`` results, kept in the knowledge base for the
console's overview: one JSON file, replaced atomically by each saved run."""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from flexmatch.evaluation import Scores

EVAL_FILE = Path(".flexmatch") / "eval" / "latest.json"


class EvalRow(Scores):
    """One setup's scores in a saved run."""

    setup: str
    ingest_seconds: float = 0.0


class EvalRun(BaseModel):
    """A saved ``flexmatch eval`` run: which data set, when, and every setup's scores."""

    dataset: str
    split: str = "test"
    saved_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    rows: list[EvalRow]


def save_eval(kb_dir: Path, run: EvalRun) -> Path:
    """Write ``run`` as the knowledge base's latest eval results."""
    target = kb_dir / EVAL_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".eval-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(run.model_dump_json(indent=2))
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def load_eval(kb_dir: Path) -> EvalRun | None:
    """The latest saved run, or None (none saved, or a file this version cannot read)."""
    try:
        return EvalRun.model_validate_json((kb_dir / EVAL_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):
        return None
