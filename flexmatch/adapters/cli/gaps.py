"""``flexmatch gaps``: what people ask that finds nothing good, from the query log,
grouped by meaning; ``--golden FILE`` writes the golden questions the feedback log makes
(``flexmatch eval --kb KB FILE`` runs them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

import flexmatch as fm  # names load on first use: `flexmatch --help` imports no engine
from flexmatch import DEFAULT_TENANT
from flexmatch.adapters.cli.output import console, errors, open_kb, shown
from flexmatch.adapters.command_line import (
    AsOption,
    GroupOption,
    JsonOption,
    KbOption,
    TenantOption,
    reader,
)


def gaps(
    kb: KbOption = Path("."),
    tenant: TenantOption = DEFAULT_TENANT,
    as_json: JsonOption = False,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Groups shown at most.")] = 50,
    golden: Annotated[
        Path | None,
        typer.Option(
            "--golden",
            help="Also write the golden questions made from helpful feedback to this YAML "
            "file (for flexmatch eval --kb).",
            dir_okay=False,
        ),
    ] = None,
    as_user: AsOption = None,
    groups: GroupOption = None,
) -> None:
    """What people ask that finds nothing good (no result above query_log.good_score, or
    marked unhelpful), grouped by meaning, the most asked first; from the query log."""
    principal = reader(as_user, groups)
    with open_kb(kb) as base:
        if not base.config.query_log.enabled:
            errors.print(
                "[yellow]note:[/] the query log is off: set query_log.enabled: true in "
                "flexmatch.yaml to record queries (what it holds is still read)"
            )
        found = base.gaps(tenant=tenant, principal=principal)[:limit]
        if golden is not None:
            items = base.golden_from_feedback(tenant=tenant, principal=principal)
            golden.write_text(fm.golden_yaml(items), encoding="utf-8")
            errors.print(f"wrote {len(items)} golden question(s) to {shown(str(golden))}")
    if as_json:
        console.print_json(json.dumps([gap.model_dump() for gap in found], ensure_ascii=False))
        return
    if not found:
        console.print("No gaps: every logged query found something good.")
        return
    table = Table(title=f"Gaps in tenant '{shown(tenant)}' (most asked first)")
    for column in ("asked", "example", "nothing good", "unhelpful", "similar queries"):
        table.add_column(column)
    for gap in found:
        table.add_row(
            str(gap.count),
            shown(gap.example),
            str(gap.nothing_good),
            str(gap.unhelpful),
            str(len(gap.queries)),
        )
    console.print(table)
