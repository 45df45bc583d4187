"""``flexmatch agent-demo``: an agent answering from the knowledge base with tool calls.

The loop is ``flexmatch.adapters.agent.run_agent`` (the model is offered the search
tool; each call it makes runs against the knowledge base until it answers in words), so
the example ships with the package. It needs a model that calls tools; offline, the
fake LLM server is one: ``python -m flexmatch.testing.fake_llm --port 8001``, then
``flexmatch agent-demo --model openai/fake --api-base http://127.0.0.1:8001/v1 "..."``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

import flexmatch as fm  # names load on first use
from flexmatch.adapters.cli.options import KbOption, TenantOption, knowledge_base
from flexmatch.adapters.cli.output import shown

console = Console()
errors = Console(stderr=True)


def agent_demo(
    question: Annotated[str, typer.Argument(help="What to ask the agent.")],
    kb: KbOption = Path("."),
    model: Annotated[
        str | None,
        typer.Option("--model", envvar="FLEXMATCH_LLM", help="litellm model that calls tools."),
    ] = None,
    api_base: Annotated[
        str | None,
        typer.Option(
            "--api-base", envvar="FLEXMATCH_LLM_API_BASE", help="An OpenAI-compatible server."
        ),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option("--api-key", envvar="FLEXMATCH_LLM_API_KEY", help="Its key.")
    ] = None,
    max_steps: Annotated[
        int, typer.Option("--max-steps", min=1, max=20, help="Model turns at most.")
    ] = 5,
    tenant: TenantOption = "default",
) -> None:
    """Ask an agent a question: the model searches the knowledge base through the
    search_knowledge tool (each call shown), then answers from what it found."""
    from flexmatch.adapters.agent import AgentToolCall, run_agent

    if not model:
        raise fm.ConfigError(
            "agent-demo needs a model that calls tools: --model or $FLEXMATCH_LLM (offline: "
            "start `python -m flexmatch.testing.fake_llm` and use --model openai/fake "
            "--api-base http://127.0.0.1:8001/v1)"
        )

    def said(call: AgentToolCall) -> None:
        errors.print(f"[dim]tool[/] {shown(call.name)}({shown(call.arguments)})", highlight=False)

    with fm.KnowledgeBase.open(knowledge_base(kb)) as base:
        answer = base.run_sync(
            run_agent(
                base,
                question,
                model=model,
                api_base=api_base or None,
                api_key=api_key or None,
                max_steps=max_steps,
                tenant=tenant,
                on_tool_call=said,
            )
        )
    console.print(shown(answer.text), highlight=False, soft_wrap=True)
    if not answer.finished:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("agent-demo")(agent_demo)
