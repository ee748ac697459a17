"""Tree export (json, markdown, mermaid, html) and ``kt import-tree``: real stores, the real ``kt`` executable."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import KT, SAMPLE

from knowtology_cli.export import SCHEMA, SCHEMA_VERSION, parse_document, render_markdown, render_mermaid

pytest_plugins = ("scale_fixtures",)


def kt(*args: str, check: bool = True, input: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the installed ``kt`` console script (a real process, real stores)."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWTOLOGY_")}
    env.update(NO_COLOR="1", LANCEDB_LOG="error", LANCE_LOG="error")
    proc = subprocess.run([KT, *map(str, args)], capture_output=True, text=True, env=env, timeout=300, input=input,
                          cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"kt {' '.join(map(str, args))} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _ingest_sample(store: Path) -> None:
    kt("ingest", SAMPLE, "--embedder", "hash", "--store", store)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sample_corpus ingested (hash embedder) and built offline through the executable; read-only."""
    store = tmp_path_factory.mktemp("export-built") / "store"
    _ingest_sample(store)
    kt("build", "--builder", "cluster", "--store", store)
    return store


@pytest.fixture(scope="module")
def unbuilt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same chunks in a second store with no tree (a template: tests copy it)."""
    store = tmp_path_factory.mktemp("export-unbuilt") / "store"
    _ingest_sample(store)
    return store


@pytest.fixture()
def fresh(unbuilt: Path, tmp_path: Path) -> Path:
    target = tmp_path / "fresh-store"
    shutil.copytree(unbuilt, target)
    return target


@pytest.fixture(scope="module")
def exported(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export-doc") / "tree.json"
    kt("export", "--format", "json", "-o", out, "--store", built)
    return out


def _doc(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _browse_all(store: Path) -> dict[str, str]:
    """``kt browse --json`` (stdout bytes) at the root and at every category, in-process for speed."""
    from typer.testing import CliRunner

    from knowtology_cli.cli.app import app

    runner = CliRunner()
    root = runner.invoke(app, ["browse", "--depth", "3", "--json", "--store", str(store)])
    assert root.exit_code == 0, root.output
    paths = [c["path"] for c in json.loads(root.stdout)["children"]]
    out = {"root": root.stdout}
    for path in paths:
        result = runner.invoke(app, ["browse", path, "--json", "--store", str(store)])
        assert result.exit_code == 0, result.output
        out[path] = result.stdout
    return out


# the document -----------------------------------------------------------------------------------

def test_json_document_carries_every_node_and_chunk(built: Path, exported: Path) -> None:
    doc = _doc(exported)
    assert (doc["format"], doc["version"], doc["collection"], doc["root"]) == (SCHEMA, SCHEMA_VERSION, "default", "root")
    status = json.loads(kt("status", "--json", "--store", built).stdout)["collections"][0]
    assert len(doc["nodes"]) == status["nodes"] and doc["chunk_count"] == len(doc["chunks"]) == status["mapped"]
    assert doc["unmapped"] == [] and doc["builder"] == "cluster" and doc["embedder"] == "hash"
    paths = {n["path"] for n in doc["nodes"]}
    parents = {p.rsplit("/", 1)[0] for p in paths if "/" in p}
    for node in doc["nodes"]:
        under = [c for c in doc["chunks"] if c["path"] == node["path"] or c["path"].startswith(node["path"] + "/")]
        assert node["chunk_count"] == len(under)
        assert node["name"] == node["path"].rsplit("/", 1)[-1] and node["level"] == node["path"].count("/") + 1
        assert node["child_count"] == sum(1 for p in paths if p.rsplit("/", 1)[0] == node["path"] and "/" in p)
    ids = [c["chunk_id"] for c in doc["chunks"]]
    assert len(ids) == len(set(ids))
    read = json.loads(kt("read", ids[0], "--json", "--store", built).stdout)["chunks"][0]
    first = doc["chunks"][0]
    assert all(c["path"] in paths and c["path"] not in parents and c["snippet"] for c in doc["chunks"])
    assert (first["file_name"], first["doc_id"], first["chunk_index"], first["path"]) == (
        read["file_name"], read["doc_id"], read["chunk_index"], read["path"])
    assert first["content_hash"] and first["title"] == read["title"]


def test_import_tree_reproduces_the_tree_byte_for_byte(built: Path, exported: Path, fresh: Path) -> None:
    before = _browse_all(built)
    result = json.loads(kt("import-tree", exported, "--json", "--store", fresh).stdout)
    assert result["mapped"] == _doc(exported)["chunk_count"] and result["replaced"] is False
    assert result["missing_from_store"] == result["unmapped_in_store"] == result["changed"] == []
    # the executable's own bytes for the root map, then every category in-process
    assert kt("browse", "--depth", "3", "--json", "--store", fresh).stdout == \
        kt("browse", "--depth", "3", "--json", "--store", built).stdout
    assert _browse_all(fresh) == before
    status = json.loads(kt("status", "--json", "--store", fresh).stdout)["collections"][0]
    assert status["unmapped"] == 0 and status["stale"] is False and status["builder"] == "cluster"
    again = fresh.parent / "again.json"
    kt("export", "-o", again, "--store", fresh)
    assert again.read_bytes() == exported.read_bytes()


def test_import_refuses_to_replace_a_tree_unless_asked(built: Path, exported: Path, tmp_path: Path) -> None:
    store = tmp_path / "copy"
    shutil.copytree(built, store)
    doc = _doc(exported)
    first = doc["nodes"][0]["path"]
    renamed = json.dumps(doc).replace(json.dumps(first), json.dumps(first + " (edited)"))
    # a renamed top category renames its name segment too
    data = json.loads(renamed)
    for node in data["nodes"]:
        if node["path"] == first + " (edited)":
            node["name"] = node["path"]
    data["nodes"] = [n if not n["path"].startswith(first + "/") else {**n, "path": first + " (edited)/" + n["path"].split("/", 1)[1]}
                     for n in data["nodes"]]
    for chunk in data["chunks"]:
        if chunk["path"].startswith(first + "/"):
            chunk["path"] = first + " (edited)/" + chunk["path"].split("/", 1)[1]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data), encoding="utf-8")
    before = kt("browse", "--depth", "3", "--json", "--store", store).stdout
    refused = kt("import-tree", edited, "--store", store, check=False)
    assert refused.returncode == 1
    assert "already has a tree" in refused.stderr and "--replace" in refused.stderr
    assert kt("browse", "--depth", "3", "--json", "--store", store).stdout == before
    done = json.loads(kt("import-tree", edited, "--replace", "--json", "--store", store).stdout)
    assert done["replaced"] is True
    top = json.loads(kt("browse", "--json", "--store", store).stdout)["children"]
    assert first + " (edited)" in [c["path"] for c in top] and first not in [c["path"] for c in top]


def test_differences_between_document_and_store_are_reported(exported: Path, fresh: Path, tmp_path: Path) -> None:
    doc = _doc(exported)
    dropped = doc["chunks"][0]["chunk_id"]
    changed = doc["chunks"][1]["chunk_id"]
    doc["chunks"] = doc["chunks"][1:]
    doc["chunks"][0]["content_hash"] = "0" * 16
    leaf = doc["chunks"][-1]["path"]
    doc["chunks"].append({"chunk_id": "not-in-this-store", "path": leaf, "snippet": "ghost"})
    path = tmp_path / "diff.json"
    path.write_text(json.dumps(doc), encoding="utf-8")

    strict = kt("import-tree", path, "--strict", "--store", fresh, check=False)
    assert strict.returncode == 1 and "differ" in strict.stderr
    assert json.loads(kt("status", "--json", "--store", fresh).stdout)["collections"][0]["nodes"] == 0

    human = kt("import-tree", path, "--store", fresh)
    assert "1 chunk in the document but not in the store (skipped): not-in-this-store" in human.stdout
    assert f"1 chunk in the store but not in the document (unmapped — `kt build` places them): {dropped}" in human.stdout
    assert f"1 chunk changed since the export (kept; `kt build` re-places them): {changed}" in human.stdout
    status = json.loads(kt("status", "--json", "--store", fresh).stdout)["collections"][0]
    assert status["unmapped"] == 1 and status["stale"] is True
    rebuilt = json.loads(kt("build", "--json", "--store", fresh).stdout)
    assert rebuilt["unmapped"] == 0
    assert json.loads(kt("status", "--json", "--store", fresh).stdout)["collections"][0]["stale"] is False


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.update(format="something-else"), "not a tree document"),
    (lambda d: d.update(version=SCHEMA_VERSION + 1), "newer than this kt reads"),
    (lambda d: d["nodes"][0].update(name="Other name"), "nodes[0].name"),
    (lambda d: d["nodes"][0].update(level=3), "nodes[0].level"),
    (lambda d: d["nodes"].append(dict(d["nodes"][0])), "appears twice"),
    (lambda d: d["chunks"].append(dict(d["chunks"][0])), "appears twice"),
    (lambda d: d["chunks"][0].update(path="Nowhere"), "chunks[0].path"),
    (lambda d: d["chunks"][0].update(snippet="two\nlines"), "chunks[0].snippet"),
    (lambda d: d["chunks"][0].pop("chunk_id"), "chunks[0].chunk_id: Field required"),
])
def test_bad_documents_are_refused_with_the_field_named(exported: Path, fresh: Path, tmp_path: Path, mutate,
                                                       message: str) -> None:
    doc = _doc(exported)
    mutate(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = kt("import-tree", path, "--store", fresh, check=False)
    assert result.returncode == 1
    assert result.stderr.startswith("Error: ") and message in result.stderr and str(path) in result.stderr
    assert json.loads(kt("status", "--json", "--store", fresh).stdout)["collections"][0]["nodes"] == 0


def test_chunk_on_an_inner_category_is_refused(exported: Path, fresh: Path, tmp_path: Path) -> None:
    doc = _doc(exported)
    inner = next(n["path"] for n in doc["nodes"] if n["child_count"])
    doc["chunks"][0]["path"] = inner
    path = tmp_path / "inner.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = kt("import-tree", path, "--store", fresh, check=False)
    assert result.returncode == 1 and "leaves only" in result.stderr


def test_broken_json_names_line_and_column(fresh: Path, tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "format": "knowtology-tree",\n  "version": 1,\n  "nodes": [\n', encoding="utf-8")
    result = kt("import-tree", path, "--store", fresh, check=False)
    assert result.returncode == 1 and f"{path}:5:1: not valid JSON" in result.stderr
    missing = kt("import-tree", tmp_path / "nope.json", "--store", fresh, check=False)
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_a_document_for_another_corpus_is_refused(exported: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "note.md").write_text("# Note\n\nSomething else entirely, about gardening.\n", encoding="utf-8")
    kt("ingest", tmp_path / "docs", "--embedder", "hash", "--store", other)
    result = kt("import-tree", exported, "--store", other, check=False)
    assert result.returncode == 1 and "none of its" in result.stderr
    assert json.loads(kt("status", "--json", "--store", other).stdout)["collections"][0]["nodes"] == 0


def test_import_reads_stdin(exported: Path, fresh: Path) -> None:
    result = json.loads(kt("import-tree", "-", "--json", "--store", fresh, input=exported.read_text()).stdout)
    assert result["source"] == "<stdin>" and result["mapped"] > 0


def test_hand_written_tree_with_awkward_names_imports(fresh: Path, tmp_path: Path) -> None:
    """Any tree (e.g. one an LLM built, or a person edited) goes in as written, names and all."""
    files = json.loads(kt("export", "--store", fresh, "--json", "--format", "json").stdout)
    assert files["nodes"] == 0
    ids = sorted(json.loads(kt("export", "--store", fresh).stdout)["unmapped"])
    names = ["Returns & <Refunds>", "C# *Guides*", "1. First_steps"]
    doc = {"format": SCHEMA, "version": 1, "builder": "llm",
           "nodes": [{"path": names[0], "name": names[0], "level": 1, "description": 'Money back "fast"'},
                     {"path": f"{names[0]}/{names[1]}", "name": names[1], "level": 2},
                     {"path": names[2], "name": names[2], "level": 1}],
           "chunks": [{"chunk_id": cid, "path": f"{names[0]}/{names[1]}" if i % 2 else names[2],
                       "snippet": f"snippet {i} with `code` and [brackets]"} for i, cid in enumerate(ids)]}
    path = tmp_path / "hand.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    report = json.loads(kt("import-tree", path, "--json", "--store", fresh).stdout)
    assert report["mapped"] == len(ids) and report["unmapped_in_store"] == [] and report["builder"] == "llm"
    top = json.loads(kt("browse", "--json", "--depth", "2", "--store", fresh).stdout)
    assert [(c["path"], c["chunk_count"]) for c in top["children"]] == [
        (names[2], len(ids) - len(ids) // 2), (names[0], len(ids) // 2), (f"{names[0]}/{names[1]}", len(ids) // 2)]
    assert top["children"][1]["description"] == 'Money back "fast"'

    markdown = kt("export", "--format", "markdown", "--store", fresh).stdout
    _assert_markdown_is_literal(markdown, names, doc)
    mermaid = kt("export", "--format", "mermaid", "--store", fresh).stdout
    assert '["Returns & #lt;Refunds#gt; · ' in mermaid and '["C#35; *Guides* · ' in mermaid
    html = kt("export", "--format", "html", "--store", fresh).stdout
    assert "Returns &amp; &lt;Refunds&gt;" in html and "<Refunds>" not in html


def _assert_markdown_is_literal(markdown: str, names: list[str], doc: dict) -> None:
    """Parsed by a CommonMark parser, every name and snippet comes back as plain text."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(markdown)
    inline = [t for t in tokens if t.type == "inline"]
    texts = ["".join(c.content for c in t.children if c.type in ("text", "code_inline")) for t in inline]
    for name in names:
        assert any(text.startswith(name + " (") for text in texts), (name, texts)
    kinds = {c.type for t in inline for c in t.children}
    assert "html_inline" not in kinds and "em_open" not in kinds
    items = sum(1 for t in tokens if t.type == "list_item_open")
    assert items == len(doc["nodes"]) + len(doc["chunks"])
    assert not any(t.type == "heading_open" for t in tokens[3:]) and not any(t.type == "ordered_list_open" for t in tokens)


