"""The bad-input matrix for ``kt ingest`` (issue #6.1), through the CLI.

Every bad input gets exit 1, one ``Error: file[:line]: problem — what to do`` line on stderr, and a
store that is byte-for-byte unchanged (``kt status --json`` and the Lance version list). With
``--skip-invalid`` the good rows land and the bad ones are counted and listed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from knowtology_cli.ingest import DOC_KINDS

GOOD = [{"id": f"good-{i}", "text": f"good row number {i} about refunds and shipping"} for i in range(3)]
ERROR_LINE = re.compile(r"^Error: (?P<where>[^\s:]+(?::\d+)?): (?P<problem>.+) — (?P<todo>.+)$")


def _jsonl(rows: list) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


@pytest.fixture
def store(cli, tmp_path: Path) -> Path:
    """A store that already holds three good rows (so 'unchanged' means something)."""
    src = tmp_path / "seed.jsonl"
    src.write_text(_jsonl(GOOD), encoding="utf-8")
    store = tmp_path / "store"
    result = cli("ingest", src, "--store", store, "--embedder", "hash", "--json")
    assert result.exit_code == 0, result.output
    return store


def _snapshot(cli, store: Path) -> tuple[str, list[str]]:
    status = cli("status", "--store", store, "--json")
    assert status.exit_code == 0, status.output
    versions = sorted(p.name for p in (store / "lance").rglob("_versions/*"))
    return status.stdout, versions


def _write(root: Path, files: dict[str, str | bytes]) -> list[str]:
    paths = []
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(body, encoding="utf-8")
        paths.append(str(path))
    return paths


def _deep(depth: int) -> str:
    return '{"id": "deep", "text": "deep", "metadata": ' + '{"a": ' * depth + "1" + "}" * depth + "}"


# name -> (files, the location the error must name, words the problem must contain)
BAD: dict[str, tuple[dict[str, str | bytes], str, str]] = {
    "malformed-json": ({"in.jsonl": _jsonl([GOOD[0], '{"text": "no closing brace"'])}, "in.jsonl:2", "invalid JSON"),
    "missing-text": ({"in.jsonl": _jsonl([{"id": "x", "title": "no text"}])}, "in.jsonl:1", "'text' is missing"),
    "non-string-text": ({"in.jsonl": _jsonl([{"id": "x", "text": 42}])}, "in.jsonl:1", "not a string"),
    "list-text": ({"in.jsonl": _jsonl([{"id": "x", "text": ["a", "b"]}])}, "in.jsonl:1", "not a string"),
    "null-text": ({"in.jsonl": _jsonl([{"id": "x", "text": None}])}, "in.jsonl:1", "'text' is missing"),
    "not-an-object": ({"in.jsonl": _jsonl([[1, 2, 3]])}, "in.jsonl:1", "expected a JSON object"),
    "empty-file": ({"in.jsonl": ""}, "in.jsonl", "empty file"),
    "blank-lines-only": ({"in.jsonl": "\n   \n\n"}, "in.jsonl", "empty file"),
    "empty-text": ({"in.jsonl": _jsonl([{"id": "x", "text": "   \n\t"}])}, "in.jsonl:1", "'text' is empty"),
    "binary-document": ({"in.md": b"PK\x03\x04\x00\x00binary\x00zip"}, "in.md", "binary file"),
    "binary-jsonl": ({"in.jsonl": b'{"text": "a\x00b"}\n\x00\x01\x02'}, "in.jsonl", "binary file"),
    "latin-1-bytes": ({"in.jsonl": _jsonl([GOOD[0]]).encode() + b'{"text": "caf\xe9"}\n'}, "in.jsonl:2",
                      "not valid UTF-8"),
    "latin-1-document": ({"in.md": b"# Title\n\nline one\nna\xefve caf\xe9\n"}, "in.md:4", "not valid UTF-8"),
    "10mb-line": ({"in.jsonl": json.dumps({"id": "big", "text": "x" * 10_000_000}) + "\n"}, "in.jsonl:1",
                  "10,000,000 characters"),
    "dup-id-one-file": ({"in.jsonl": _jsonl([{"id": "d", "text": "one"}, GOOD[0], {"id": "d", "text": "two"}])},
                        "in.jsonl:3", "duplicate chunk_id 'd' (first at "),
    "dup-id-across-files": ({"a.jsonl": _jsonl([{"id": "d", "text": "one"}]),
                             "b.jsonl": _jsonl([{"id": "d", "text": "two"}])},
                            "b.jsonl:1", "duplicate chunk_id 'd' (first at "),
    "dup-derived-id": ({"in.jsonl": _jsonl([{"text": "same words"}, {"text": "same words"}])}, "in.jsonl:2",
                       "duplicate chunk_id"),
    "metadata-too-deep": ({"in.jsonl": _deep(100_000) + "\n"}, "in.jsonl:1", "nested too deeply"),
    "metadata-not-object": ({"in.jsonl": _jsonl([{"id": "x", "text": "t", "metadata": [1]}])}, "in.jsonl:1",
                            "'metadata' must be a JSON object"),
    "title-not-string": ({"in.jsonl": _jsonl([{"id": "x", "text": "t", "title": 5}])}, "in.jsonl:1",
                         "'title' must be a string"),
    "bad-chunk-index": ({"in.jsonl": _jsonl([{"id": "x", "text": "t", "chunk_index": -1}])}, "in.jsonl:1",
                        "'chunk_index' must be a non-negative integer"),
    "id-not-scalar": ({"in.jsonl": _jsonl([{"id": {"a": 1}, "text": "t"}])}, "in.jsonl:1",
                      "'chunk_id' must be a string or integer"),
    "id-control-chars": ({"in.jsonl": _jsonl([{"id": "a\nb", "text": "t"}])}, "in.jsonl:1", "control characters"),
    "id-too-long": ({"in.jsonl": _jsonl([{"id": "x" * 600, "text": "t"}])}, "in.jsonl:1", "longer than"),
    "unsupported-type": ({"in.docx": b"PK\x03\x04"}, "in.docx", "unsupported file type .docx"),
    # a gzipped file of a type that is no document: named as such, not as an unsupported ".gz"
    "unsupported-gzipped": ({"changelog.Debian.gz": b"\x1f\x8b\x08\x00"}, "changelog.Debian.gz",
                            "unsupported file type .Debian (gzipped)"),
    "damaged-pdf": ({"in.pdf": b"%PDF-1.4"}, "in.pdf", "cannot read the PDF"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_clear_line_exit_1_and_store_unchanged(cli, store: Path, tmp_path: Path,
                                                                 case: str) -> None:
    files, where, problem = BAD[case]
    paths = _write(tmp_path / "in", files)
    before = _snapshot(cli, store)
    result = cli("ingest", *paths, "--store", store, "--json")
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.stderr
    match = ERROR_LINE.match(lines[0])
    assert match, f"not `file:line: problem — what to do`: {lines[0]!r}"
    assert match["where"].endswith(where) or match["where"] == where, lines[0]
    assert problem in lines[0]
    assert len(lines[0]) < 300  # one readable line, even for a 10 MB line
    assert json.loads(result.stdout)["error"]["code"] == "input"
    assert _snapshot(cli, store) == before


def test_path_that_does_not_exist(cli, store: Path, tmp_path: Path) -> None:
    before = _snapshot(cli, store)
    result = cli("ingest", tmp_path / "nope.jsonl", "--store", store)
    assert result.exit_code == 1
    assert re.search(r"^Error: \S*nope\.jsonl: no such file or directory — check the path$", result.stderr, re.M)
    assert _snapshot(cli, store) == before


def test_unreadable_file(cli, store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [path] = _write(tmp_path / "in", {"locked.jsonl": _jsonl([GOOD[0]])})
    os.chmod(path, 0)
    if os.geteuid() == 0:  # root reads anything: make the read fail the way it does for a user
        original = Path.read_bytes

        def read_bytes(self: Path) -> bytes:
            if self.name == "locked.jsonl":
                raise PermissionError(13, "Permission denied", str(self))
            return original(self)

        monkeypatch.setattr(Path, "read_bytes", read_bytes)
    before = _snapshot(cli, store)
    result = cli("ingest", path, "--store", store)
    assert result.exit_code == 1
    assert re.search(r"^Error: \S*locked\.jsonl: cannot read \(Permission denied\) — check permissions",
                     result.stderr, re.M), result.stderr
    assert _snapshot(cli, store) == before


def test_unreadable_directory_is_reported(cli, store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "in"
    _write(root, {"ok.md": "# ok\n\nfine text\n", "secret/a.md": "# a\n\nhidden\n"})
    real_walk = os.walk

    def walk(top, *args, **kwargs):  # what os.walk does with an unreadable subdirectory
        onerror = kwargs.get("onerror")
        for directory, dirnames, filenames in real_walk(top, *args, **kwargs):
            if directory.endswith("secret"):
                onerror(PermissionError(13, "Permission denied", directory))
                continue
            yield directory, dirnames, filenames

    monkeypatch.setattr(os, "walk", walk)
    before = _snapshot(cli, store)
    result = cli("ingest", root, "--store", store)
    assert result.exit_code == 1
    assert re.search(r"^Error: \S*secret: cannot read directory \(Permission denied\) — fix its permissions",
                     result.stderr, re.M), result.stderr
    assert _snapshot(cli, store) == before


def test_symlink_loop_is_walked_once(cli, store: Path, tmp_path: Path) -> None:
    root = tmp_path / "loop"
    _write(root, {"a.md": "# A\n\nalpha text\n", "sub/b.md": "# B\n\nbeta text\n"})
    (root / "sub" / "back").symlink_to(root, target_is_directory=True)
    (root / "sub" / "self").symlink_to(root / "sub", target_is_directory=True)
    result = cli("ingest", root, "--store", store, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["added"] == 2 and report["total"] == len(GOOD) + 2


def test_directory_with_only_a_loop(cli, store: Path, tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    (root / "me").symlink_to(root, target_is_directory=True)
    before = _snapshot(cli, store)
    result = cli("ingest", root, "--store", store)
    assert result.exit_code == 1
    assert f"no {DOC_KINDS} or .jsonl files found — " in result.stderr and ".adoc" in DOC_KINDS
    assert _snapshot(cli, store) == before


def test_dangling_symlink(cli, store: Path, tmp_path: Path) -> None:
    link = tmp_path / "gone.jsonl"
    link.symlink_to(tmp_path / "missing-target.jsonl")
    result = cli("ingest", link, "--store", store)
    assert result.exit_code == 1
    assert re.search(r"^Error: \S*gone\.jsonl: .+ — .+$", result.stderr, re.M), result.stderr


def test_a_pipe_in_a_folder_is_named_not_waited_on_and_a_broken_link_is_skipped(cli, store: Path,
                                                                                tmp_path: Path) -> None:
    """A pipe would block the read forever: one line naming it, the store unchanged, and with
    --skip-invalid the real document still lands. A link to nothing and an empty placeholder file
    are no documents, nothing wrong with the folder: they are skipped and named in the report."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "guide.md").write_text("# Guide\n\nRefunds are paid within five days.\n")
    os.mkfifo(folder / "inbox.md")
    (folder / "old.md").symlink_to(tmp_path / "moved-away.md")
    (folder / "todo.md").write_text("  \n\n")
    before = _snapshot(cli, store)
    result = cli("ingest", folder, "--store", store, "--json")
    assert result.exit_code == 1
    problems = json.loads(result.stdout)["error"]["problems"]
    assert [p.split(":")[0].rsplit("/", 2)[-2:] for p in problems] == [["docs", "inbox.md"]]
    assert "not a regular file" in problems[0]
    assert _snapshot(cli, store) == before
    skipped = json.loads(cli("ingest", folder, "--store", store, "--skip-invalid", "--json").stdout)
    assert (skipped["added"], skipped["skipped"]) == (1, 1)
    assert [link.split(" → ")[0].rsplit("/", 1)[-1] for link in skipped["broken_links"]] == ["old.md"]
    assert [page.rsplit("/", 1)[-1] for page in skipped["no_text"]] == ["todo.md"]
    os.remove(folder / "inbox.md")
    human = cli("ingest", folder, "--store", store)
    assert human.exit_code == 0, human.output
    assert re.search(r"^1 broken link\(s\) skipped \(they point at nothing\): \S*docs/old\.md → \S*moved-away\.md$",
                     human.stdout, re.M), human.stdout
    assert re.search(r"^1 document\(s\) empty or with only markup or headings, nothing to index: \S*docs/todo\.md$",
                     human.stdout, re.M), human.stdout


