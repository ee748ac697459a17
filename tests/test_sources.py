"""A corpus that changes (issue 12): sources with stable identities, nothing overwritten silently,
removal, and a store written by 0.1.0 — end to end through the real ``kt`` executable, plus the
library paths the CLI cannot reach (a removal interrupted between its two commits)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _agent_fixtures import KT, env  # noqa: F401

from knowtology_cli.kb import KnowledgeBase

FIXTURE = Path(__file__).parent / "fixtures" / "release-0.1.0"
pytest_plugins = ("scale_fixtures",)


def kt(*args: str | Path, cwd: Path | None = None, stdin: str | None = None):
    import subprocess

    return subprocess.run([KT, *map(str, args)], capture_output=True, text=True, env=env(), timeout=300,
                          cwd=cwd, input=stdin if stdin is not None else "")


def ok(*args: str | Path, cwd: Path | None = None, stdin: str | None = None) -> dict:
    done = kt(*args, "--json", cwd=cwd, stdin=stdin)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def lance_versions(store: Path) -> list[str]:
    return sorted(str(p.relative_to(store)) for p in (store / "lance").rglob("_versions/*"))


def audit_tree(store: Path, collection: str = "default") -> dict:
    """Counts that must agree in any consistent store: rows, mappings, node counts, emptiness."""
    kb = KnowledgeBase.open(store)
    try:
        rows = kb.vectors.fingerprints(collection)
        mappings = kb.tree.mappings(collection)
        nodes = kb.tree.nodes(collection)
        kids: dict[int | None, int] = {}
        for n in nodes:
            kids[n.parent_id] = kids.get(n.parent_id, 0) + 1
        top = sum(n.chunk_count for n in nodes if n.parent_id is None)
        return {"rows": len(rows), "mapped": len(mappings), "top_sum": top, "nodes": len(nodes),
                "empty": [n.path for n in nodes if n.chunk_count == 0],
                "single_child": [n.path for n in nodes if kids.get(n.id) == 1],
                "orphans": [m.chunk_id for m in mappings if m.chunk_id not in rows],
                "pending": kb.tree.pending_removals()}
    finally:
        kb.close()


@pytest.fixture
def two_folders(tmp_path: Path) -> Path:
    for name, body in (("c1", "# Notes\n\nThe aardvark digs burrows and eats termites at night.\n"),
                       ("c2", "# Notes\n\nThe zebra grazes on the open savanna in large herds.\n")):
        folder = tmp_path / name / "docs"
        folder.mkdir(parents=True)
        (folder / "notes.md").write_text(body, encoding="utf-8")
    return tmp_path


# ------------------------------------------------------------------------------------------ identity
def test_two_folders_sharing_a_name_never_replace_each_other(two_folders: Path) -> None:
    store = two_folders / "store"
    first = ok("ingest", "c1/docs", "--embedder", "hash", "--store", store, cwd=two_folders)
    assert (first["added"], first["sources"]) == (1, ["docs"])
    before = lance_versions(store)

    refused = kt("ingest", "c2/docs", "--store", store, "--json", cwd=two_folders)
    assert refused.returncode == 1
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "conflict"
    assert str(two_folders / "c1" / "docs") in error["message"] and str(two_folders / "c2" / "docs") in error["message"]
    assert "--source" in error["hint"] and "--replace" in error["hint"]
    assert "Error: source 'docs' is already" in refused.stderr
    assert lance_versions(store) == before  # nothing was written
    fresh = two_folders / "fresh"
    both = kt("ingest", "c1/docs", "c2/docs", "--embedder", "hash", "--store", fresh, cwd=two_folders)
    assert both.returncode == 1 and "same command" in both.stderr and "--source NAME" in both.stderr
    assert not (fresh / "lance").exists()

    second = ok("ingest", "c2/docs", "--source", "docs-2", "--store", store, cwd=two_folders)
    assert (second["added"], second["updated"], second["total"]) == (1, 0, 2)
    assert [h["chunk_id"] for h in ok("grep", "aardvark", "--store", store)["hits"]] == ["docs/notes.md#0"]
    assert [h["chunk_id"] for h in ok("grep", "zebra", "--store", store)["hits"]] == ["docs-2/notes.md#0"]


def test_one_folder_by_any_spelling_from_two_cwds_adds_and_updates_nothing(tmp_path: Path, docs_dir: Path) -> None:
    store = tmp_path / "store"
    first = ok("ingest", "docs", "--embedder", "hash", "--store", store, cwd=tmp_path)
    total = first["total"]
    (tmp_path / "link").symlink_to(docs_dir, target_is_directory=True)
    elsewhere = tmp_path / "elsewhere" / "deeper"
    elsewhere.mkdir(parents=True)
    spellings = [("./docs/", tmp_path), (str(docs_dir), tmp_path), ("link", tmp_path), ("../../docs", elsewhere),
                 (".", docs_dir), (str(docs_dir / "policies" / ".." / "policies" / "refunds.md"), elsewhere)]
    for spelling, cwd in spellings:
        again = ok("ingest", spelling, "--store", store, cwd=cwd)
        assert (again["added"], again["updated"], again["deleted"]) == (0, 0, 0), (spelling, cwd, again)
        assert again["sources"] == ["docs"] and again["total"] == total
    listed = ok("sources", "--store", store)
    assert [(s["name"], s["root"], s["kind"], s["chunks"]) for s in listed["sources"]] == [
        ("docs", str(docs_dir), "dir", total)]
    assert listed["sources"][0]["files"] == 4 and listed["unregistered"] == 0


def test_single_file_ids_match_its_folder_and_follow_a_registered_root(tmp_path: Path, docs_dir: Path) -> None:
    store = tmp_path / "store"
    one = ok("ingest", docs_dir / "engineering" / "oncall.md", "--embedder", "hash", "--store", store)
    assert one["sources"] == ["engineering"]
    ids = {h["chunk_id"] for h in ok("grep", "PagerDuty", "--store", store)["hits"]}
    assert ids == {"engineering/oncall.md#0"}
    assert ok("sources", "--store", store)["sources"][0]["kind"] == "files"  # a re-scan re-reads that file only
    # the folder is the same source (its root), so the file is unchanged and the rest is added
    folder = ok("ingest", "engineering", "--store", store, cwd=docs_dir)
    assert (folder["unchanged"], folder["updated"]) == (1, 0) and folder["added"] >= 1
    assert ok("sources", "--store", store)["sources"][0]["kind"] == "dir"


def test_jsonl_ids_owned_by_another_source_conflict_unless_replace(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for folder, text in (("a", "first version of the shared row"), ("b", "second source claims the row")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "rows.jsonl").write_text(json.dumps({"id": "row-1", "text": text}) + "\n")
    ok("ingest", "a/rows.jsonl", "--embedder", "hash", "--store", store, cwd=tmp_path)
    refused = kt("ingest", "b/rows.jsonl", "--store", store, cwd=tmp_path)
    assert refused.returncode == 1
    assert "chunk id 'row-1' is already stored from source 'a' (a/rows.jsonl)" in refused.stderr
    assert "--replace" in refused.stderr
    taken = ok("ingest", "b/rows.jsonl", "--replace", "--store", store, cwd=tmp_path)
    assert (taken["added"], taken["updated"]) == (0, 1)
    owners = {s["name"]: s["chunks"] for s in ok("sources", "--store", store)["sources"]}
    assert owners == {"a": 0, "b": 1}
    piped = ok("ingest", "-", "--store", store, stdin=json.dumps({"id": "p-1", "text": "from a pipe"}) + "\n")
    assert piped["sources"] == ["stdin"] and piped["added"] == 1


def test_rescan_by_name_and_a_moved_checkout(tmp_path: Path, docs_dir: Path) -> None:
    store = tmp_path / "store"
    ok("ingest", docs_dir, "--source", "handbook", "--embedder", "hash", "--store", store)
    (docs_dir / "policies" / "returns.md").write_text("# Returns\n\nUnopened boxes go back within 30 days.\n")
    elsewhere = tmp_path / "x"
    elsewhere.mkdir()
    rescan = ok("ingest", "--source", "handbook", "--store", store, cwd=elsewhere)
    assert (rescan["added"], rescan["updated"], rescan["sources"]) == (1, 0, ["handbook"])
    assert ok("grep", "unopened boxes", "--store", store)["hits"][0]["chunk_id"] == "handbook/policies/returns.md#0"

    moved = tmp_path / "moved" / "docs"
    moved.parent.mkdir()
    docs_dir.rename(moved)
    gone = kt("ingest", "--source", "handbook", "--store", store)
    assert gone.returncode == 1 and "no longer exists" in gone.stderr and "--replace" in gone.stderr
    clash = kt("ingest", moved, "--source", "handbook", "--store", store)
    assert clash.returncode == 1 and str(moved) in clash.stderr
    repointed = ok("ingest", moved, "--source", "handbook", "--replace", "--store", store)
    assert (repointed["added"], repointed["updated"], repointed["embedded"]) == (0, 0, 0)
    assert ok("sources", "--store", store)["sources"][0]["root"] == str(moved)
    unknown = kt("ingest", "--source", "nope", "--store", store)
    assert unknown.returncode == 1 and "no source named 'nope'" in unknown.stderr


def test_renamed_and_moved_files_keep_their_vectors_and_their_place(tmp_path: Path, docs_dir: Path) -> None:
    """A file renamed or moved between subfolders is new ids with stored text: nothing is embedded,
    and with --prune (the old ids leave in the same run) each chunk keeps its leaf, so the map and
    its status stay as they were."""
    store = tmp_path / "store"
    ok("ingest", docs_dir, "--embedder", "hash", "--store", store)
    ok("build", "--store", store)
    before = ok("browse", "--store", store)
    (docs_dir / "policies" / "refunds.md").rename(docs_dir / "policies" / "refund-policy.md")
    (docs_dir / "engineering" / "oncall.md").rename(docs_dir / "policies" / "oncall.md")
    moved = ok("ingest", docs_dir, "--prune", "--store", store)
    assert moved["embedded"] == 0 and moved["reused"] == moved["added"] == moved["deleted"] > 0
    status = ok("status", "--store", store)["collections"][0]
    assert (status["state"], status["unmapped"], status["drift"]) == ("current", 0, 0.0)
    assert ok("browse", "--store", store)["children"] == before["children"]
    audit = audit_tree(store)
    assert audit["rows"] == audit["mapped"] and not audit["orphans"] and not audit["empty"]
    read = ok("read", "docs/policies/refund-policy.md#0", "--store", store)["chunks"][0]
    assert read["path"] and read["file_name"] == "docs/policies/refund-policy.md"
    # an agent holding an old id learns where its text went
    gone = kt("read", "docs/policies/refunds.md#0", "--store", store, "--json")
    assert gone.returncode != 0 and "the text is now 'docs/policies/refund-policy.md#0'" in gone.stdout
    # in two steps, as status advises (ingest, then ingest --prune), the moved chunks keep the places too
    place = read["path"]
    (docs_dir / "policies" / "refund-policy.md").rename(docs_dir / "policies" / "refunds-2026.md")
    first = ok("ingest", docs_dir, "--store", store)
    assert first["embedded"] == 0 and first["deleted"] == 0 and first["gone"] == ["docs/policies/refund-policy.md"]
    second = ok("ingest", docs_dir, "--prune", "--store", store)
    assert second["deleted"] == first["added"] > 0
    status = ok("status", "--store", store)["collections"][0]
    assert (status["state"], status["unmapped"]) == ("current", 0)
    assert ok("read", "docs/policies/refunds-2026.md#0", "--store", store)["chunks"][0]["path"] == place
    both = ok("read", "docs/policies/refunds.md#0", "docs/policies/refund-policy.md#0", "docs/policies/oncall.md#0",
              "--store", store)  # the first id moved twice: it leads to where the text is now
    assert both["missing_hints"] == {
        "docs/policies/refunds.md#0": "its file was renamed or moved: the text is now 'docs/policies/refunds-2026.md#0'"
                                      " (kt read docs/policies/refunds-2026.md#0)",
        "docs/policies/refund-policy.md#0": "its file was renamed or moved: the text is now"
                                            " 'docs/policies/refunds-2026.md#0' (kt read docs/policies/refunds-2026.md#0)"}


def test_a_renamed_file_titled_by_its_name_keeps_its_place(tmp_path: Path) -> None:
    """A file without a heading is titled by its name (AWS CLI examples: ``delete-queue.rst``), so a
    rename changes each chunk's title and thus its vector: it is embedded anew, and with --prune it
    still takes the old chunk's leaf, its snippet led by the new name; the map stays current."""
    store = tmp_path / "store"
    docs = tmp_path / "examples"
    docs.mkdir()
    for stem, words in (("delete-queue", "deletes the queue named zircon and every message in it"),
                        ("create-queue", "creates a queue named basalt for the order events"),
                        ("list-queues", "lists every queue of the account with its address")):
        (docs / f"{stem}.txt").write_text(f"The following command {words}.\n")
    ok("ingest", docs, "--embedder", "hash", "--store", store)
    ok("build", "--store", store)
    (docs / "delete-queue.txt").rename(docs / "remove-queue.txt")
    renamed = ok("ingest", docs, "--prune", "--store", store)
    assert (renamed["added"], renamed["deleted"], renamed["embedded"], renamed["reused"]) == (1, 1, 1, 0)
    status = ok("status", "--store", store)["collections"][0]
    assert (status["state"], status["unmapped"]) == ("current", 0)
    hit = ok("grep", "zircon", "--store", store)["hits"][0]
    assert hit["chunk_id"] == "examples/remove-queue.txt#0" and hit["path"]
    leaf = ok("browse", hit["path"], "--store", store)
    snippet = next(c["snippet"] for c in leaf["chunks"] if c["chunk_id"] == hit["chunk_id"])
    assert snippet.startswith("remove-queue") and "delete-queue" not in snippet


