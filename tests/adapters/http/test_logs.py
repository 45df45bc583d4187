"""The server's log format, without a server: JSON lines carry a record's own fields and
cannot be broken by what a client sends; a library's INFO chatter shows only at DEBUG,
written once. (A real ``flexmatch serve``'s log: ``test_serve_logs``.)"""

from __future__ import annotations

import json
import logging

from flexmatch.adapters.http.logs import DemoteToDebug, JsonFormatter


def test_json_lines_carry_the_record_fields_and_escape_control_characters() -> None:
    record = logging.LogRecord(
        "flexmatch.http.access", logging.INFO, __file__, 1, "a\nb %s", ("c",), None
    )
    record.status = 200
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["message"] == "a\nb c" and entry["status"] == 200
    assert entry["level"] == "INFO" and entry["logger"] == "flexmatch.http.access"
    assert entry["time"].endswith("+00:00")


def test_library_info_lines_are_demoted_to_debug() -> None:
    logger = logging.getLogger("test.noisy")
    root = logging.getLogger()
    level, seen = root.level, []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.levelname, record.getMessage()))

    own, keep = Keep(), Keep()
    logger.addHandler(own)  # a library's own handler, as LiteLLM adds one
    logger.addFilter(DemoteToDebug(logger))
    root.addHandler(keep)
    try:
        root.setLevel(logging.INFO)
        logger.info("per call")
        logger.warning("worth knowing")
        root.setLevel(logging.DEBUG)
        logger.info("now shown")
    finally:
        root.setLevel(level)
        root.removeHandler(keep)
    # written once (the library's handler is gone), the INFO line only at DEBUG, as DEBUG
    assert seen == [("WARNING", "worth knowing"), ("DEBUG", "now shown")]
    assert own not in logger.handlers