# other formats ----------------------------------------------------------------------------------

def test_markdown_and_mermaid_exports_of_the_sample_tree(built: Path, exported: Path, tmp_path: Path) -> None:
    """Markdown written anywhere links each chunk to its file as seen from there (the file opens)."""
    import os
    from urllib.parse import unquote

    doc = _doc(exported)
    out = tmp_path / "site" / "maps"
    out.mkdir(parents=True)
    kt("export", "--format", "markdown", "-o", out / "tree.md", "--store", built)
    markdown = (out / "tree.md").read_text()
    roots = {"sample_corpus": os.path.relpath(Path(SAMPLE).resolve(), out)}
    assert markdown == render_markdown(parse_document(exported.read_bytes()), roots=roots)
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(markdown)
    assert sum(1 for t in tokens if t.type == "list_item_open") == len(doc["nodes"]) + len(doc["chunks"])
    links = [c.attrs["href"] for t in tokens if t.type == "inline" for c in t.children if c.type == "link_open"]
    ranges = [f"#L{c['lines'][0]}-L{c['lines'][1]}" if c["lines"] else f"#page={c['pages'][0]}" if c["pages"] else ""
              for c in doc["chunks"]]
    # a document's file_name is "source/path"; a JSONL row's own file_name is kept as written
    expected = [(roots["sample_corpus"] + c["file_name"].removeprefix("sample_corpus")
                 if c["file_name"].startswith("sample_corpus/") else c["file_name"]) + r
                for c, r in zip(doc["chunks"], ranges)]
    assert sorted(links) == sorted(expected)
    opened = [link for link in links if link.startswith("../")]
    assert len(opened) > 100 and all((out / unquote(link.split("#")[0])).is_file() for link in opened)
    # to stdout the links are from the working directory
    assert kt("export", "--format", "markdown", "--store", built, cwd=out).stdout == markdown

    mermaid = kt("export", "--format", "mermaid", "--store", built).stdout
    lines = mermaid.splitlines()
    assert lines[0] == "flowchart LR" and lines[1] == f'  n0["default · {doc["chunk_count"]}"]'
    assert len([line for line in lines if "-->" in line]) == len(doc["nodes"])
    for node in doc["nodes"]:
        assert f'["{node["name"]} · {node["chunk_count"]}"]' in mermaid.replace("#35;", "#")
    shallow, warnings = render_mermaid(parse_document(exported.read_bytes()), depth=1)
    assert len([line for line in shallow.splitlines() if "-->" in line]) == sum(n["level"] == 1 for n in doc["nodes"])
    assert warnings == []