def test_status_names_files_gone_added_or_edited_on_disk_and_edited_chunks(tmp_path: Path) -> None:
    """A file deleted without --prune stays searchable, and one edited or added since the last ingest is
    not searchable yet: status lists both and says what to run; an edited chunk (still at its old place
    until kt build) shows in the table's unmapped column."""
    import os
    import time

    store = tmp_path / "store"
    docs = tmp_path / "notes"
    docs.mkdir()
    for n in range(4):
        (docs / f"page{n}.md").write_text(f"# Page {n}\n\nThe shelf number {n} holds item{n} stock.\n")
    past = time.time() - 60
    for page in docs.iterdir():
        os.utime(page, (past, past))
    ok("ingest", docs, "--embedder", "hash", "--store", store)
    ok("build", "--store", store)
    status = ok("status", "--store", store)["collections"][0]
    assert (status["gone"], status["newer"], status["advice"]) == ([], [], "")
    (docs / "page2.md").unlink()
    (docs / "page1.md").write_text("# Page 1\n\nThe shelf now holds basalt.\n")
    (docs / "page9.md").write_text("# Page 9\n\nA new shelf of zircon.\n")
    status = ok("status", "--store", store)["collections"][0]
    assert status["gone"] == ["notes/page2.md"] and status["newer"] == ["notes/page1.md", "notes/page9.md"]
    said = kt("ingest", docs, "--store", store).stdout  # without --prune, ingest says what stays
    assert "note: 1 indexed file(s) gone from disk are still searchable (e.g. notes/page2.md): add --prune" in said
    assert "1 indexed file(s) gone from disk (e.g. notes/page2.md): kt ingest --source notes --prune" in status["advice"]
    assert "2 file(s) added or changed on disk since the last ingest (e.g. notes/page1.md): kt ingest --source notes" \
        in status["advice"]
    assert ok("ingest", "--source", "notes", "--store", store)["gone"] == ["notes/page2.md"]
    status = ok("status", "--store", store)["collections"][0]
    assert status["newer"] == [] and status["changed"] == 1 and status["gone"] == ["notes/page2.md"]
    table = kt("status", "--store", store).stdout
    assert "1 + 1 changed" in table and "gone from disk" in table  # page9 is new, page1 edited
    ok("ingest", "--source", "notes", "--prune", "--store", store)
    assert ok("status", "--store", store)["collections"][0]["gone"] == []
    assert not ok("grep", "item2", "--store", store)["hits"]
    # a folder moved in keeps its files' own times: they are new all the same
    elsewhere = tmp_path / "archive"
    elsewhere.mkdir()
    (elsewhere / "old.md").write_text("# Old\n\nAn old shelf of garnet.\n")
    os.utime(elsewhere / "old.md", (past, past))
    (docs / "empty.md").write_text("")  # on disk, indexed as no text: no "new" file on each status
    ok("ingest", "--source", "notes", "--store", store)
    assert ok("status", "--store", store)["collections"][0]["newer"] == []
    os.rename(elsewhere, docs / "archive")
    assert ok("status", "--store", store)["collections"][0]["newer"] == ["notes/archive/old.md"]
    ok("ingest", "--source", "notes", "--store", store)
    # a file the folder holds but no ingest indexes (empty, or only included by a page) is not new
    # when its folder changes: the folder held indexed files, so it was not moved in
    (docs / "archive" / "blank.md").write_text("")
    os.utime(docs / "archive" / "blank.md", (past, past))
    ok("ingest", "--source", "notes", "--store", store)
    (docs / "archive" / "scratch.md").write_text("# Scratch\n\nA note.\n")
    (docs / "archive" / "scratch.md").unlink()
    assert ok("status", "--store", store)["collections"][0]["newer"] == []