def test_bad_stdin(cli, store: Path) -> None:
    before = _snapshot(cli, store)
    result = cli("ingest", "-", "--store", store, input='{"text": "ok"}\nnot json\n')
    assert result.exit_code == 1
    assert "Error: <stdin>:2: invalid JSON" in result.stderr
    assert _snapshot(cli, store) == before


def test_many_problems_first_shown_rest_counted(cli, store: Path, tmp_path: Path) -> None:
    paths = _write(tmp_path / "in", {"in.jsonl": _jsonl(["nope", "nope", {"text": ""}, GOOD[0]])})
    result = cli("ingest", *paths, "--store", store)
    assert result.exit_code == 1
    [line] = [x for x in result.stderr.splitlines() if x.startswith("Error:")]
    assert line.endswith("(+2 more)")
    assert "--skip-invalid" in result.stderr


# valid but unusual input --------------------------------------------------------------------------
def test_bom_and_crlf_are_accepted_and_cleaned(cli, store: Path, tmp_path: Path) -> None:
    body = "\ufeff" + _jsonl([{"id": "bom-1", "text": "first line"}]).replace("\n", "\r\n")
    body += '{"id": "crlf-2", "text": "two\\r\\nlines"}\r\n'
    paths = _write(tmp_path / "in", {"bom.jsonl": body.encode("utf-8"),
                                      "doc.md": "\ufeff# Heading\r\n\r\nBody with CRLF.\r\n".encode()})
    result = cli("ingest", *paths, "--store", store, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["added"] == 3
    doc = f"{tmp_path.name}/in/doc.md#0"  # in/ lies under the root of the seed file's source
    read = json.loads(cli("read", "bom-1", "crlf-2", doc, "--store", store, "--json").stdout)
    texts = {c["chunk_id"]: c["text"] for c in read["chunks"]}
    assert texts["bom-1"] == "first line" and texts["crlf-2"] == "two\nlines"
    assert "\r" not in texts[doc] and "\ufeff" not in texts[doc]
    assert "Body with CRLF." in texts[doc]


WEIRD_IDS = ["has space", "it's", 'dq"x', "a/b/../c", "ünï©ødé 日本", "') OR 1=1 --", "x' OR chunk_id LIKE '%",
             "back\\slash", "%_*?", "-starts-with-dash", "12345"]


def test_unusual_ids_round_trip(cli, store: Path, tmp_path: Path) -> None:
    rows = [{"id": cid, "text": f"row {n} text"} for n, cid in enumerate(WEIRD_IDS)]
    rows.append({"id": 777, "text": "integer id"})
    paths = _write(tmp_path / "in", {"ids.jsonl": _jsonl(rows)})
    result = cli("ingest", *paths, "--store", store, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["added"] == len(rows)
    read = cli("read", "--store", store, "--json", "--", *WEIRD_IDS, "777")
    assert read.exit_code == 0, read.output
    got = {c["chunk_id"]: c["text"] for c in json.loads(read.stdout)["chunks"]}
    assert got == {**{cid: f"row {n} text" for n, cid in enumerate(WEIRD_IDS)}, "777": "integer id"}


def test_moderately_nested_metadata_is_kept(cli, store: Path, tmp_path: Path) -> None:
    paths = _write(tmp_path / "in", {"deep.jsonl": _deep(200) + "\n"})
    result = cli("ingest", *paths, "--store", store, "--json")
    assert result.exit_code == 0, result.output
    assert cli("read", "deep", "--store", store, "--json").exit_code == 0


def test_10mb_line_in_a_document_is_chunked_without_loss(cli, store: Path, tmp_path: Path) -> None:
    words = [f"w{i}" for i in range(200_000)]
    paths = _write(tmp_path / "in", {"one-line.txt": " ".join(words)})
    result = cli("ingest", *paths, "--store", store, "--json")
    assert result.exit_code == 0, result.output
    from knowtology_cli.kb import KnowledgeBase

    kb = KnowledgeBase.open(store)
    rows = [c for chunks, _ in kb.vectors.iter_rows("default", with_vectors=False) for c in chunks
            if c.file_name.endswith("one-line.txt")]
    rows.sort(key=lambda c: c.chunk_index)
    assert " ".join(c.text for c in rows).split() == words


def test_duplicate_id_across_runs_last_write_wins(cli, store: Path, tmp_path: Path) -> None:
    paths = _write(tmp_path / "in", {"other.jsonl": _jsonl([{"id": "good-0", "text": "replaced text"}])})
    result = json.loads(cli("ingest", *paths, "--store", store, "--json").stdout)
    assert result["updated"] == 1 and result["total"] == len(GOOD)
    read = json.loads(cli("read", "good-0", "--store", store, "--json").stdout)
    assert read["chunks"][0]["text"] == "replaced text"


# --skip-invalid ------------------------------------------------------------------------------------
def test_skip_invalid_lands_good_rows_and_lists_bad_ones(cli, store: Path, tmp_path: Path) -> None:
    rows = [{"id": "s1", "text": "fine one"}, "{broken", {"id": "s2", "text": ""}, {"id": "s3", "text": "fine three"},
            {"id": "s1", "text": "dup"}, {"id": "s4", "text": 7}]
    files = {"mixed.jsonl": _jsonl(rows), "empty.jsonl": "", "bin.md": b"\x00\x01", "ok.md": "# Ok\n\nA fine doc.\n"}
    paths = _write(tmp_path / "in", files)
    result = cli("ingest", *paths, str(tmp_path / "missing.jsonl"), "--store", store, "--skip-invalid", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["added"] == 3  # s1, s3, ok.md#0
    assert report["total"] == len(GOOD) + 3
    assert report["skipped"] == 7 == len(report["problems"])
    where = sorted(p.split(": ", 1)[0].rsplit("/", 1)[-1] for p in report["problems"])
    assert where == sorted(["mixed.jsonl:2", "mixed.jsonl:3", "mixed.jsonl:5", "mixed.jsonl:6", "empty.jsonl",
                            "bin.md", "missing.jsonl"])
    assert all(" — " in p for p in report["problems"])
    human = cli("ingest", *paths, str(tmp_path / "missing.jsonl"), "--store", store, "--skip-invalid")
    assert human.exit_code == 0
    assert "skipped 7 invalid input(s):" in human.stdout
    assert "mixed.jsonl:2: invalid JSON" in human.stdout


def test_skip_invalid_with_nothing_valid_changes_nothing(cli, store: Path, tmp_path: Path) -> None:
    paths = _write(tmp_path / "in", {"bad.jsonl": "nope\n"})
    before = _snapshot(cli, store)
    result = cli("ingest", *paths, "--store", store, "--skip-invalid", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["added"] == 0 and report["skipped"] == 1
    assert _snapshot(cli, store) == before


def test_unicode_line_separators_inside_json_strings_are_text(cli, store: Path, tmp_path: Path) -> None:
    rows = [{"id": "ls", "text": "one\u2028two\u2029three\x85four\x0bfive\x1cend"}, {"id": "after", "text": "next"}]
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    paths = _write(tmp_path / "in", {"seps.jsonl": body.encode("utf-8")})
    result = cli("ingest", *paths, "--store", store, "--json")
    assert result.exit_code == 0, result.output
    read = json.loads(cli("read", "ls", "after", "--store", store, "--json").stdout)
    assert [c["text"] for c in read["chunks"]] == [rows[0]["text"], "next"]


@pytest.mark.parametrize(("args", "says"), [
    (["search", "refunds", "-k", "0"], "-k"),
    (["search"], "Missing argument 'QUERY'"),
    (["search", "refunds", "--preset", "bogus"], "bogus"),
    # text that starts with '-' reads as an option: the message says how to search for it
    (["search", "--billing-mode"], "put -- before it: kt search -- --billing-mode"),
    (["build", "--builder", "foo"], "unknown builder 'foo'; use one of auto, hybrid, llm, cluster"),
])
def test_a_usage_error_with_json_is_one_json_document_and_exit_2(store: Path, args: list[str], says: str) -> None:
    """Through the real executable (click parses before any command runs): a CI script that asked for
    --json gets exactly one JSON document on stdout even for a bad flag, with the usual text on stderr."""
    import subprocess

    from _agent_fixtures import KT, env

    done = subprocess.run([KT, *args, "--store", str(store), "--json"], capture_output=True, text=True, env=env(),
                          timeout=60)
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "usage" and says in error["message"] and error["hint"] == f"kt {args[0]} --help"
    assert f"Usage: kt {args[0]}" in done.stderr