def test_subtree_export(built: Path, exported: Path) -> None:
    doc = _doc(exported)
    inner = next(n for n in doc["nodes"] if n["child_count"])
    sub = json.loads(kt("export", inner["path"], "--store", built).stdout)
    assert sub["root"] == inner["path"] and sub["unmapped"] is None
    assert {n["path"] for n in sub["nodes"]} == {n["path"] for n in doc["nodes"]
                                                if n["path"] == inner["path"] or n["path"].startswith(inner["path"] + "/")}
    assert sub["chunk_count"] == inner["chunk_count"] == len(sub["chunks"])
    mermaid = kt("export", inner["path"], "-f", "mermaid", "--store", built).stdout
    assert mermaid.splitlines()[1].endswith(f' · {inner["chunk_count"]}"]')
    assert len([line for line in mermaid.splitlines() if "-->" in line]) == len(sub["nodes"]) - 1
    missing = kt("export", "No/Such/Path", "--store", built, check=False)
    assert missing.returncode == 1 and "no category" in missing.stderr


def test_export_never_overwrites_without_force(built: Path, tmp_path: Path) -> None:
    out = tmp_path / "map.html"
    out.write_text("keep me", encoding="utf-8")
    refused = kt("export", "-f", "html", "-o", out, "--store", built, check=False)
    assert refused.returncode == 1 and "already exists" in refused.stderr and "--force" in refused.stderr
    assert out.read_text(encoding="utf-8") == "keep me"
    summary = json.loads(kt("export", "-f", "html", "-o", out, "--force", "--json", "--store", built).stdout)
    page = out.read_text(encoding="utf-8")
    assert summary["output"] == str(out) and summary["bytes"] == len(page.encode()) and "text" not in summary
    assert page.startswith("<!doctype html>") and "Content-Security-Policy" in page
    assert not list(tmp_path.glob(".map.html.*"))  # no temporary file left behind