def test_a_folder_moved_under_a_new_name_is_pointed_out(tmp_path: Path, docs_dir: Path) -> None:
    """Ingesting a moved folder under its new name adds its text again: nothing is embedded twice,
    and the report names the source whose folder is gone and how to drop the old copy."""
    store, other = tmp_path / "store", tmp_path / "other"
    first = ok("ingest", docs_dir, "--embedder", "hash", "--store", store)
    ok("ingest", docs_dir, "--embedder", "hash", "--store", other)
    moved = tmp_path / "handbook"
    docs_dir.rename(moved)
    again = ok("ingest", moved, "--store", store)
    assert again["embedded"] == 0 and again["reused"] == first["added"]
    assert again["moved_sources"] == {"docs": first["added"]}
    shown = kt("ingest", moved, "--store", other)
    assert shown.returncode == 0, shown.stderr
    assert "source 'docs' is gone from disk" in shown.stdout and "kt rm --source docs" in shown.stdout
    assert ok("ingest", moved, "--store", store)["moved_sources"] == {}  # said once: now nothing new came in


# ------------------------------------------------------------------------------------------ removal
def _copy_without(src: Path, dst: Path, skip: str) -> Path:
    shutil.copytree(src, dst, ignore=lambda d, names: [n for n in names if Path(d, n) == src / skip])
    return dst


