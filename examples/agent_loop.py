"""An agent loop: the model calls the knowledge-base search tool until it can answer.

    python examples/agent_loop.py --kb my-kb "How many blankets were delivered?"
    python examples/agent_loop.py --kb my-kb --model openai/qwen2.5 \\
        --api-base http://localhost:8000/v1 "Where is the food stored?"

Any litellm model string works (``--model``, default ``$FLEXMATCH_LLM``); the model must
support tool calls. Each turn, the model either answers or asks for
``search_knowledge``; the tool runs against the knowledge base and its JSON result goes
back to the model as a ``tool`` message.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import litellm

from flexmatch import KnowledgeBase
from flexmatch.adapters.agent import SEARCH_TOOL, handle_tool_call

SYSTEM = (
    "You answer questions using the search_knowledge tool. Search first, then answer "
    "briefly from what it returns and name the source. If nothing relevant comes back, "
    "say you do not know."
)


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
    """Run the loop: the model's tool calls are executed until it replies in words."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": question},
    ]
    for _ in range(max_steps):
        response = await litellm.acompletion(
            model=model,
            messages=messages,
            tools=[SEARCH_TOOL],
            api_base=api_base,
            api_key=api_key,
        )
        message = response.choices[0].message
        calls = message.tool_calls or []
        if not calls:
            return message.content or ""
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.function.name,
                            "arguments": call.function.arguments,
                        },
                    }
                    for call in calls
                ],
            }
        )
        for call in calls:
            result = await handle_tool_call(kb, call.function.name, call.function.arguments)
            if verbose:
                print(f"tool {call.function.name}({call.function.arguments})", file=sys.stderr)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return "(no answer: the model kept calling tools)"


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