def test_export_usage_errors(built: Path) -> None:
    depth = kt("export", "--format", "json", "--depth", "2", "--store", built, check=False)
    assert depth.returncode == 1 and "--depth does not apply to json" in depth.stderr
    fmt = kt("export", "--format", "pdf", "--store", built, check=False)
    assert fmt.returncode == 2
    base = kt("export", "-f", "html", "--link-base", "javascript:alert(1)//", "--store", built, check=False)
    assert base.returncode == 1 and "unsupported link base" in base.stderr


def test_json_flag_wraps_any_format_in_one_document(built: Path) -> None:
    result = json.loads(kt("export", "-f", "mermaid", "--json", "--store", built).stdout)
    assert result["format"] == "mermaid" and result["text"].startswith("flowchart LR") and result["nodes"] > 0


def test_source_ranges_travel_into_every_format(tmp_path: Path) -> None:
    """A chunk's provenance (section, line or page range in its metadata) reaches JSON, links and labels."""
    rows = [
        {"chunk_id": "a", "file_name": "guide/setup.md", "text": "Install the agent on every host.",
         "metadata": {"section": "Guide › Setup", "lines": [12, 30]}},
        {"chunk_id": "b", "file_name": "manual.pdf", "text": "Torque the bolts to 40 Nm.",
         "metadata": {"section": "Manual › Assembly", "pages": [3, 4]}},
        {"chunk_id": "c", "file_name": "javascript:alert(1)", "text": "Nothing special here at all.",
         "metadata": {"lines": "not a range"}},
    ]
    source = tmp_path / "rows.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    kt("ingest", source, "--embedder", "hash", "--store", store)
    doc = {"format": SCHEMA, "version": 1, "nodes": [{"path": "All", "name": "All", "level": 1}],
           "chunks": [{"chunk_id": r["chunk_id"], "path": "All", "snippet": r["text"]} for r in rows]}
    (tmp_path / "t.json").write_text(json.dumps(doc), encoding="utf-8")
    kt("import-tree", tmp_path / "t.json", "--store", store)
    chunks = {c["chunk_id"]: c for c in json.loads(kt("export", "--store", store).stdout)["chunks"]}
    place = {k: {f: chunks[k][f] for f in ("section", "lines", "pages")} for k in chunks}
    assert place == {"a": {"section": "Guide › Setup", "lines": [12, 30], "pages": None},
                     "b": {"section": "Manual › Assembly", "lines": None, "pages": [3, 4]},
                     "c": {"section": "", "lines": None, "pages": None}}
    html = kt("export", "-f", "html", "--link-base", "https://example.org/repo/", "--store", store).stdout
    assert 'href="https://example.org/repo/guide/setup.md#L12-L30">guide/setup.md:12-30</a>' in html
    assert 'href="https://example.org/repo/manual.pdf#page=3">manual.pdf:p3-4</a>' in html
    assert 'href="https://example.org/repo/javascript%3Aalert%281%29"' in html
    relative = kt("export", "-f", "markdown", "--store", store).stdout
    assert "(<guide/setup.md#L12-L30>)" in relative and "(<javascript%3Aalert%281%29>)" in relative


