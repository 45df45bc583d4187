"""Embeddings for many documents at once: one worker encodes full batches of whatever
the documents being indexed have handed over."""

from __future__ import annotations

import asyncio

from flexmatch.engine.embedders.base import Embedder


class EmbeddingBatcher:
    """Embeddings for many documents at once: full batches, one encoder at a time.

    Every document being indexed hands its matching texts to the run's batcher; one worker
    thread encodes whatever has gathered, ``size`` texts at a time (a document's texts may
    span batches, several documents share one). The model runs full batches instead of
    each document's handful, and no document holds the model while others queue behind
    it with their slots taken.
    """

    def __init__(self, embedder: Embedder, size: int = 64) -> None:
        self.embedder = embedder
        self.size = size
        self._waiting: list[tuple[list[str], asyncio.Future[list[list[float]]]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        future: asyncio.Future[list[list[float]]] = asyncio.get_running_loop().create_future()
        self._waiting.append((texts, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work())
        return await future

    async def _work(self) -> None:
        """Encode what is waiting, in batches, until nothing is; requests that arrive
        while a batch is encoded join the next one."""
        while self._waiting:
            taken, self._waiting = self._take()
            texts = [text for request, _ in taken for text in request]
            try:
                vectors = await asyncio.to_thread(self.embedder.embed, texts)
            except Exception as exc:  # each document reports it as its own failure
                for _, future in taken:
                    if not future.done():
                        future.set_exception(exc)
                continue
            start = 0
            for request, future in taken:
                if not future.done():
                    future.set_result(vectors[start : start + len(request)])
                start += len(request)

    def _take(
        self,
    ) -> tuple[
        list[tuple[list[str], asyncio.Future[list[list[float]]]]],
        list[tuple[list[str], asyncio.Future[list[list[float]]]]],
    ]:
        """Whole requests up to about ``size`` texts (at least one request)."""
        count = 0
        for index, (texts, _) in enumerate(self._waiting):
            if index and count + len(texts) > self.size:
                return self._waiting[:index], self._waiting[index:]
            count += len(texts)
        return self._waiting, []
