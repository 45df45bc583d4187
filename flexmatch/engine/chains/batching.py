"""Many chunks, few LLM calls: the chunks of every document being indexed at the moment
grouped into one prompt per group.

An LLM chain hands each chunk to its ``ChunkBatcher``. The batcher collects the chunks
that arrive together (within ``window`` seconds, from all concurrent documents) into
groups of up to ``size`` and makes one call per group, so even a corpus of one-chunk
documents costs a fraction of a call per chunk. Each chunk's answer is also cached on its
own (``item_key``: the chain's full definition, the server, and that chunk's inputs), so
how chunks happened to be grouped never costs a cache hit; a chunk a group answer left
out, or a group call that failed, is asked again alone, so one bad chunk fails only its
own document.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, cast

from flexmatch.engine.chains.base import Chain
from flexmatch.engine.chains.output import parse_json
from flexmatch.models import Document, Section

R = TypeVar("R")


@dataclass(frozen=True)
class ChunkRequest:
    section: Section
    document: Document


GroupCall = Callable[[list[ChunkRequest]], Awaitable[list[Any]]]


class ChunkBatcher(Generic[R]):
    """Groups concurrent chunk requests; ``call`` answers a group, one result per request
    (``None`` where the answer had nothing usable for that chunk)."""

    def __init__(self, call: GroupCall, size: int, window: float = 0.1) -> None:
        self.call = call
        self.size = size
        self.window = window
        self._waiting: list[tuple[ChunkRequest, asyncio.Future[R | None]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, request: ChunkRequest) -> R | None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R | None] = loop.create_future()
        self._waiting.append((request, future))
        if len(self._waiting) >= self.size:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.window, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiting:
            group, self._waiting = self._waiting[: self.size], self._waiting[self.size :]
            task = asyncio.get_running_loop().create_task(self._answer(group))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _answer(self, group: list[tuple[ChunkRequest, asyncio.Future[R | None]]]) -> None:
        requests = [request for request, _ in group]
        try:
            results = await self.call(requests)
        except Exception as exc:
            if len(group) == 1:
                group[0][1].set_exception(exc)
                return
            results = await asyncio.gather(
                *(self.call([request]) for request in requests), return_exceptions=True
            )
            for (_, future), result in zip(group, results, strict=True):
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result[0])
            return
        missing = [i for i, result in enumerate(results) if result is None]
        if len(group) > 1 and missing:  # left out of the group answer: ask for it alone
            again = await asyncio.gather(
                *(self.call([requests[i]]) for i in missing), return_exceptions=True
            )
            for i, result in zip(missing, again, strict=True):
                results[i] = None if isinstance(result, BaseException) else result[0]
        for (_, future), result in zip(group, results, strict=True):
            future.set_result(result)


def item_key(definition: dict[str, Any], api_base: str | None, inputs: Any) -> str:
    """The cache key of one chunk's answer from one chain."""
    blob = json.dumps(["chunk-answer", definition, api_base, inputs], sort_keys=True, default=str)
    return "item:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


def answers_by_chunk(raw: str, count: int, field: str) -> list[Any]:
    """``field`` of each chunk's entry in a group answer (``{"chunks": [{"chunk": n,
    field: ...}]}``), in chunk order; ``None`` for a chunk the answer left out."""
    found: list[Any] = [None] * count
    data = parse_json(raw)
    entries = data.get("chunks") if isinstance(data, dict) else data
    for entry in entries if isinstance(entries, list) else []:
        number = entry.get("chunk") if isinstance(entry, dict) else None
        if isinstance(number, int) and 1 <= number <= count:
            found[number - 1] = entry.get(field)
    return found


class ChunkBatching(Chain, Generic[R]):
    """What an LLM chain answering per chunk needs to batch: its group prompt and how to
    read a group answer; answers are cached per chunk, grouping is the batcher's.

    A prompt that uses ``group_variable`` asks about ``params.chunks_per_call`` chunks at
    a time; one written for a single chunk is asked one chunk at a time."""

    group_variable: ClassVar[str] = "chunks"
    # params that only decide what is indexed beside an answer, never the answer: left out
    # of its cache key, so turning one on or off never pays the LLM again
    index_params: ClassVar[frozenset[str]] = frozenset()

    @property
    def grouped(self) -> bool:
        return self.prompt is not None and self.group_variable in self.prompt.variables

    def batch_size(self) -> int:
        return int(self.params.chunks_per_call) if self.grouped else 1

    def item_inputs(self, request: ChunkRequest) -> Any:
        """Everything about one chunk that its answer depends on (besides the chain)."""
        raise NotImplementedError

    def group_prompt(self, requests: list[ChunkRequest]) -> str:
        raise NotImplementedError

    def parse_group(self, raw: str, count: int) -> list[R | None]:
        raise NotImplementedError

    def encode(self, result: R) -> str:
        return json.dumps(result, ensure_ascii=False)

    def decode(self, text: str) -> R:
        return cast(R, json.loads(text))

    def answer_definition(self) -> dict[str, Any]:
        """The chain's definition as far as its answers depend on it (``index_params``
        left out)."""
        definition = self.definition()
        spec = definition["spec"]
        params = {k: v for k, v in spec["params"].items() if k not in self.index_params}
        return {**definition, "spec": {**spec, "params": params}}

    def _key(self, request: ChunkRequest) -> str:
        # a built chain never changes: its definition is serialised once, not per chunk
        definition = self.__dict__.setdefault("_definition", self.answer_definition())
        return item_key(definition, self.llm.api_base, self.item_inputs(request))

    async def answer(self, section: Section, document: Document) -> R | None:
        """This chunk's answer: from the cache, or from its group's call."""
        request = ChunkRequest(section, document)
        key = self._key(request)
        cached = self.llm.cache.get(key)
        if cached is not None:
            self.llm.usage.cached_calls += 1
            return self.decode(cached[0])
        result = await self._batcher().run(request)
        if result is not None:
            self.llm.cache.put(key, self.encode(result), {})
        return result

    async def _call(self, requests: list[ChunkRequest]) -> list[R | None]:
        prompt = self.group_prompt(requests)
        first_chunk = prompt.find('<chunk id="')  # instructions and documents come first
        raw = await self.complete(prompt, cacheable=first_chunk if first_chunk > 0 else None)
        return self.parse_group(raw, len(requests))

    def planned_calls(self, pairs: list[tuple[Section, Document]]) -> tuple[list[str], int]:
        """The prompts ingesting these chunks would send (grouped as the batcher would,
        in order), and how many chunks the cache already answers."""
        requests = [ChunkRequest(section, document) for section, document in pairs]
        fresh = [r for r in requests if self.llm.cache.get(self._key(r)) is None]
        size = self.batch_size()
        prompts = [self.group_prompt(fresh[i : i + size]) for i in range(0, len(fresh), size)]
        return prompts, len(requests) - len(fresh)

    def _batcher(self) -> ChunkBatcher[R]:
        loop = asyncio.get_running_loop()
        batchers: dict[Any, ChunkBatcher[R]] = self.__dict__.setdefault("_batchers", {})
        if loop not in batchers:
            batchers.clear()  # one loop at a time (sync wrappers start new ones)
            batchers[loop] = ChunkBatcher(self._call, self.batch_size())
        return batchers[loop]
