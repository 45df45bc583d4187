"""``flexmatch query``: an answer, as panels for a person or as the tool result (``--json``)
or facts block (``--markdown``) an agent reads.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.panel import Panel

import flexmatch as fm  # names load on first use: `flexmatch --help` imports no engine
from flexmatch import DEFAULT_TENANT
from flexmatch.adapters.cli.output import console, errors, open_kb, say_notices, shown
from flexmatch.adapters.command_line import AsOption, GroupOption, KbOption, TenantOption, reader

if TYPE_CHECKING:
    from flexmatch import ResultItem, SearchCost


def query(
    text: Annotated[str, typer.Argument(help="What to look for.")],
    kb: KbOption = Path("."),
    top_n: Annotated[int | None, typer.Option("--top-n", min=1, max=100)] = None,
    tenant: TenantOption = DEFAULT_TENANT,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON tool result.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the agent's facts block.")
    ] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show why each result matched (scores, ranks).")
    ] = False,
    filters: Annotated[
        list[str] | None,
        typer.Option("--filter", help="FIELD=VALUE (repeatable; tags, source, document_id, …)."),
    ] = None,
    depth: Annotated[
        str,
        typer.Option(
            "--depth",
            help="fast: one search; deep: the first results seed follow-up searches.",
        ),
    ] = "fast",
    expand: Annotated[
        str | None,
        typer.Option(
            "--expand",
            help="section | neighbours | none: show a short result's (or several of one "
            "section's) section or neighbouring chunks. Default: the config's query.expand.",
        ),
    ] = None,
    as_user: AsOption = None,
    groups: GroupOption = None,
) -> None:
    """Answer a query with the chunks that best match it."""
    chosen = fm.check_depth(depth)
    principal = reader(as_user, groups)
    with open_kb(kb) as base:
        answer = base.search(
            text,
            top_n=top_n,
            tenant=tenant,
            filters=_parse_filters(filters),
            depth=chosen,
            expand=None if expand is None else fm.check_expand(expand),
            principal=principal,
        )
        for warning in answer.warnings:
            errors.print(f"[yellow]warning:[/] {shown(warning)}")
        if as_json or markdown:
            chain = "json" if as_json else "markdown"
            output = base.run_sync(base.aformat_answer(answer, chain, explain=explain))
            sys.stdout.write(output.rstrip("\n") + "\n")
        else:
            say_notices(base)
            result = fm.tool_result(
                text,
                answer.results,
                explain=explain,
                variants=answer.variants,
                warnings=answer.warnings,
                cost=answer.cost,
            )
            _print_results(result.query, result.variants, result.results)
            if result.cost is not None:
                console.print(f"[dim]{_cost(result.cost)}[/]")


def _parse_filters(items: list[str] | None) -> dict[str, str | list[str]] | None:
    """``--filter tags=a --filter tags=b`` → {"tags": ["a", "b"]} (any of them)."""
    if not items:
        return None
    parsed: dict[str, list[str]] = {}
    for item in items:
        field, sep, value = item.partition("=")
        if not sep or not field.strip():
            raise typer.BadParameter(f"'{item}': expected FIELD=VALUE", param_hint="--filter")
        parsed.setdefault(field.strip(), []).append(value)
    return {k: v[0] if len(v) == 1 else v for k, v in parsed.items()}


PANEL_CHARS = 700  # of a chunk, in a result's panel
_WORD = re.compile(r"\w{3,}")


def excerpt(content: str, matched: str, query: str, width: int = PANEL_CHARS) -> str:
    """The part of a long chunk a panel shows: around what matched (the matched text
    where the chunk holds it, else where the most words of the query and the matched
    text fall), cut at words and marked with ``…``; a short chunk whole."""
    if len(content) <= width:
        return content
    at = content.find(matched.strip()) if len(matched.strip()) >= 10 else -1
    if at < 0:
        words = {w.lower() for w in _WORD.findall(f"{query} {matched}")}
        spots = [m.start() for m in _WORD.finditer(content) if m.group().lower() in words]
        at = max(spots, key=lambda x: sum(x <= y < x + width // 2 for y in spots), default=0)
    start = max(0, min(at - width // 4, len(content) - width))
    if start:
        start = content.find(" ", start) + 1 or start  # at a word
    end = start + width
    if end < len(content):
        end = content.rfind(" ", start, end) if " " in content[start:end] else end
    return ("…" if start else "") + content[start:end].strip() + ("…" if end < len(content) else "")


def _explanation(r: ResultItem) -> str:
    s = r.explanation
    if s is None:
        return ""

    def show(value: float | None, rank: int | None = None) -> str:
        text = "—" if value is None else f"{value:.3f}"
        return f"{text} (#{rank})" if rank else text

    hop = f" · hop {s.hop}" + (f" ({shown(s.found_by)})" if s.found_by else "") if s.hop else ""
    return (
        f"[dim]why:[/] dense {show(s.dense, s.dense_rank)} · question {show(s.question)} · "
        f"content {show(s.content)} · lexical {show(s.lexical, s.lexical_rank)} · "
        f"first stage {show(s.first_stage)} · rerank {show(s.rerank)}{hop}\n"
    )


def _cost(cost: SearchCost) -> str:
    line = (
        f"deep search: {cost.hops} hops, {cost.searches} searches, "
        f"{cost.llm_calls} LLM calls ({cost.llm_tokens} tokens), {cost.took_ms:.0f} ms"
    )
    return line + (f" (stopped: {cost.stopped})" if cost.stopped else "")


def _passage(r: ResultItem, query: str) -> str:
    """What a panel quotes: the result's expanded context (``--expand``) with a line
    naming it, else the part of its chunk around what matched."""
    held = r.context
    if held is None:
        return "\n" + shown(excerpt(r.content, r.matched_text, query), lines=True)
    where = f"{held.kind} {held.section or ''}".strip()
    line = f"[dim]expanded:[/] {shown(where)}, chunks {held.chunk_start}-{held.chunk_end}"
    if held.shown_in is not None:
        return line + f": in result {held.shown_in}\n"
    around = excerpt(held.text, r.matched_text, query, width=2 * PANEL_CHARS)
    return line + f" ({held.tokens} tokens)\n\n" + shown(around, lines=True)


def _print_results(text: str, variants: list[str] | None, results: list[ResultItem]) -> None:
    """Rich panels over the tool result (the same items ``--json`` prints)."""
    console.print(f"[bold]Query:[/] {shown(text)}")
    if variants:
        console.print(f"[dim]searched as:[/] {shown(' | '.join(variants))}")
    if not results:
        console.print("No results: the knowledge base holds nothing that matches.")
    for r in results:
        where = " › ".join(part for part in [r.title, *r.heading_path] if part)
        body = (
            f"[dim]cite:[/] {shown(r.cite)}\n"
            f"[dim]source:[/] {shown(r.source)}  [dim]uri:[/] {shown(r.uri)}\n"
            f"[dim]matched:[/] {shown(r.matched_text[:300])}\n"
            + _explanation(r)
            + f"[dim]context:[/] {shown(r.qualifying_text, lines=True)}\n"
            + _passage(r, text)
        )
        title = f"{r.rank}. {shown(where)}  ({r.score:.3f})"
        console.print(Panel(body, title=title, title_align="left"))
