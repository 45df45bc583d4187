"""The server's logging: one handler on the root logger, as text or as JSON lines.

Text lines (``INFO:     message``) are for a person at a terminal; JSON lines (one object
per line: ``time``, ``level``, ``logger``, ``message`` and a record's own fields, such as
the access log's ``method``, ``route``, ``status``) are for a log collector, chosen with
``flexmatch serve --log-format json`` or ``FLEXMATCH_LOG_FORMAT=json``. Uvicorn's own
lines go through the same handler, so a JSON log has no plain lines in it.

Python warnings (``warnings.warn`` from a library) are written through the same handler.
Libraries that log every call at INFO (LiteLLM says two or three lines per LLM call,
httpx one per request) are demoted to DEBUG: they show with ``--log-level debug`` only.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
# loggers whose INFO lines are per-call chatter, not news for an operator
NOISY_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx")

_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
# what every LogRecord has: anything else on a record was passed as ``extra``
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # uvicorn's copy of its message with terminal colours
}


class EscapingFormatter(logging.Formatter):
    """Log lines with client-sent text escaped: a control character (NUL, ESC, CR…) in a
    file name or URL is written as ``\\xNN``, never raw into the log."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


class JsonFormatter(logging.Formatter):
    """One JSON object per line; the record's ``extra`` fields become keys of their own,
    so a collector can filter on ``status`` or ``tenant`` without parsing a message.
    JSON escapes every control character, so a hostile file name cannot break a line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_"):
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class DemoteToDebug(logging.Filter):
    """Turn a library's INFO lines into DEBUG lines (shown only when the root logger is at
    DEBUG); its warnings and errors pass unchanged. A handler the library put on its own
    logger (LiteLLM adds one when imported, after this filter is in place) is removed, so
    its lines are written once, by the server's handler, in the server's format."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.logger = logger

    def filter(self, record: logging.LogRecord) -> bool:
        if self.logger.handlers:
            self.logger.handlers.clear()
        if record.levelno >= logging.WARNING:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


def formatter_for(log_format: LogFormat) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter()
    return EscapingFormatter("%(levelname)s:     %(message)s")


def install_logging(level: str, log_format: LogFormat = "text") -> None:
    """One handler on the root logger for every line the server writes (uvicorn's too:
    it is started without a logging config of its own), and the noisy libraries quiet."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"unknown log format {log_format!r}: use text or json")
    handler = logging.StreamHandler()
    handler.setFormatter(formatter_for(log_format))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # a library's warnings.warn (qdrant-client's version check, say) goes through the
    # same handler, so a JSON log stays JSON
    logging.captureWarnings(True)
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, DemoteToDebug) for f in logger.filters):
            logger.addFilter(DemoteToDebug(logger))