def test_rm_one_file_leaves_the_store_as_if_it_was_never_ingested(tmp_path: Path) -> None:
    corpus = shutil.copytree(FIXTURE / "handbook", tmp_path / "handbook")
    gone = "hr/onboarding.md"
    store = tmp_path / "store"
    ok("ingest", corpus, "--embedder", "hash", "--store", store)
    ok("build", "--store", store)
    kb = KnowledgeBase.open(store)
    removed_ids = sorted(i for i, (_, f) in kb.vectors.fingerprints("default").items() if f == f"handbook/{gone}")
    kb.close()
    assert removed_ids
    ok("read", removed_ids[0], "--session", "alice", "--store", store)
    words = "buddy"  # a word only the onboarding guide has
    assert ok("grep", words, "--store", store)["hits"]

    plan = ok("rm", corpus / gone, "--dry-run", "--store", store)
    assert plan["dry_run"] and plan["removed"] == len(removed_ids) and plan["files"] == [f"handbook/{gone}"]
    refused = kt("rm", corpus / gone, "--store", store)  # stdin is not a terminal
    assert refused.returncode == 1 and "--yes" in refused.stderr
    assert audit_tree(store)["rows"] == 41

    done = ok("rm", corpus / gone, "--yes", "--store", store)
    assert done["removed"] == len(removed_ids) and done["total"] == 41 - len(removed_ids)

    reference = tmp_path / "reference"
    ok("ingest", _copy_without(FIXTURE / "handbook", tmp_path / "ref" / "handbook", gone), "--embedder", "hash",
       "--store", reference)
    after, expected = audit_tree(store), audit_tree(reference)
    assert after["rows"] == expected["rows"] == after["mapped"] == after["top_sum"]
    assert after["empty"] == after["single_child"] == after["orphans"] == [] and after["pending"] == {}
    assert ok("grep", words, "--store", store)["hits"] == ok("grep", words, "--store", reference)["hits"] == []
    status = ok("status", "--store", store)["collections"][0]
    assert (status["chunks"], status["mapped"], status["unmapped"]) == (expected["rows"], expected["rows"], 0)
    assert ok("session", "show", "alice", "--store", store)["read"] == []
    missing = kt("read", removed_ids[0], "--store", store)
    assert missing.returncode == 1 and "no chunk" in missing.stderr
    # the rows really left the table: ingesting the file again adds them (nothing is "unchanged")
    back = ok("ingest", corpus, "--store", store)
    assert (back["added"], back["updated"]) == (len(removed_ids), 0)