def test_empty_tree_exports_and_says_so(fresh: Path) -> None:
    doc = json.loads(kt("export", "--store", fresh).stdout)
    assert doc["nodes"] == [] and doc["chunks"] == [] and len(doc["unmapped"]) > 100
    assert "No tree yet" in kt("export", "-f", "html", "--store", fresh).stdout


# kt serve ---------------------------------------------------------------------------------------

def _serve(store: Path, token: str | None = None):
    import os
    import socket
    import time

    httpx = pytest.importorskip("httpx")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWTOLOGY_")}
    env.update(LANCEDB_LOG="error", LANCE_LOG="error", **({"KNOWTOLOGY_API_TOKEN": token} if token else {}))
    proc = subprocess.Popen([KT, "serve", "--store", str(store), "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"kt serve exited: {proc.stderr.read()}")
        try:
            httpx.get(url + "/openapi.json", timeout=1)
            return proc, url
        except httpx.TransportError:
            time.sleep(0.2)
    proc.terminate()
    raise AssertionError("kt serve did not start")


def test_serve_answers_the_map_page_at_root(built: Path) -> None:
    pytest.importorskip("fastapi")
    import httpx

    proc, url = _serve(built)
    try:
        page = httpx.get(url + "/", timeout=30)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in page.headers["content-security-policy"]
        # the served page links files by their source paths, as an export read from the corpus's parent does
        assert page.text == kt("export", "-f", "html", "--store", built, cwd=Path(SAMPLE).parent).stdout
        assert "/" not in httpx.get(url + "/openapi.json", timeout=10).json()["paths"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_serve_map_page_needs_the_token_when_one_is_set(built: Path) -> None:
    pytest.importorskip("fastapi")
    import httpx

    proc, url = _serve(built, token="s3cret-token")
    try:
        assert httpx.get(url + "/", timeout=30).status_code == 401
        ok = httpx.get(url + "/", headers={"Authorization": "Bearer s3cret-token"}, timeout=30)
        assert ok.status_code == 200 and "<details>" in ok.text
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.parametrize("command", ["export", "import-tree"])
def test_commands_have_help(command: str) -> None:
    result = kt(command, "--help")
    assert "Usage" in result.stdout and len(result.stdout.splitlines()) > 4


def test_round_trip_onto_a_postgres_tree_store(cli, docs_dir: Path, tmp_path: Path, pg_dsn: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The same document lands the same tree in PostgreSQL (KNOWTOLOGY_TREE_DSN) as in SQLite."""
    source, target = tmp_path / "sqlite-store", tmp_path / "pg-store"
    assert cli("ingest", docs_dir, "--embedder", "hash", "--store", source).exit_code == 0
    assert cli("build", "--builder", "cluster", "--store", source).exit_code == 0
    document = tmp_path / "tree.json"
    assert cli("export", "-o", document, "--store", source).exit_code == 0
    expected = _browse_all(source)
    monkeypatch.setenv("KNOWTOLOGY_TREE_DSN", pg_dsn)
    assert cli("ingest", docs_dir, "--embedder", "hash", "--store", target).exit_code == 0
    report = cli("import-tree", document, "--json", "--store", target)
    assert report.exit_code == 0 and json.loads(report.stdout)["unmapped_in_store"] == []
    assert _browse_all(target) == expected
    refused = cli("import-tree", document, "--store", target)
    assert refused.exit_code == 1 and "already has a tree" in refused.stderr
    assert _browse_all(target) == expected


def test_committed_json_schema_matches_the_model_and_validates_exports(exported: Path) -> None:
    """docs/tree-document.schema.json is the model's schema, and a real export satisfies it."""
    from conftest import ROOT

    from knowtology_cli.export import TreeDocument

    committed = json.loads((ROOT / "docs" / "tree-document.schema.json").read_text(encoding="utf-8"))
    assert committed == TreeDocument.json_schema(), "regenerate docs/tree-document.schema.json (see docs/export.md)"
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(_doc(exported), committed)
    broken = _doc(exported)
    broken["nodes"][0]["level"] = 4
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, committed)


def test_import_finds_the_chunks_of_a_renamed_file_by_their_text(exported: Path, tmp_path: Path) -> None:
    """A file renamed since the export holds the same chunks under new ids; the exported tree still
    lands on them, matched by their text (``relinked``): nothing is missing and nothing unplaced."""
    corpus = tmp_path / "sample_corpus"
    shutil.copytree(SAMPLE, corpus)
    doc = _doc(exported)
    page = max({c["doc_id"] for c in doc["chunks"] if c["doc_id"].endswith(".md")},
               key=lambda d: sum(1 for c in doc["chunks"] if c["doc_id"] == d))
    target = corpus / page.split("/", 1)[1]
    target.rename(target.with_name("renamed-" + target.name))
    store = tmp_path / "store"
    kt("ingest", corpus, "--embedder", "hash", "--store", store)
    result = json.loads(kt("import-tree", exported, "--json", "--store", store).stdout)
    moved = sorted(c["chunk_id"] for c in doc["chunks"] if c["doc_id"] == page)
    assert sorted(result["relinked"]) == moved and result["missing_from_store"] == []
    assert all("/renamed-" in new for new in result["relinked"].values())
    assert result["unmapped_in_store"] == [] and result["mapped"] == doc["chunk_count"]
    status = json.loads(kt("status", "--json", "--store", store).stdout)["collections"][0]
    assert (status["unmapped"], status["stale"]) == (0, False)
    human = kt("import-tree", exported, "--replace", "--store", store).stdout
    assert f"{len(moved)} chunks found under another id by their text" in human
