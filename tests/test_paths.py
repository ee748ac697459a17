"""Forgiving category paths (library level, so every surface gets them) and the recorded chunk count."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowtology_cli.errors import NotFoundError
from knowtology_cli.paths import path_key, resolve_path, suggest_paths

PATHS = ["Returns", "Returns/Refunds", "Returns/Refunds/Perishables", "Returns/Exchanges", "Security",
         "Security/Passwords", "Shipping/Cold Chain"]


def test_path_key_ignores_case_and_spacing() -> None:
    assert path_key(" returns /  REFUNDS/perishables ") == "returns/refunds/perishables"
    assert path_key("Shipping/Cold   Chain") == path_key("shipping/cold chain")


def test_resolve_takes_the_one_path_that_fits() -> None:
    assert resolve_path("returns/refunds", PATHS, collection="c") == "Returns/Refunds"
    assert resolve_path("SHIPPING / cold chain", PATHS, collection="c") == "Shipping/Cold Chain"


def test_resolve_refuses_to_guess_between_case_variants() -> None:
    with pytest.raises(NotFoundError) as info:
        resolve_path("security", [*PATHS, "SECURITY"], collection="c")
    assert "matches several categories" in info.value.message
    assert "'SECURITY'" in info.value.message and "'Security'" in info.value.message


def test_unknown_path_hints_real_paths() -> None:
    with pytest.raises(NotFoundError) as info:
        resolve_path("Retruns/Refunds", PATHS, collection="c")
    assert info.value.message == "no category 'Retruns/Refunds' in collection 'c'"
    assert info.value.hint.startswith("did you mean 'Returns/Refunds'")
    assert suggest_paths("perishables", PATHS)[0] == "Returns/Refunds/Perishables"  # a leaf named alone
    assert suggest_paths("Passwrods", PATHS)[0] == "Security/Passwords"  # a misspelt leaf
    assert suggest_paths("zzz unrelated", PATHS) == []
    with pytest.raises(NotFoundError) as info:
        resolve_path("anything", [], collection="c")
    assert "run `kt build`" in info.value.hint


def test_only_close_paths_are_suggested() -> None:
    """A suggestion is a typo away or shares whole words; letters in common are not enough."""
    paths = [*PATHS, "String", "Shipping/Refund Windows"]
    with pytest.raises(NotFoundError) as info:
        resolve_path("Nope/Nothing", paths, collection="c")
    assert info.value.hint == "`kt browse` lists the top categories"  # 'Nothing' is 3 edits from 'String'
    assert suggest_paths("fund", paths) == []  # inside 'Refunds', but no word of it
    assert suggest_paths("refund", paths) == ["Returns/Refunds", "Shipping/Refund Windows"]
    assert suggest_paths("Security/Pasword", paths) == ["Security/Passwords"]
    assert suggest_paths("Shiping/Cold Chian", paths) == ["Shipping/Cold Chain"]
    assert suggest_paths("returns/refunds/perishable", paths)[0] == "Returns/Refunds/Perishables"


def test_edit_distance_counts_swaps_as_one_and_stops_at_the_limit() -> None:
    from knowtology_cli.paths import edit_distance

    assert edit_distance("passwrods", "passwords") == 1
    assert edit_distance("nothing", "string") == 3
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3
    assert edit_distance("nothing", "string", limit=2) == 3  # limit + 1: further than allowed
    assert edit_distance("a" * 40, "b" * 40, limit=3) == 4


def test_every_surface_resolves_through_the_library(built_store: Path) -> None:
    from knowtology_cli.kb import KnowledgeBase
    from knowtology_cli.tools import KnowledgeMapTools

    kb = KnowledgeBase.open(built_store)
    top = kb.browse().children[0]
    assert kb.browse(top.path.swapcase()).path == top.path
    assert kb.find_node(top.path.upper()).path == top.path
    hits = kb.grep("refund", k=50, under=top.path.lower())
    assert all(h.path == top.path or h.path.startswith(top.path + "/") for h in hits.hits)
    tools = KnowledgeMapTools("default", kb=kb)
    assert tools.browse_tree_sync(top.path.lower()).startswith(top.path)
    with pytest.raises(NotFoundError) as info:
        tools.browse_tree_sync(top.path + "x")
    assert info.value.hint.startswith(f"did you mean {top.path!r}")
    kb.close()


def test_browse_counts_unmapped_chunks_from_the_recorded_count(docs_dir: Path, store_dir: Path) -> None:
    from knowtology_cli.kb import KnowledgeBase

    kb = KnowledgeBase.open(store_dir)
    report = kb.ingest([str(docs_dir)], embedder="hash")
    assert kb.tree.get_collection("default").chunks == report.total
    assert kb.browse().unmapped == report.total and not kb.browse().children
    kb.build(builder="cluster")
    assert kb.browse().unmapped == 0
    extra = docs_dir / "gift-cards.md"
    extra.write_text("# Gift cards\n\nGift cards never expire.\n", encoding="utf-8")
    kb.ingest([str(extra)])
    assert kb.browse().unmapped == 1
    assert kb.browse(kb.browse().children[0].path).unmapped == 0  # only the root reports it
    kb.close()


def test_stores_without_a_recorded_count_count_the_table_only_without_a_tree(docs_dir: Path,
                                                                          store_dir: Path) -> None:
    from knowtology_cli.kb import KnowledgeBase

    kb = KnowledgeBase.open(store_dir)
    total = kb.ingest([str(docs_dir)], embedder="hash").total
    kb.tree.conn.execute("UPDATE collections SET chunks = NULL")  # as written before the count existed
    assert kb.tree.get_collection("default").chunks is None
    assert kb.browse().unmapped == total
    kb.close()


def test_a_leaf_named_alone_is_taken_when_one_path_ends_with_it() -> None:
    assert resolve_path("perishables", PATHS, collection="c") == "Returns/Refunds/Perishables"
    assert resolve_path("refunds / PERISHABLES", PATHS, collection="c") == "Returns/Refunds/Perishables"
    assert resolve_path("cold chain", PATHS, collection="c") == "Shipping/Cold Chain"
    with pytest.raises(NotFoundError) as info:  # two paths end so: the hint names both
        resolve_path("refunds", [*PATHS, "Billing/Refunds"], collection="c")
    assert info.value.hint == "did you mean 'Returns/Refunds' or 'Billing/Refunds'?"
    with pytest.raises(NotFoundError):
        resolve_path("ishables", PATHS, collection="c")  # the end of a word is no segment


IDS = [f"docs/guide/{name}#{i}" for name in ("install.md", "usage.md", "Config.rst") for i in range(4)] + ["faq-7"]


def test_ids_copied_with_their_brackets_or_several_in_one_string_read_as_meant() -> None:
    from knowtology_cli.paths import id_forms

    assert id_forms("[docs/a.md#3]") == ["docs/a.md#3"]
    assert id_forms(" `'docs/a.md#3'` ") == ["docs/a.md#3"]
    assert id_forms("[a#1], [a#2]") == ["a#1", "a#2"]
    assert id_forms("a#1, a#2,") == ["a#1", "a#2"]
    assert id_forms("[draft].md#0") == ["[draft].md#0"]  # brackets that are part of the id stay
    assert id_forms("[]") == []


def test_unknown_ids_hint_real_ids_near_them() -> None:
    from knowtology_cli.paths import suggest_ids

    assert suggest_ids("docs/guide/usage.md#9", IDS) == "'docs/guide/usage.md' has chunks #0 to #3"
    assert suggest_ids("usage.md#2", IDS) == "did you mean 'docs/guide/usage.md#2'?"  # the path's end only
    assert suggest_ids("guide/config.rst#1", IDS) == "did you mean 'docs/guide/Config.rst#1'?"
    assert suggest_ids("docs/guide/usgae.md#7", IDS) == "did you mean 'docs/guide/usage.md#0'?"  # no #7 there
    assert suggest_ids("faq-8", IDS) == "did you mean 'faq-7'?"
    assert suggest_ids("docs/guide/usage.md", IDS) == "'docs/guide/usage.md' is a document: read its chunks, #0 to #3"
    assert suggest_ids("changelog.md#1", IDS) is None
    assert suggest_ids("zzz", IDS) is None


def test_an_id_of_a_moved_file_hints_the_file_where_it_is_now() -> None:
    from knowtology_cli.paths import suggest_ids

    assert suggest_ids("docs/old/install.md#2", IDS) == "did you mean 'docs/guide/install.md#2'?"
    assert suggest_ids("handbook/guide/usage.md#1", IDS) == "did you mean 'docs/guide/usage.md#1'?"  # another source
    shared = [f"{folder}/{name}#0" for folder in ("a", "b") for name in ("README.md", "notes.md")]
    assert suggest_ids("other/README.md#0", shared) is None  # a name many folders use says nothing
    assert suggest_ids("other/x/notes.md#0", [*shared, "z/x/notes.md#0"]) == "did you mean 'z/x/notes.md#0'?"
    # the moved file comes before a sibling a typo away
    moved = ["aws/s3api/put-object.rst#0", "aws/s3/get-object.rst#0"]
    assert suggest_ids("aws/s3api/get-object.rst#0", moved) == (
        "did you mean 'aws/s3/get-object.rst#0' or 'aws/s3api/put-object.rst#0'?")


def test_read_and_browse_forgive_through_the_kt_executable(sample_store: Path, tmp_path: Path) -> None:
    import json
    import os
    import shutil
    import subprocess
    import sys

    kt = str(Path(sys.executable).with_name("kt"))
    shutil.copytree(sample_store, tmp_path / "store")
    env = {**os.environ, "KNOWTOLOGY_STORE": str(tmp_path / "store"), "LANCEDB_LOG": "error"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kt, *args], capture_output=True, text=True, env=env, timeout=300)

    assert run("build").returncode == 0
    tree = json.loads(run("export", "--format", "json").stdout)
    chunk_id = tree["chunks"][0]["chunk_id"]
    doc, index = chunk_id.rsplit("#", 1)
    read = run("read", f"[{chunk_id}]", "--json")
    assert read.returncode == 0, read.stderr
    assert [c["chunk_id"] for c in json.loads(read.stdout)["chunks"]] == [chunk_id]
    wrong = run("read", f"{doc}#999")
    assert wrong.returncode == 1 and f"Hint: '{doc}' has chunks #0 to #" in wrong.stderr
    short = run("read", f"{doc.rsplit('/', 1)[-1]}#{index}")
    assert short.returncode == 1 and f"Hint: did you mean '{chunk_id}'?" in short.stderr
    names = [n["name"].casefold() for n in tree["nodes"]]
    unique = next(n for n in tree["nodes"] if n["level"] > 1 and names.count(n["name"].casefold()) == 1)
    browse = run("browse", unique["name"].lower())
    assert browse.returncode == 0 and browse.stdout.startswith(unique["path"]), browse.stderr