def test_rm_folders_labels_and_whole_sources(tmp_path: Path, docs_dir: Path) -> None:
    store = tmp_path / "store"
    ok("ingest", docs_dir, "--embedder", "hash", "--store", store)
    ok("build", "--store", store)
    folder = ok("rm", "docs/engineering", "--yes", "--store", store, cwd=tmp_path)
    assert folder["files"] == ["docs/engineering/failover.md", "docs/engineering/oncall.md"]
    shutil.rmtree(docs_dir / "policies")  # gone from disk: the SOURCE/PATH label still names it
    label = ok("rm", "docs/policies/shipping.md", "--yes", "--store", store, cwd=tmp_path / "docs")
    assert label["files"] == ["docs/policies/shipping.md"] and label["sources"] == []
    nothing = kt("rm", "docs/nope.md", "--yes", "--store", store, "--json", cwd=tmp_path)
    assert nothing.returncode == 1 and json.loads(nothing.stdout)["error"]["code"] == "not_found"
    whole = ok("rm", "--source", "docs", "--yes", "--store", store)
    assert whole["sources"] == ["docs"] and whole["total"] == 0 and whole["nodes"] == 0
    assert ok("sources", "--store", store)["sources"] == []
    assert audit_tree(store)["pending"] == {}


def test_drop_removes_a_collection_and_asks_first(tmp_path: Path, docs_dir: Path) -> None:
    store = tmp_path / "store"
    ok("ingest", docs_dir, "--embedder", "hash", "--store", store)
    ok("ingest", docs_dir, "-c", "other", "--embedder", "hash", "--store", store)
    ok("read", "docs/engineering/oncall.md#0", "-c", "other", "--session", "s1", "--store", store)
    refused = kt("drop", "other", "--store", store)
    assert refused.returncode == 1 and "--yes" in refused.stderr
    plan = ok("drop", "other", "--dry-run", "--store", store)
    assert plan["dry_run"] and plan["chunks"] > 0
    done = ok("drop", "other", "--yes", "--store", store)
    assert done["collection"] == "other" and not done["dry_run"]
    assert [c["name"] for c in ok("status", "--store", store)["collections"]] == ["default"]
    assert not (store / "lance" / "other.lance").exists()
    assert "other" not in json.loads((store / "sessions" / "s1.json").read_text())["collections"]
    again = kt("drop", "other", "--yes", "--store", store)
    assert again.returncode == 1 and "no collection named 'other'" in again.stderr


