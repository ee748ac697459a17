"""A deterministic hashing embedder for tests: bag of hashed word features, no model."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from .base import Embedder, Kind

_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder(Embedder):
    """Feature-hashing embedder: texts sharing words get similar vectors. Tests only."""

    def __init__(self, dimension: int = 64) -> None:
        self.dimension = dimension
        self.name = "hash" if dimension == 64 else f"hash:{dimension}"
        self.batch_size = 256

    def embed_batch(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                sign = 1.0 if value & 1 else -1.0
                out[row, (value >> 1) % self.dimension] += sign
        return out
