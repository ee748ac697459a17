"""OpenAI embeddings (and any OpenAI-compatible server) through the official ``openai`` SDK."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from knowtology_cli.embedders.base import Embedder, Kind
from knowtology_cli.errors import EmbeddingError

#: Output sizes of OpenAI's models (used before the first call; others are discovered).
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
#: Placeholder key for compatible servers (Ollama, vLLM, llama.cpp) that ignore authentication.
UNUSED_KEY = "unused"


class OpenAIEmbedder(Embedder):
    """Embeddings from ``POST {base_url}/embeddings`` via the ``openai`` SDK.

    The API key is taken from the argument or ``OPENAI_API_KEY`` and never appears in a message,
    a log line or an error. 429, 5xx, timeouts and connection errors are retried with exponential
    backoff (``Retry-After`` honoured); everything else fails at once as :class:`EmbeddingError`.

    Args:
        model: model name, e.g. ``text-embedding-3-small`` (``openai:MODEL`` in the registry).
        api_key: key; default ``OPENAI_API_KEY``. Optional when ``base_url`` points elsewhere.
        base_url: API root such as ``http://localhost:11434/v1``; default ``OPENAI_BASE_URL``,
            else OpenAI.
        dimensions: ask the server for shorter vectors (text-embedding-3 models only).
        batch_size: texts per request.
        max_retries: retries of one request after 429/5xx/timeouts.
        backoff: first retry delay in seconds (doubles each retry, capped at ``max_backoff``).
        max_backoff: longest delay between retries.
        timeout: seconds per HTTP request.
        sleep: the sleep function used between retries (tests pass a recorder).

    The vector size is known up front for OpenAI's models; for others the first request
    (or reading :attr:`dimension`) discovers it.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 256,
        max_retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        timeout: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not model.strip():
            raise EmbeddingError("the openai embedder needs a model name", hint="e.g. openai:text-embedding-3-small")
        if batch_size < 1 or max_retries < 0 or backoff < 0:
            raise EmbeddingError("batch_size must be >= 1, max_retries and backoff >= 0")
        self.model = model
        self.name = f"openai:{model}"
        self.batch_size = batch_size
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if self.base_url is None:
                raise EmbeddingError(
                    "no OpenAI API key: set OPENAI_API_KEY",
                    hint="export OPENAI_API_KEY=... or point OPENAI_BASE_URL at a compatible server",
                )
            key = UNUSED_KEY
        self._api_key = key
        self.requested_dimensions = dimensions
        self._dimension: int | None = dimensions or KNOWN_DIMENSIONS.get(model)
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        self._sleep = sleep
        self._client: Any = None

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def dimension(self) -> int:  # type: ignore[override]
        """Vector size; a model missing from :data:`KNOWN_DIMENSIONS` is asked once."""
        if self._dimension is None:
            self._dimension = len(self._request(["dimension probe"])[0])
        return self._dimension

    def _get_client(self) -> Any:
        if self._client is None:
            try:
                import openai  # deferred: heavy
            except ImportError as exc:
                raise EmbeddingError("the openai embedder needs the openai package", hint="pip install openai") from exc
            # Retries are ours (below), so the SDK must not add its own on top.
            self._client = openai.OpenAI(
                api_key=self._api_key, base_url=self.base_url, max_retries=0, timeout=self.timeout
            )
        return self._client

    def _scrub(self, text: str) -> str:
        """A message with the API key (should a server echo it) blanked out."""
        return text.replace(self._api_key, "***") if self._api_key != UNUSED_KEY else text

    def _retry_delay(self, attempt: int, exc: Exception) -> float:
        response = getattr(exc, "response", None)
        header = response.headers.get("retry-after") if response is not None else None
        if header is not None:
            try:
                return min(max(float(header), 0.0), self.max_backoff)
            except ValueError:
                pass
        delay = min(self.backoff * (2**attempt), self.max_backoff)
        return delay * random.uniform(0.8, 1.0)

    def _request(self, texts: Sequence[str]) -> list[list[float]]:
        """One embeddings request with retries; vectors in input order."""
        import openai  # deferred: heavy

        client = self._get_client()
        # The API rejects empty strings; a space embeds as "nothing" just as well.
        inputs = [text if text.strip() else " " for text in texts]
        options: dict[str, Any] = {}
        if self.requested_dimensions:
            options["dimensions"] = self.requested_dimensions
        where = self.base_url or "api.openai.com"
        for attempt in range(self.max_retries + 1):
            try:
                response = client.embeddings.create(model=self.model, input=inputs, **options)
                break
            except openai.APIStatusError as exc:
                if exc.status_code in RETRY_STATUSES and attempt < self.max_retries:
                    self._sleep(self._retry_delay(attempt, exc))
                    continue
                raise EmbeddingError(
                    self._scrub(f"embedding request to {where} failed: HTTP {exc.status_code}: {exc.message}"),
                    hint=_hint_for(exc.status_code),
                ) from None  # the SDK error can echo the key; the message above is scrubbed
            except openai.APIConnectionError as exc:  # includes timeouts
                if attempt < self.max_retries:
                    self._sleep(self._retry_delay(attempt, exc))
                    continue
                raise EmbeddingError(
                    self._scrub(f"cannot reach {where} for embeddings: {exc}"),
                    hint="check OPENAI_BASE_URL and the network",
                ) from None  # the SDK error can echo the key; the message above is scrubbed
            except openai.OpenAIError as exc:
                raise EmbeddingError(self._scrub(f"embedding request to {where} failed: {exc}")) from None  # the SDK error can echo the key; the message above is scrubbed
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(texts):
            raise EmbeddingError(f"{where} returned {len(data)} embeddings for {len(texts)} texts")
        return [list(item.embedding) for item in data]

    def embed_batch(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        """Embed one batch in one request (retried on 429/5xx)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._request(texts)
        sizes = {len(vector) for vector in vectors}
        if len(sizes) != 1:
            raise EmbeddingError(f"{self.name} returned vectors of mixed sizes {sorted(sizes)}")
        size = sizes.pop()
        if self._dimension is None:
            self._dimension = size
        elif size != self._dimension:
            raise EmbeddingError(
                f"{self.name} returned {size}-d vectors, expected {self._dimension}",
                hint="the model behind the server changed; re-ingest with the new embedder",
            )
        return np.asarray(vectors, dtype=np.float32)


def _hint_for(status: int) -> str | None:
    if status == 401:
        return "check OPENAI_API_KEY"
    if status == 404:
        return "check the model name and OPENAI_BASE_URL"
    if status == 429:
        return "rate limited: retry later or lower the batch size"
    return None


__all__ = ["KNOWN_DIMENSIONS", "OpenAIEmbedder"]