def test_a_removal_killed_between_its_commits_is_invisible_and_finished_later(tmp_path: Path,
                                                                              docs_dir: Path) -> None:
    from knowtology_cli.stores.lance import LanceVectorStore

    store = tmp_path / "store"
    kb = KnowledgeBase.open(store)
    kb.ingest([str(docs_dir)], embedder="hash")
    kb.build(builder="cluster")
    kb.read(["docs/engineering/oncall.md#0"], session="s")
    ids = sorted(i for i, (_, f) in kb.vectors.fingerprints("default").items() if f == "docs/engineering/oncall.md")
    kb.close()

    def killed(self, collection, chunk_ids) -> None:
        raise KeyboardInterrupt

    original = LanceVectorStore.delete
    LanceVectorStore.delete = killed  # type: ignore[method-assign]
    try:
        with pytest.raises(KeyboardInterrupt):
            KnowledgeBase.open(store).rm([str(docs_dir / "engineering" / "oncall.md")])
    finally:
        LanceVectorStore.delete = original  # type: ignore[method-assign]
    mid = audit_tree(store)
    assert set(mid["pending"]["default"]) == set(ids) and mid["orphans"] == []
    kb = KnowledgeBase.open(store, lock=None)  # a reader that cannot finish it sees the new state anyway
    assert not any(h.chunk_id in ids for h in kb.grep("PagerDuty acknowledge").hits)
    with pytest.raises(Exception, match="no chunk"):
        kb.read(ids[:1])
    kb.close()
    status = ok("status", "--store", store)["collections"][0]  # finishes the removal
    final = audit_tree(store)
    assert final["pending"] == {} and final["rows"] == status["chunks"] == final["mapped"] == final["top_sum"]
    assert ok("session", "show", "s", "--store", store)["read"] == []


