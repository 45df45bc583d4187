"""Any embedding model litellm can call: OpenAI, Ollama, an OpenAI-compatible server."""

from __future__ import annotations

from flexmatch.errors import EmbeddingError


class LiteLLMEmbedder:
    """Any embedding model litellm can call (OpenAI, Ollama, an OpenAI-compatible server)."""

    def __init__(
        self, name: str, api_base: str | None, api_key: str | None, batch_size: int = 64
    ) -> None:
        self.name = name
        self.api_base = api_base
        self.api_key = api_key
        self.batch_size = batch_size
        self._dimension: int | None = None

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self.embed(["dimension probe"])[0])
        return self._dimension

    def embed(self, texts: list[str]) -> list[list[float]]:
        from flexmatch.engine.llm import import_litellm

        litellm = import_litellm()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            try:
                response = litellm.embedding(
                    model=self.name,
                    input=batch,
                    api_base=self.api_base,
                    api_key=self.api_key,
                    num_retries=3,
                )
            except Exception as exc:
                raise EmbeddingError(f"embedding model '{self.name}' failed: {exc}") from exc
            rows = sorted(response.data, key=lambda item: item["index"])
            vectors.extend([list(map(float, row["embedding"])) for row in rows])
        return vectors
