"""The one way FlexMatch calls an LLM: litellm, async, bounded, retried, cached, counted.

Only what may pass is retried (rate limits, timeouts, a server's 5xx). A refused key
(401/403) or a missing one is the user's to fix: it is reported at once, without a
retry, and later calls of the same model fail with the same message without asking the
server again (for ``REFUSAL_MEMORY`` seconds). A local OpenAI-compatible server (an
``api_base``) needs no key: the client library refuses to send none, so a placeholder
is sent instead.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any, Protocol

from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from flexmatch.engine.llm_cache import LLMCache, cache_key
from flexmatch.errors import LLMError
from flexmatch.models import Usage


def import_litellm() -> Any:
    """Import litellm without its start-up fetch of a cost map from the internet."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def _takes_cache_control(model: str) -> bool:
    """Anthropic's models cache a prompt prefix only where ``cache_control`` marks it
    (OpenAI's cache prefixes by themselves, and other servers may refuse the field)."""
    name = model.lower()
    return name.startswith(("anthropic/", "claude")) or "/claude" in name or "anthropic." in name


# how long a refused key is not asked again: a run stops asking at once, and a long-lived
# server still recovers once the provider takes the key again
REFUSAL_MEMORY = 300.0
# sent to a local server that takes no key (the OpenAI client library refuses to send none)
NO_KEY = "no-key"


def _is_refusal(litellm: Any, exc: BaseException) -> bool:
    """The provider said no to the credentials (litellm maps some 403s to a plain
    APIError, hence the status too): retrying cannot help."""
    refusals = (litellm.AuthenticationError, litellm.PermissionDeniedError)
    return isinstance(exc, refusals) or getattr(exc, "status_code", None) in (401, 403)


def missing_keys(model: str, api_base: str | None, api_key: str | None) -> list[str]:
    """The environment variables holding a key that ``model``'s provider needs and that
    are unset, when no ``api_key`` is given (a base URL such as Ollama's is not a key)."""
    if api_key:
        return []
    litellm = import_litellm()
    try:
        found = litellm.validate_environment(model=model, api_base=api_base)
    except Exception:  # a model litellm cannot place: the call itself will say so
        return []
    return [k for k in found.get("missing_keys", []) if "KEY" in k or "TOKEN" in k]


def credential_problem(model: str, api_base: str | None, api_key: str | None) -> str | None:
    """Why calls to ``model`` will be refused for want of a key, or None. A model behind
    an ``api_base`` (a local server) may take none, so only a provider's own API counts."""
    if api_base:
        return None
    missing = missing_keys(model, api_base, api_key)
    if not missing:
        return None
    return (
        f"the LLM '{model}' needs an API key and none is set: set FLEXMATCH_LLM_API_KEY "
        f"(models.llm_api_key) or {' / '.join(missing)}; for a local OpenAI-compatible "
        "server set FLEXMATCH_LLM_API_BASE (models.llm_api_base) instead"
    )


def _transient_errors(litellm: Any) -> tuple[type[BaseException], ...]:
    return (
        litellm.RateLimitError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.APIConnectionError,
        litellm.Timeout,
        litellm.BadGatewayError,
    )


class LLMSettings(Protocol):
    """What an LLM is made from: ``config.ModelsConfig`` (not imported here, so the
    engine's LLM client sits low in the import graph)."""

    llm: str | None
    llm_api_base: str | None
    llm_api_key: str | None
    llm_concurrency: int
    llm_timeout: float
    llm_max_retries: int
    llm_retry_delay: float


