"""Format: the last stage of a query, the tool result made the text an agent reads."""

from __future__ import annotations

from collections.abc import Callable

from flexmatch.engine.chains import Formatter
from flexmatch.results import ResultItem, ToolResult


async def format_result(result: ToolResult, formatter_of: Callable[[str | None], Formatter]) -> str:
    """``result`` formatted by each result's source's formatter (``formatter_of(source)``;
    ``None``: the default's). Results whose sources format differently are formatted in
    parts, one per run of results with the same formatter, so the text keeps their rank
    order."""
    runs: list[tuple[Formatter, list[ResultItem]]] = []  # in rank order
    for item in result.results:
        chosen = formatter_of(item.source)
        if runs and runs[-1][0] is chosen:
            runs[-1][1].append(item)
        else:
            runs.append((chosen, [item]))
    if len({id(chosen) for chosen, _ in runs}) <= 1:
        return await (runs[0][0] if runs else formatter_of(None)).run(result)
    texts = []
    for chosen, items in runs:
        texts.append(await chosen.run(result.model_copy(update={"results": items})))
    return "\n\n".join(texts)
