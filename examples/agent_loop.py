"""An agent loop: the model calls the knowledge-base search tool until it can answer.

    python examples/agent_loop.py --kb my-kb "How many blankets were delivered?"
    python examples/agent_loop.py --kb my-kb --model openai/qwen2.5 \\
        --api-base http://localhost:8000/v1 "Where is the food stored?"

Offline, the fake LLM server is a model that calls tools (it searches with the question,
then answers quoting the first passage)::

    python -m flexmatch.testing.fake_llm --port 8001 &
    python examples/agent_loop.py --kb my-kb --model openai/fake \\
        --api-base http://127.0.0.1:8001/v1 --verbose "Where is the food stored?"

Any litellm model string works (``--model``, default ``$FLEXMATCH_LLM``); the model must
support tool calls. The loop is ``flexmatch.adapters.agent.run_agent`` (read it to write
your own): each turn the model either answers or asks for ``search_knowledge``; the tool
runs against the knowledge base (``handle_tool_call``) and its JSON result goes back to
the model as a ``tool`` message. The package runs the same loop as ``flexmatch
agent-demo``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from flexmatch import KnowledgeBase
from flexmatch.adapters.agent import AgentToolCall, run_agent


async def answer(
    kb: KnowledgeBase,
    question: str,
    *,
    model: str,
    api_base: str | None = None,
    api_key: str | None = None,
    max_steps: int = 5,
    verbose: bool = False,
) -> str:
    """The model's answer after the tool calls it made (printed to stderr if verbose)."""

    def show(call: AgentToolCall) -> None:
        if verbose:
            print(f"tool {call.name}({call.arguments})", file=sys.stderr)

    result = await run_agent(
        kb,
        question,
        model=model,
        api_base=api_base,
        api_key=api_key,
        max_steps=max_steps,
        on_tool_call=show,
    )
    return result.text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", help="What to ask.")
    parser.add_argument("--kb", type=Path, default=Path(os.environ.get("FLEXMATCH_KB", ".")))
    parser.add_argument(
        "--model",
        default=os.environ.get("FLEXMATCH_LLM"),
        help="litellm model string (default: $FLEXMATCH_LLM).",
    )
    parser.add_argument("--api-base", default=os.environ.get("FLEXMATCH_LLM_API_BASE"))
    parser.add_argument("--api-key", default=os.environ.get("FLEXMATCH_LLM_API_KEY"))
    parser.add_argument("--max-steps", type=int, default=5)
    parser.add_argument("--verbose", action="store_true", help="Print tool calls to stderr.")
    args = parser.parse_args(argv)
    if not args.model:
        parser.error("name a model with --model or $FLEXMATCH_LLM")
    with KnowledgeBase.open(args.kb) as kb:
        text = asyncio.run(
            answer(
                kb,
                args.question,
                model=args.model,
                api_base=args.api_base,
                api_key=args.api_key,
                max_steps=args.max_steps,
                verbose=args.verbose,
            )
        )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
