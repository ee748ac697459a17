"""The Embedder ABC: one abstract batch method; batching and normalisation live here."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from ..errors import EmbeddingError

Kind = Literal["document", "query"]


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors.

    Subclasses implement :meth:`embed_batch` only. ``name`` is the registry name recorded
    with a collection; ``dimension`` the vector size.
    """

    name: str = "embedder"
    dimension: int = 0
    batch_size: int = 32

    @abstractmethod
    def embed_batch(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        """Embed one batch; returns an array of shape ``(len(texts), dimension)``."""

    def embed_documents(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """Embed documents in batches; ``progress(n)`` is called after each batch."""
        return self._embed_all(texts, "document", progress)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query (asymmetric models treat it differently from documents)."""
        vector: np.ndarray = self._embed_all([text], "query", None)[0]
        return vector

    def _embed_all(
        self, texts: Sequence[str], kind: Kind, progress: Callable[[int], None] | None
    ) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            vectors = np.asarray(self.embed_batch(batch, kind), dtype=np.float32)
            if vectors.shape != (len(batch), self.dimension):
                raise EmbeddingError(
                    f"embedder {self.name} returned shape {vectors.shape}, "
                    f"expected {(len(batch), self.dimension)}"
                )
            out[start : start + len(batch)] = vectors
            if progress is not None:
                progress(len(batch))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        unit: np.ndarray = out / norms
        return unit
