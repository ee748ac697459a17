"""FastAPI: ``kt serve`` answers the four routes over real HTTP; public binds need a token."""

from __future__ import annotations

# ruff: noqa: F811
import socket
import subprocess
import time

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from _agent_fixtures import KT, agent_store, agent_store_copy, env, kt, leaf_with_chunks  # noqa: E402,F401

from knowtology_cli.render import ALREADY_READ  # noqa: E402

ROUTES = {
    "/km/browse": {"path": "root"},
    "/km/search": {"query": "refund within 7 days", "top_k": 2},
    "/km/keyword": {"keywords": "7 days, refund"},
    "/km/read": {"chunk_ids": ["ret-1"]},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, store, *args: str, token: str | None = None) -> None:
        self.port = _free_port()
        environment = env()
        if token:
            environment["KNOWTOLOGY_API_TOKEN"] = token
        self.proc = subprocess.Popen([KT, "serve", "--store", str(store), "--port", str(self.port), *args],
                                     env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"kt serve exited: {self.proc.stderr.read()}")
            try:
                httpx.get(self.url + "/openapi.json", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.2)
        raise AssertionError("kt serve did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


@pytest.fixture()
def server(agent_store_copy):
    srv = Server(agent_store_copy)
    yield srv
    srv.stop()


def test_four_routes_over_http(server, agent_store_copy) -> None:
    leaf, ids = leaf_with_chunks(agent_store_copy)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        spec = client.get("/openapi.json").json()
        assert {p for p in spec["paths"] if p.startswith("/km/")} == set(ROUTES)
        assert "SearchArgs" in str(spec["paths"]["/km/search"]["post"]["requestBody"])

        browse = client.post("/km/browse", json={"path": "root"})
        assert browse.status_code == 200
        body = browse.json()
        assert body["tool"] == "km_browse_tree" and body["text"].startswith("root (")
        assert body["result"]["children"]
        at_leaf = client.post("/km/browse", json={"path": leaf}).json()
        assert [c["chunk_id"] for c in at_leaf["result"]["chunks"]] == ids

        search = client.post("/km/search", json={"query": "refund within 7 days", "top_k": 2}).json()
        assert len(search["result"]["hits"]) == 2 and search["text"].count("\n [") == 2  # 2 hit lines under paths
        keyword = client.post("/km/keyword", json={"keywords": "7 days, refund"}).json()
        chunk_id = keyword["result"]["hits"][0]["chunk_id"]
        assert chunk_id == "ret-1"

        headers = {"X-Knowtology-Session": "client-a"}
        first = client.post("/km/read", json={"chunk_ids": [chunk_id]}, headers=headers).json()
        assert "within 7 days of purchase" in first["text"] and first["result"]["session"] == "client-a"
        again = client.post("/km/read", json={"chunk_ids": [chunk_id]}, headers=headers).json()
        assert again["text"] == f"[{chunk_id}] {ALREADY_READ}" and again["result"]["chunks"][0]["already_read"]
        other = client.post("/km/read", json={"chunk_ids": [chunk_id]},
                            headers={"X-Knowtology-Session": "client-b"}).json()
        assert "within 7 days of purchase" in other["text"]

        missing = client.post("/km/browse", json={"path": "Zzzz/Qqqq"})
        assert missing.status_code == 404 and missing.json()["detail"] == {
            "code": "not_found", "message": "no category 'Zzzz/Qqqq' in collection 'default'",
            "hint": "km_browse_tree with path='root' lists the top categories"}
        bad = client.post("/km/search", json={"top_k": 2})
        assert bad.status_code == 400 and bad.json()["detail"]["code"] == "invalid_argument"
        bad_session = client.post("/km/read", json={"chunk_ids": [chunk_id]},
                                  headers={"X-Knowtology-Session": "../etc"})
        assert bad_session.status_code == 400 and bad_session.json()["detail"]["code"] == "config"


def test_public_bind_without_token_is_refused(agent_store) -> None:
    proc = kt("serve", "--store", str(agent_store), "--host", "0.0.0.0", "--port", str(_free_port()), check=False)
    assert proc.returncode == 1
    assert "Error: refusing to serve on 0.0.0.0 without an API token" in proc.stderr
    assert "KNOWTOLOGY_API_TOKEN" in proc.stderr


def test_token_checked_on_every_route(agent_store_copy) -> None:
    srv = Server(agent_store_copy, "--host", "0.0.0.0", token="s3cret-token")
    try:
        with httpx.Client(base_url=srv.url, timeout=30) as client:
            for route, payload in ROUTES.items():
                assert client.post(route, json=payload).status_code == 401, route
                wrong = client.post(route, json=payload, headers={"Authorization": "Bearer nope"})
                assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
                assert wrong.json()["detail"]["code"] == "unauthorized"
                ok = client.post(route, json=payload, headers={"Authorization": "Bearer s3cret-token"})
                assert ok.status_code == 200, (route, ok.text)
    finally:
        srv.stop()


def test_router_factory_in_process(agent_store_copy) -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from knowtology_cli import KnowledgeMapTools

    tools = KnowledgeMapTools.open(str(agent_store_copy))
    app = FastAPI()
    app.include_router(tools.get_fastapi_router(token="t"))
    with TestClient(app) as client:
        assert client.post("/km/browse", json={}).status_code == 401
        assert client.post("/km/browse", json={}, headers={"Authorization": "Bearer t"}).json()["text"].startswith("root")
    tools.close()


def _app_client(store):
    from fastapi.testclient import TestClient

    from knowtology_cli import KnowledgeMapTools
    from knowtology_cli.integrations.fastapi import create_app

    tools = KnowledgeMapTools.open(str(store))
    return tools, TestClient(create_app(tools))


def test_bad_bodies_answer_400_in_the_documented_shape(agent_store_copy) -> None:
    """A body failing the argument model is a bad argument (400), not FastAPI's 422 list."""
    tools, client = _app_client(agent_store_copy)
    with client:
        cases = {
            ("/km/read", '{"chunk_ids": []}'): ("bad arguments for km_read_chunks: chunk_ids: List should have at "
                                                "least 1 item after validation, not 0",
                                                "chunk_ids (required, at least 1 item): Chunk ids to read in full"),
            ("/km/search", '{"query": "refund", "top_k": -1}'): (
                "bad arguments for km_search_chunks: top_k: Input should be greater than or equal to 1",
                "top_k (1 to 50): Number of hits (default 5)."),
            ("/km/search", '{"top_k": 2}'): ("bad arguments for km_search_chunks: query: Field required",
                                             "query (required): What you are looking for"),
            ("/km/keyword", '{"keywords": "refund", "k": 3}'): (
                "bad arguments for km_search_keyword: k: Extra inputs are not permitted",
                "km_search_keyword takes: keywords, top_k, under"),
            ("/km/read", '{"chunk_ids": ['): ("bad arguments for km_read_chunks: the body is not valid JSON",
                                             "km_read_chunks takes: chunk_ids, context"),
        }
        for (route, body), (message, hint) in cases.items():
            response = client.post(route, content=body, headers={"content-type": "application/json"})
            assert response.status_code == 400, (route, body, response.text)
            detail = response.json()["detail"]
            assert set(detail) == {"code", "message", "hint"} and detail["code"] == "invalid_argument"
            assert detail["message"].startswith(message) and "\n" not in detail["message"], detail
            assert "pydantic.dev" not in response.text and detail["hint"].startswith(hint), detail
        empty = client.post("/km/search", json={"query": "  "})
        assert empty.status_code == 400
        assert empty.json()["detail"] == {"code": "invalid_argument", "message": "empty query",
                                          "hint": "give a question or some words to search for"}
        spec = client.get("/openapi.json").json()
        for route in ROUTES:
            responses = spec["paths"][route]["post"]["responses"]
            assert "422" not in responses and responses["400"]["content"]["application/json"]["schema"] == \
                {"$ref": "#/components/schemas/ErrorResponse"}
    tools.close()


def test_mounted_router_answers_bad_bodies_the_same(agent_store_copy) -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from knowtology_cli import KnowledgeMapTools

    tools = KnowledgeMapTools.open(str(agent_store_copy))
    app = FastAPI()
    app.include_router(tools.get_fastapi_router(prefix="/kb"))
    with TestClient(app) as client:
        response = client.post("/kb/read", json={"chunk_ids": []})
        assert response.status_code == 400 and response.json()["detail"]["code"] == "invalid_argument"
        assert client.post("/kb/read", json={"chunk_ids": ["ret-1"]}).status_code == 200
    tools.close()


def test_no_page_loads_from_the_network(agent_store_copy) -> None:
    """FastAPI's /docs and /redoc load Swagger UI / ReDoc from a CDN; the app serves neither."""
    tools, client = _app_client(agent_store_copy)
    with client:
        assert client.get("/docs").status_code == 404 and client.get("/redoc").status_code == 404
        assert client.get("/openapi.json").json()["info"]["title"] == "Knowtology"
        page = client.get("/")
        assert page.status_code == 200 and "cdn.jsdelivr.net" not in page.text
    tools.close()