# ------------------------------------------------------------------------------------------ migration
def test_a_store_written_by_0_1_0_migrates_and_keeps_working(tmp_path: Path) -> None:
    import sqlite3

    store = shutil.copytree(FIXTURE / "store", tmp_path / "store")
    corpus = shutil.copytree(FIXTURE / "handbook", tmp_path / "handbook")
    assert sqlite3.connect(store / "tree.db").execute("PRAGMA user_version").fetchone()[0] == 1
    status = ok("status", "--store", store)["collections"][0]
    assert (status["chunks"], status["mapped"], status["state"], status["drift"]) == (41, 41, "current", 0.0)
    conn = sqlite3.connect(store / "tree.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] >= 2
    assert conn.execute("SELECT COUNT(*) FROM tree_nodes WHERE named_count != chunk_count").fetchone()[0] == 0
    assert conn.execute("SELECT built_chunks FROM collections").fetchone()[0] == 41
    conn.close()
    assert ok("sources", "--store", store)["unregistered"] == 41
    # the same folder, ingested again: its ids are the ones 0.1.0 gave, so nothing is added or
    # deleted (rows are updated where today's parsers chunk or annotate a document differently)
    again = ok("ingest", "handbook", "--store", store, cwd=tmp_path)
    assert (again["added"], again["deleted"], again["total"]) == (0, 0, 41)
    steady = ok("ingest", str(corpus) + "/", "--store", store)
    assert (steady["added"], steady["updated"], steady["unchanged"]) == (0, 0, 41)
    listed = ok("sources", "--store", store)
    assert listed["unregistered"] == 0 and [(s["name"], s["files"], s["chunks"]) for s in listed["sources"]] == [
        ("handbook", 11, 41)]
    read = ok("read", "handbook/hr/onboarding.md#0", "--session", "alice", "--store", store)
    assert read["chunks"][0]["already_read"]  # alice's 0.1.0 history is intact
    removed = ok("rm", corpus / "hr" / "onboarding.md", "--yes", "--store", store)
    assert removed["removed"] == 4 and ok("session", "show", "alice", "--store", store)["read"] == []
    built = ok("build", "--store", store)
    assert built["unmapped"] == 0 and ok("status", "--store", store)["collections"][0]["state"] == "current"


def test_a_postgres_tree_store_of_0_1_0_migrates(pg_dsn: str) -> None:
    import psycopg

    from knowtology_cli.stores import pg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # what 0.1.0 created: migrations 1 and 2
        conn.execute("CREATE TABLE kt_schema_migrations (version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION)")
        for number, sql in enumerate(pg.MIGRATIONS[:2], start=1):
            conn.execute(sql)
            conn.execute("INSERT INTO kt_schema_migrations VALUES (%s, 0)", (number,))
        conn.execute("INSERT INTO kt_collections (name, embedder, dimension, created_at, updated_at)"
                     " VALUES ('c', 'hash', 8, 0, 0)")
        node = conn.execute("INSERT INTO kt_tree_nodes (collection, name, level, path, chunk_count)"
                            " VALUES ('c', 'Policies', 1, 'Policies', 2) RETURNING id").fetchone()[0]
        for chunk_id in ("a#0", "a#1"):
            conn.execute("INSERT INTO kt_chunk_mappings (collection, chunk_id, tree_node_id, snippet)"
                         " VALUES ('c', %s, %s, 's')", (chunk_id, node))
    tree = pg.PostgresTreeStore(pg_dsn)
    try:
        assert tree.schema_version() == len(pg.MIGRATIONS)
        [only] = tree.nodes("c")
        assert (only.named_count, only.churn) == (2, 0)
        assert tree.tree_state("c").built == 2 and tree.sources("c") == []
        tree.remove_chunks("c", ["a#1"])
        assert tree.get_node("c", "Policies").churn == 1 and tree.pending_removals() == {"c": ["a#1"]}
    finally:
        tree.close()


def test_rm_and_drop_ask_on_a_terminal(tmp_path: Path, docs_dir: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    store = tmp_path / "store"
    ok("ingest", docs_dir, "--embedder", "hash", "--store", store)
    target = docs_dir / "policies" / "refunds.md"

    def answer(args: list[str], reply: str) -> int:
        child = pexpect.spawn(KT, args, env=env(), encoding="utf-8", timeout=120)
        child.expect(r"\[y/N\]")
        child.sendline(reply)
        child.expect(pexpect.EOF)
        child.close()
        return child.exitstatus

    assert answer(["rm", str(target), "--store", str(store)], "n") == 1
    assert ok("sources", "--store", store)["sources"][0]["files"] == 4
    assert answer(["rm", str(target), "--store", str(store)], "y") == 0
    assert ok("sources", "--store", store)["sources"][0]["files"] == 3
    assert answer(["drop", "--store", str(store)], "y") == 0
    assert ok("status", "--store", store)["collections"] == []


def test_rm_never_reads_an_existing_folder_as_a_label_of_a_namesake_source(two_folders: Path) -> None:
    store = two_folders / "store"
    ok("ingest", "c1/docs", "--embedder", "hash", "--store", store, cwd=two_folders)
    other = kt("rm", "docs/notes.md", "--yes", "--store", store, cwd=two_folders / "c2")  # c2/docs is not 'docs'
    assert other.returncode == 1 and "nothing stored from 'docs/notes.md'" in other.stderr
    assert audit_tree(store)["rows"] == 1
    label = ok("rm", "docs/notes.md", "--yes", "--store", store, cwd=two_folders)  # no such path here: a label
    assert label["removed"] == 1


def test_the_same_text_in_several_new_files_is_embedded_once(tmp_path: Path) -> None:
    """Documentation sets ship each page twice (Node.js's API docs as .md and .html: a third of its
    chunks repeat another's title and text). Each distinct text is embedded once per run, also across
    embedding batches, and every copy gets that text's vector; the report counts the copies as reused."""
    from knowtology_cli.embedders.hash import HashEmbedder

    docs = tmp_path / "docs"
    docs.mkdir()
    shared = "# Shelving\n\nPallets go on the lowest shelf; cartons above them.\n"
    for i in range(70):  # more copies than the first embedding batch holds
        (docs / f"copy-{i:02d}.md").write_text(shared)
    for i in range(30):
        (docs / f"page-{i:02d}.md").write_text(f"# Page {i}\n\nOnly page {i} says word{i} here.\n")
    report = ok("ingest", docs, "--embedder", "hash", "--store", tmp_path / "store")
    assert (report["total"], report["embedded"], report["reused"]) == (100, 31, 69)
    shown = kt("ingest", docs, "--embedder", "hash", "--store", tmp_path / "again")
    assert "69 chunk(s) hold the title and text of another chunk, stored or new" in shown.stdout
    kb = KnowledgeBase.open(tmp_path / "store")
    try:
        ids = [f"docs/copy-{i:02d}.md#0" for i in range(70)] + [f"docs/page-{i:02d}.md#0" for i in range(30)]
        stored = kb.vectors.vectors("default", ids)
        model = HashEmbedder()
        chunk = kb.vectors.get("default", ["docs/copy-00.md#0"])[0]
        expect = model.embed_documents([f"{chunk.title}\n{chunk.text}"])[0]
        for i in range(70):
            assert stored[ids[i]] == pytest.approx(expect, abs=1e-6)
        page = kb.vectors.get("default", ["docs/page-07.md#0"])[0]
        assert stored["docs/page-07.md#0"] == pytest.approx(model.embed_documents([f"{page.title}\n{page.text}"])[0],
                                                            abs=1e-6)
    finally:
        kb.close()


def test_ktignore_leaves_files_out_and_prune_removes_what_it_newly_leaves_out(tmp_path: Path) -> None:
    """A .ktignore (gitignore syntax) in the folder or below leaves files out; one that newly leaves out
    an indexed file says so, --prune removes it; kt status does not call left-out files new; kt rm of
    a file still in the folder says the next ingest reads it again."""
    docs = tmp_path / "docs"
    for rel, text in {"a.md": "Alpha text about shelves.", "vendor/b.md": "Vendored library text.",
                      "guide/draft-1.md": "A draft page.", "guide/g.md": "Guide text about pallets."}.items():
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(f"# {rel}\n\n{text}\n")
    (docs / ".ktignore").write_text("# third-party docs\nvendor/\n")
    (docs / "guide" / ".ktignore").write_text("draft-*.md\n")
    store = tmp_path / "store"
    first = ok("ingest", docs, "--embedder", "hash", "--store", store)
    assert first["excluded"] == ["docs/guide/draft-1.md", "docs/vendor/b.md"] and first["total"] == 2
    assert not ok("grep", "draft", "--store", store)["hits"]
    with (docs / ".ktignore").open("a") as handle:
        handle.write("a.md\n")
    (docs / "vendor" / "c.md").write_text("# C\n\nMore vendored text.\n")
    (docs / "guide" / "h.md").write_text("# H\n\nA new guide page.\n")
    status = ok("status", "--store", store)["collections"][0]
    assert status["newer"] == ["docs/guide/h.md"], status  # not the left-out vendor/c.md
    kept = kt("ingest", docs, "--store", store)
    assert kept.returncode == 0 and "1 indexed file(s) that .ktignore now leaves out are still searchable" in kept.stdout
    assert ok("grep", "shelves", "--store", store)["hits"]
    pruned = ok("ingest", docs, "--prune", "--store", store)
    assert pruned["deleted"] == 1 and pruned["total"] == 2 and not pruned["excluded_indexed"]
    assert not ok("grep", "shelves", "--store", store)["hits"]
    removed = kt("rm", docs / "guide" / "g.md", "--yes", "--store", store)
    assert removed.returncode == 0 and "1 file still in its folder" in removed.stdout and ".ktignore" in removed.stdout
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "x.md").write_text("# X\n\nLeft out.\n")
    (tmp_path / "only" / ".ktignore").write_text("*.md\n")
    empty = kt("ingest", tmp_path / "only", "--store", store)
    assert empty.returncode == 1 and "every document in it is left out by a .ktignore" in empty.stderr


def test_rm_of_a_one_chunk_file_says_one_chunk_and_a_read_of_it_names_kt_rm(tmp_path: Path) -> None:
    """The audit of git's manuals saw "removed 1 chunks of 1 file" and, reading a removed id, a hint
    that blamed an ingest."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "note.md").write_text("# Note\n\nA single short note about shelving.\n")
    (docs / "pallets-and-racking-guide.md").write_text("# Pallets\n\nSomething else entirely, about racking.\n")
    store = tmp_path / "store"
    ok("ingest", docs, "--embedder", "hash", "--store", store)
    done = kt("rm", docs / "note.md", "--yes", "--store", store)
    assert done.returncode == 0, done.stderr
    assert "removed 1 chunk of 1 file — 1 chunk, 0 categories left" in done.stdout
    (docs / "note.md").unlink()
    again = kt("ingest", docs, "--store", store)
    assert "— 1 chunk (0 embedded with" in again.stdout
    gone = kt("read", "docs/note.md#0", "--store", store)
    assert gone.returncode == 1 and "removed by an ingest or rm" in gone.stderr