class LLM:
    """A configured chat model with a concurrency limit, retries and a result cache."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        concurrency: int = 8,
        timeout: float = 60.0,
        max_retries: int = 4,
        retry_base_delay: float = 1.0,
        cache: LLMCache | None = None,
        temperature: float = 0.0,
    ) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_base_delay = retry_base_delay
        self.cache = cache if cache is not None else LLMCache(None)
        self.temperature = temperature
        self.usage = Usage()
        # model -> (why its credentials were refused, when): not asked again for a while
        self._refused: dict[str, tuple[str, float]] = {}
        self._semaphores: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}

    @classmethod
    def from_config(cls, models: LLMSettings, cache: Path | None) -> LLM | None:
        """The LLM ``models`` configures (None without ``models.llm``), its answers cached
        in ``cache`` (None: in memory): one construction for a knowledge base and for each
        of its Ray workers."""
        if not models.llm:
            return None
        return cls(
            models.llm,
            api_base=models.llm_api_base,
            api_key=models.llm_api_key,
            concurrency=models.llm_concurrency,
            timeout=models.llm_timeout,
            max_retries=models.llm_max_retries,
            retry_base_delay=models.llm_retry_delay,
            cache=LLMCache(cache),
        )

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if loop not in self._semaphores:
            self._semaphores = {loop: asyncio.Semaphore(self.concurrency)}
        return self._semaphores[loop]

    def _key(self, prompt: str, model: str) -> tuple[str, list[dict[str, str]], dict[str, Any]]:
        messages = [{"role": "user", "content": prompt}]
        params: dict[str, Any] = {"temperature": self.temperature}
        return cache_key(model, messages, params, self.api_base), messages, params

    @staticmethod
    def request_messages(model: str, prompt: str, cacheable: int | None) -> list[dict[str, Any]]:
        """The messages sent: with ``cacheable`` (the length of a prefix that repeats across
        calls, e.g. instructions and a document), that prefix is marked for the provider's
        prompt cache where the model has one (Anthropic's ``cache_control``)."""
        if cacheable and 0 < cacheable < len(prompt) and _takes_cache_control(model):
            content = [
                {
                    "type": "text",
                    "text": prompt[:cacheable],
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": prompt[cacheable:]},
            ]
            return [{"role": "user", "content": content}]
        return [{"role": "user", "content": prompt}]

    def credential_problem(self, model: str | None = None) -> str | None:
        """Why calls to ``model`` (default: this LLM's) would fail for want of a key, or
        None: what ``ingest --dry-run`` warns about before anything is spent."""
        return credential_problem(model or self.model, self.api_base, self.api_key)

    def _credentials(self, litellm: Any, model: str) -> str | None:
        """The key to send to ``model``: the configured one, a placeholder for a local
        server that takes none, or (the provider's own variable being set) None."""
        refused = self._refused.get(model)
        if refused is not None and time.monotonic() - refused[1] < REFUSAL_MEMORY:
            raise LLMError(refused[0])
        if self.api_key:
            return self.api_key
        problem = credential_problem(model, self.api_base, self.api_key)
        if problem is not None:
            raise LLMError(problem)  # the environment is read afresh on each call
        if self.api_base and missing_keys(model, self.api_base, None):
            return NO_KEY
        return None

    def _refusal(self, model: str, exc: BaseException) -> str:
        status = getattr(exc, "status_code", None)
        where = f" at {self.api_base}" if self.api_base else ""
        said = str(exc)  # litellm's "litellm.X: X: OpenAIException - <the server's words>"
        said = said.split("Exception - ", 1)[-1].strip() or type(exc).__name__
        message = (
            f"the LLM server{where} refused the credentials for '{model}' "
            f"({f'{status}: ' if status else ''}{said}); check FLEXMATCH_LLM_API_KEY "
            "(models.llm_api_key) and the model name"
        )
        self._refused[model] = (message, time.monotonic())
        return message

    def is_cached(self, prompt: str, *, model: str | None = None) -> bool:
        """Whether ``complete`` would answer this prompt from the cache (no call, no cost)."""
        return self.cache.get(self._key(prompt, model or self.model)[0]) is not None

    async def complete(
        self, prompt: str, *, model: str | None = None, cacheable: int | None = None
    ) -> str:
        """The assistant's text for a single-user-message prompt (``cacheable``: see
        ``request_messages``; the cache key is the text either way)."""
        model = model or self.model
        key, _, params = self._key(prompt, model)
        cached = self.cache.get(key)
        if cached is not None:
            self.usage.cached_calls += 1
            return cached[0]
        litellm = await asyncio.to_thread(import_litellm)  # seconds, once: never on the loop
        messages = self.request_messages(model, prompt, cacheable)
        api_key = self._credentials(litellm, model)  # tens of microseconds: on the loop
        try:
            async with self._semaphore():
                async for attempt in AsyncRetrying(
                    retry=retry_if_exception_type(_transient_errors(litellm)),
                    stop=stop_after_attempt(self.max_retries + 1),
                    wait=wait_exponential(multiplier=self.retry_base_delay, max=30),
                    reraise=True,
                ):
                    with attempt:
                        response = await litellm.acompletion(
                            model=model,
                            messages=messages,
                            api_base=self.api_base,
                            api_key=api_key,
                            timeout=self.timeout,
                            num_retries=0,
                            **params,
                        )
        except Exception as exc:
            if _is_refusal(litellm, exc):
                raise LLMError(self._refusal(model, exc)) from exc
            kind = type(exc).__name__
            raise LLMError(f"LLM call to '{model}' failed after retries: {kind}: {exc}") from exc
        text = response.choices[0].message.content or ""
        usage = self._account(litellm, response)
        self.cache.put(key, text, usage)
        return text

    def _account(self, litellm: Any, response: Any) -> dict[str, Any]:
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        details = getattr(usage, "prompt_tokens_details", None)
        cached_tokens = int(getattr(details, "cached_tokens", 0) or 0)
        try:
            cost = float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:  # unknown models have no price; that is not an error
            cost = 0.0
        self.usage.calls += 1
        self.usage.prompt_tokens += prompt_tokens
        self.usage.cached_prompt_tokens += cached_tokens
        self.usage.completion_tokens += completion_tokens
        self.usage.cost_usd += cost
        return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
