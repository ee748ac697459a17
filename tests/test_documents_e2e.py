"""End to end through the `kt` executable: documents in every format, provenance out, no re-embedding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _doc_fixtures import write_paper_pdf, write_two_page_pdf

from knowtology_cli import parsers
from knowtology_cli.kb import KnowledgeBase

KT = str(Path(sys.executable).parent / "kt")

RST = """\
=============
Picking Guide
=============

Pick chilled items last, with :func:`pick_order` --- see :ref:`cold chain <cold>`.

.. toctree::

   cold

Frozen totes
------------

Frozen totes are sealed before they leave the freezer room.
"""
MARKDOWN = """\
---
title: Refunds
---

# Refunds

Refunds for spoiled dairy are paid within 48 hours.

## Partial refunds

A partial refund covers only the missing items.
"""
HTML = """\
<html><head><title>Macros</title><script>var x = 1;</script></head>
<body><nav><a href="/">Home</a></nav>
<main>
<h1>Support macros</h1>
<p>Use LATE-2 when an order is more than an hour late.</p>
</main></body></html>
"""


def kt(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KNOWTOLOGY_STORE": str(store), "LANCE_LOG": "error"}
    return subprocess.run([KT, *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "wiki").mkdir(parents=True)
    (root / "wiki" / "picking.rst.txt").write_text(RST)
    (root / "refunds.md").write_text(MARKDOWN)
    (root / "wiki" / "macros.htm").write_text(HTML)
    write_two_page_pdf(root / "cold-chain.pdf")
    return root


def test_kt_ingest_and_read_json_carry_sections_and_ranges(corpus: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = kt("ingest", str(corpus), "--embedder", "hash", "--json", store=store)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["added"] == report["total"] == report["embedded"] == 4
    assert report["junk_dropped"] >= 2  # the toctree, the front matter
    ids = ["docs/wiki/picking.rst.txt#0", "docs/refunds.md#0", "docs/wiki/macros.htm#0", "docs/cold-chain.pdf#0"]
    result = kt("read", *ids, "--json", store=store)
    assert result.returncode == 0, result.stderr
    chunks = {c["chunk_id"]: c for c in json.loads(result.stdout)["chunks"]}
    rst = chunks["docs/wiki/picking.rst.txt#0"]
    assert (rst["section"], rst["lines"], rst["pages"]) == ("Picking Guide", [1, 14], None)
    assert "pick_order" in rst["text"] and ":func:" not in rst["text"] and "toctree" not in rst["text"]
    assert rst["title"] == "Picking Guide"
    md = chunks["docs/refunds.md#0"]
    assert (md["section"], md["lines"]) == ("Refunds", [5, 11]) and "title:" not in md["text"]
    html = chunks["docs/wiki/macros.htm#0"]
    assert (html["section"], html["lines"]) == ("Support macros", [4, 5])
    assert "var x" not in html["text"] and "Home" not in html["text"]
    pdf = chunks["docs/cold-chain.pdf#0"]
    assert (pdf["section"], pdf["lines"], pdf["pages"]) == ("Cold Chain Manual", None, [1, 2])
    # The human header cites the source range.
    result = kt("read", "docs/refunds.md#0", "docs/cold-chain.pdf#0", "--force", store=store)
    assert result.returncode == 0, result.stderr
    assert "· docs/refunds.md:5-11 — Refunds" in result.stdout
    assert "· docs/cold-chain.pdf:p1-2 — Cold Chain Manual" in result.stdout
    # A search hit carries the range too, and the built tree keeps it for browse.
    assert kt("build", "--builder", "cluster", store=store).returncode == 0
    hits = json.loads(kt("grep", "partial refund", "--json", store=store).stdout)["hits"]
    assert hits[0]["chunk_id"] == "docs/refunds.md#0" and hits[0]["lines"] == [5, 11]
    # Unchanged files embed nothing on a re-ingest.
    again = json.loads(kt("ingest", str(corpus), "--json", store=store).stdout)
    assert (again["unchanged"], again["embedded"], again["updated"]) == (4, 0, 0)


def test_kt_reads_a_papers_bold_headings_and_no_author_heading(tmp_path: Path) -> None:
    # A paper without bookmarks: its bold body-size headings are the chunk's headings, its authors'
    # line is text under the title, not a section of its own.
    root = tmp_path / "papers"
    root.mkdir()
    write_paper_pdf(root / "vans.pdf")
    store = tmp_path / "store"
    assert kt("ingest", str(root), "--embedder", "hash", store=store).returncode == 0
    result = kt("read", "papers/vans.pdf#0", "--json", store=store)
    assert result.returncode == 0, result.stderr
    chunk = json.loads(result.stdout)["chunks"][0]
    headings = [line for line in chunk["text"].split("\n") if line.startswith("#")]
    assert headings == ["# Cold Chain Deliveries in Small Vans", "## Abstract", "## 1 Loading the van",
                        "### 1.1 Frozen totes", "## 2 Returns"], headings
    assert "Alice Example and Bob Sample" in chunk["text"]


def test_kt_reads_a_readmes_embedded_html_as_text(tmp_path: Path) -> None:
    # An SDK's generated API page wraps each method in <code> and <a> tags: the chunk holds the
    # method as a code span, and grep finds it by name.
    root = tmp_path / "sdk"
    root.mkdir()
    (root / "README.md").write_text(
        '<p align="center"><img src="logo.png" alt="Acme logo"></p>\n\n# Acme SDK\n\n<!-- generated -->\n\n'
        "## Webhooks\n\nMethods:\n\n"
        '- <code title="post /webhooks">client.webhooks.<a href="./src/webhooks.py">create</a>'
        '(\\*\\*<a href="src/params.py">params</a>) -> <a href="./src/webhook.py">Webhook</a></code>\n'
        "\n<details>\n<summary>Retries</summary>\n\nFailed deliveries retry <b>three</b> times.\n\n</details>\n")
    store = tmp_path / "store"
    assert kt("ingest", str(root), "--embedder", "hash", store=store).returncode == 0
    result = kt("read", "sdk/README.md#0", "--json", store=store)
    assert result.returncode == 0, result.stderr
    text = json.loads(result.stdout)["chunks"][0]["text"]
    assert "<a " not in text and "<code" not in text and "<" not in text, text
    assert "- `client.webhooks.create(**params) -> Webhook`" in text and "Failed deliveries retry three times." in text
    hits = json.loads(kt("grep", "client.webhooks.create", "--json", store=store).stdout)["hits"]
    assert [hit["chunk_id"] for hit in hits] == ["sdk/README.md#0"]


def test_shifted_lines_update_provenance_without_embedding_or_remapping(corpus: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    kb = KnowledgeBase.open(tmp_path / "store")
    kb.ingest([str(corpus)], embedder="hash")
    kb.build(builder="cluster")
    path = corpus / "refunds.md"
    path.write_text(MARKDOWN.replace("---\n\n# Refunds", "---\n\n\n\n# Refunds"))  # two lines pushed down
    report = kb.ingest([str(corpus)])
    assert (report.updated, report.embedded) == (1, 0)
    (chunk,) = kb.read(["docs/refunds.md#0"]).chunks
    assert chunk.lines == (7, 13)
    from knowtology_cli.builders.runner import pending_work

    assert pending_work(kb, "default")[0] == []  # the mapping followed: nothing to remap
    leaf = next(m for m in kb.tree.mappings("default") if m.chunk_id == "docs/refunds.md#0")
    assert leaf.lines == (7, 13)
    lead = next(c for c in kb.browse(leaf.path).chunks if c.chunk_id == "docs/refunds.md#0")
    assert (lead.section, lead.lines) == ("Refunds", (7, 13))
    # A new parser version re-chunks the files it reads (same text: new metadata, no embedding).
    monkeypatch.setitem(parsers.PARSER_VERSIONS, "markdown", 99)
    report = kb.ingest([str(corpus)])
    assert (report.updated, report.embedded) == (1, 0)
    stored = {c.chunk_id: c for c in kb.vectors.get("default", ["docs/refunds.md#0", "docs/cold-chain.pdf#0"])}
    assert stored["docs/refunds.md#0"].metadata["parser"] == "markdown/99"
    assert stored["docs/cold-chain.pdf#0"].metadata["parser"] == parsers.parser_version("pdf")
    kb.close()


def test_pages_of_only_markup_are_noted_not_refused(corpus: Path, tmp_path: Path) -> None:
    """A Sphinx tree's toctree-only index page and include stubs hold no text of their own: the folder
    still ingests, the report names them, and --prune drops the chunks of a page that became one."""
    store = tmp_path / "store"
    (corpus / "index.rst").write_text("Handbook\n========\n\n.. toctree::\n   :maxdepth: 2\n\n   refunds\n   wiki/picking\n")
    (corpus / "changes.rst").write_text(".. include:: ../CHANGES.rst\n")
    done = kt("ingest", str(corpus), "--embedder", "hash", "--json", store=store)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["no_text"] == ["docs/changes.rst", "docs/index.rst"]
    assert report["skipped"] == 0 and report["added"] > 0
    human = kt("ingest", str(corpus), store=store)
    assert "2 document(s) empty or with only markup or headings, nothing to index: docs/changes.rst, docs/index.rst" in human.stdout

    # a page whose text is replaced by headings alone: it was read whole, so its old chunks go (as a
    # shrunk page's surplus does), with or without --prune
    (corpus / "refunds.md").write_text("---\ntitle: Refunds\n---\n\n# Refunds\n")
    pruned = json.loads(kt("ingest", str(corpus), "--json", store=store).stdout)
    assert "docs/refunds.md" in pruned["no_text"] and pruned["deleted"] >= 1
    ids = json.loads(kt("grep", "Refunds", "--json", store=store).stdout)
    assert not any(h["chunk_id"].startswith("docs/refunds.md") for h in ids["hits"])

    # nothing but markup anywhere: nothing to index is an error, and the store is unchanged
    only = tmp_path / "only"
    only.mkdir()
    (only / "index.rst").write_text("Title\n=====\n\n.. toctree::\n\n   a\n")
    refused = kt("ingest", str(only), "--json", store=tmp_path / "other")
    assert refused.returncode == 1
    assert "only/index.rst: no text to index, only markup or headings" in refused.stderr


def test_included_fragments_are_read_in_their_pages_and_not_alone(tmp_path: Path) -> None:
    """A Sphinx fragment shared by two pages (``.. include:: NOTE.txt``) is text of both pages, with
    each page's substitutions, and no document of its own: the report lists it, an edit to it
    updates both pages on the next run, and chunks stored for it before a page included it go.
    An include outside the folder is not read and is named in the report."""
    store = tmp_path / "store"
    root = tmp_path / "help"
    root.mkdir()
    (tmp_path / "private.txt").write_text("PRIVATE PAYROLL FIGURES\n")
    (root / "NOTE.txt").write_text(".. note::\n   The |CMD| command scans every zircon shelf.\n")
    first = json.loads(kt("ingest", str(root), "--embedder", "hash", "--json", store=store).stdout)
    assert first["added"] == 1 and first["included"] == {}
    for name in ("stock_scan", "stock_count"):
        (root / f"{name}.rst").write_text(f"{name}\n{'=' * len(name)}\n\n.. |CMD| replace:: {name}\n\n"
                                          f"Counts pallets.\n\n.. include:: NOTE.txt\n")
    (root / "leak.rst").write_text("Leak\n====\n\nSome text.\n\n.. include:: ../private.txt\n")
    done = kt("ingest", str(root), "--json", store=store)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["included"] == {"help/NOTE.txt": "help/stock_count.rst"}
    assert report["unread_includes"] == {"help/leak.rst": ["../private.txt (outside the ingested folder)"]}
    assert report["deleted"] == 1  # the fragment's own chunk, stored before any page included it
    hits = json.loads(kt("grep", "zircon", "--json", store=store).stdout)["hits"]
    assert sorted(h["chunk_id"].split("#")[0] for h in hits) == ["help/stock_count.rst", "help/stock_scan.rst"]
    read = json.loads(kt("read", "help/stock_scan.rst#0", "--json", store=store).stdout)["chunks"][0]
    assert "The stock_scan command scans every zircon shelf." in read["text"] and "|CMD|" not in read["text"]
    assert not json.loads(kt("grep", "PAYROLL", "--json", store=store).stdout)["hits"]
    human = kt("ingest", str(root), store=store).stdout
    assert "1 included file(s) read as part of the pages that include them, not indexed alone: " \
           "help/NOTE.txt (in help/stock_count.rst)" in human
    assert "note: help/leak.rst: include not read, its text is not indexed: ../private.txt (outside the ingested " \
           "folder)" in human

    (root / "NOTE.txt").write_text(".. note::\n   The |CMD| command scans every basalt shelf.\n")
    again = json.loads(kt("ingest", str(root), "--json", store=store).stdout)
    assert again["updated"] == 2 and again["added"] == 0
    assert not json.loads(kt("grep", "zircon", "--json", store=store).stdout)["hits"]
    assert len(json.loads(kt("grep", "basalt", "--json", store=store).stdout)["hits"]) == 2


def test_autodoc_directives_not_read_are_reported_once_per_run(tmp_path: Path) -> None:
    """Text an autodoc directive inserts comes from docstrings, which Knowtology does not import: the
    report counts them per document (``--json``) and says so in one line; the signature is indexed."""
    store = tmp_path / "store"
    root = tmp_path / "docs"
    root.mkdir()
    (root / "api.rst").write_text("API\n===\n\nThe logging API.\n\n.. automodule:: acme.log\n   :members:\n\n"
                                  ".. autoclass:: Adapter(base)\n\n.. autofunction:: get_logger(name)\n")
    (root / "guide.rst").write_text("Guide\n=====\n\nRead the logs.\n\n.. autofunction:: acme.log.flush\n")
    (root / "intro.rst").write_text("Intro\n=====\n\nNo code here.\n")
    done = kt("ingest", str(root), "--embedder", "hash", "--json", store=store)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["unread_docstrings"] == {"docs/api.rst": 3, "docs/guide.rst": 1}
    read = json.loads(kt("read", "docs/api.rst#0", "--json", store=store).stdout)["chunks"][0]
    assert "get_logger(name)" in read["text"]
    human = kt("ingest", str(root), store=store).stdout
    notes = [line for line in human.splitlines() if "autodoc" in line]
    assert notes == ["note: 4 autodoc directive(s) not read: their text comes from docstrings of the code, which "
                     "Knowtology does not import (the page's own signatures and prose are kept): docs/api.rst (3), "
                     "docs/guide.rst (1)"]


def test_mkdocs_snippets_are_read_in_their_pages_and_not_alone(tmp_path: Path) -> None:
    """MkDocs' ``--8<-- "file.md"`` (pymdownx.snippets) reads the file into the page, resolved as
    MkDocs does from the project folder above ``docs/``, a named section or line range only when the
    path asks for one; the fragment is no document of its own, an edit to it updates the page, and a
    snippet outside the ingested folder is not read and is named."""
    store = tmp_path / "store"
    root = tmp_path / "site" / "docs"
    (root / "includes").mkdir(parents=True)
    (tmp_path / "site" / "SECRET.md").write_text("PRIVATE PAYROLL FIGURES\n")
    (root / "includes" / "shelves.md").write_text(
        "Every zircon shelf is counted weekly.\n\n--8<-- [start:fees]\nA recount costs a basalt fee.\n"
        "--8<-- [end:fees]\n\n*[SKU]: Stock keeping unit\n")
    (root / "counting.md").write_text(
        '# Counting\n\nHow stock is counted.\n\n--8<-- "docs/includes/shelves.md"\n\n'
        '## Fees\n\n!!! note\n    --8<-- "includes/shelves.md:fees"\n\n--8<-- "SECRET.md"\n')
    done = kt("ingest", str(root), "--embedder", "hash", "--json", store=store)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["included"] == {"docs/includes/shelves.md": "docs/counting.md"}
    assert report["unread_includes"] == {"docs/counting.md": ["SECRET.md (outside the ingested folder)"]}
    text = json.loads(kt("read", "docs/counting.md#0", "--json", store=store).stdout)["chunks"][0]["text"]
    assert "Every zircon shelf is counted weekly." in text and "Note:\nA recount costs a basalt fee." in text
    assert "8<" not in text and "*[SKU]" not in text and "PAYROLL" not in text
    hits = json.loads(kt("grep", "zircon", "--json", store=store).stdout)["hits"]
    assert [h["chunk_id"].split("#")[0] for h in hits] == ["docs/counting.md"]

    (root / "includes" / "shelves.md").write_text("Every garnet shelf is counted weekly.\n")
    again = json.loads(kt("ingest", str(root), "--json", store=store).stdout)
    assert again["updated"] == 1 and again["added"] == 0
    assert not json.loads(kt("grep", "zircon", "--json", store=store).stdout)["hits"]
    assert json.loads(kt("grep", "garnet", "--json", store=store).stdout)["hits"]


def test_myst_pages_read_as_sphinx_shows_them(tmp_path: Path) -> None:
    """A Sphinx project written in MyST Markdown: roles read as their text, admonitions as "Note:",
    code directives as fenced code, ``{include}`` of a file in the folder is read (and that file is
    no document of its own), an include outside the folder is named, a target is no chunk."""
    store = tmp_path / "store"
    root = tmp_path / "proj" / "docs"
    root.mkdir(parents=True)
    (tmp_path / "proj" / "CHANGELOG.md").write_text("# Changes\n\nPRIVATE ROADMAP\n")
    (root / "_fees.md").write_text("A recount costs a {term}`basalt fee <fees>`.\n")
    (root / "counting.md").write_text(
        "(counting)=\n# Counting\n\nCall {func}`~pantry.stock.recount` after a move.\n\n"
        ":::{note}\nShelves are counted weekly.\n:::\n\n```{code-block} python\n:linenos:\n\nrecount(shelf)\n```\n\n"
        "```{include} _fees.md\n```\n\n```{include} ../CHANGELOG.md\n```\n\n```{include} ../CHANGELOG.md\n```\n")
    done = kt("ingest", str(root), "--embedder", "hash", "--json", store=store)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["included"] == {"docs/_fees.md": "docs/counting.md"}
    assert report["unread_includes"] == {"docs/counting.md": ["../CHANGELOG.md (outside the ingested folder)"]}
    chunk = json.loads(kt("read", "docs/counting.md#0", "--json", store=store).stdout)["chunks"][0]
    assert chunk["section"] == "Counting"
    assert "Call `recount` after a move." in chunk["text"] and "Note:\nShelves are counted weekly." in chunk["text"]
    assert "```python\nrecount(shelf)\n```" in chunk["text"] and "A recount costs a basalt fee." in chunk["text"]
    assert not any(m in chunk["text"] for m in ("{func}", ":::", "{note}", "(counting)=", ":linenos:", "PRIVATE"))
    hits = json.loads(kt("grep", "basalt", "--json", store=store).stdout)["hits"]
    assert [h["chunk_id"] for h in hits] == ["docs/counting.md#0"]


def test_a_link_to_a_file_of_the_folder_is_read_once(tmp_path: Path) -> None:
    """Doc sets link ``index.html`` to their first page: the page is read once, under its own name, and
    the report says so; a link to a file outside the folder is a document of the folder."""
    store = tmp_path / "store"
    root = tmp_path / "manual"
    root.mkdir()
    (root / "reference.md").write_text("# Reference\n\nThe zircon shelf holds reference stock.\n")
    (root / "index.md").symlink_to("reference.md")
    (tmp_path / "shared.md").write_text("# Shared\n\nThe basalt shelf is shared.\n")
    (root / "shared.md").symlink_to(tmp_path / "shared.md")
    report = json.loads(kt("ingest", str(root), "--embedder", "hash", "--json", store=store).stdout)
    assert report["linked"] == {"manual/index.md": "manual/reference.md"}
    hits = json.loads(kt("grep", "zircon", "--json", store=store).stdout)["hits"]
    assert [h["chunk_id"] for h in hits] == ["manual/reference.md#0"]
    assert [h["chunk_id"] for h in json.loads(kt("grep", "basalt", "--json", store=store).stdout)["hits"]] == [
        "manual/shared.md#0"]
    assert "1 link(s) to a file already read, not read twice: manual/index.md → manual/reference.md" in kt(
        "ingest", str(root), store=store).stdout


def test_grep_puts_chunks_holding_an_identifier_whole_first(tmp_path: Path) -> None:
    """The keyword index splits ``PAY_PER_REQUEST`` into pay, per and request, so a page about request
    payment outranked the one page that writes the setting. Chunks holding every identifier of the
    query as written come first; the others still follow."""
    store = tmp_path / "store"
    root = tmp_path / "cli"
    root.mkdir()
    (root / "payment.md").write_text("# Request payment\n\nPay per request: the requester pays per request. "
                                     "Request payment, pay per request, per request pay.\n")
    (root / "create-table.md").write_text("# Create a table\n\nThe command creates a table in on-demand mode "
                                          "with the option --billing-mode PAY_PER_REQUEST and two key attributes, "
                                          "a partition key and a sort key, each of string type.\n")
    kt("ingest", str(root), "--embedder", "hash", store=store)
    ids = [h["chunk_id"] for h in json.loads(kt("grep", "PAY_PER_REQUEST", "--json", store=store).stdout)["hits"]]
    assert ids == ["cli/create-table.md#0", "cli/payment.md#0"]
    flag = [h["chunk_id"] for h in json.loads(kt("grep", "--json", "--", "--billing-mode", store=store).stdout)["hits"]]
    assert flag[0] == "cli/create-table.md#0"
    plain = [h["chunk_id"] for h in json.loads(kt("grep", "pay per request", "--json", store=store).stdout)["hits"]]
    assert plain[0] == "cli/payment.md#0"  # words, not an identifier: BM25 alone
    assert "No results for '\\);import '." in kt("grep", "--regex", "\\);import ", store=store).stdout  # as typed


def test_grep_reads_a_decorator_whole_and_shows_the_line_that_writes_it(tmp_path: Path) -> None:
    """``@define`` is a name with its sigil: the chunk that writes it comes before one that only shares
    the stem ("Defining", "defined"), and the snippet is the line holding it, marked whole."""
    store = tmp_path / "store"
    root = tmp_path / "docs"
    root.mkdir()
    (root / "slots.md").write_text("# Slots\n\nDefining slots: defined classes define slots, defining "
                                   "them early. Defined once, defined well.\n")
    (root / "api.md").write_text("# API\n\nClasses are plain.\n\nDefining them by hand is tedious. "
                                 "Put @define on the class and the methods are written for you.\n")
    kt("ingest", str(root), "--embedder", "hash", store=store)
    hits = json.loads(kt("grep", "--json", "--", "@define", store=store).stdout)["hits"]
    assert [h["chunk_id"] for h in hits] == ["docs/api.md#0", "docs/slots.md#0"]
    first = hits[0]
    assert "Put @define on the class" in first["snippet"]
    marked = [first["snippet"][s:e] for s, e in first["marks"]]
    assert "@define" in marked and "define" not in marked  # the identifier is marked whole, once


def test_a_page_that_shrinks_is_its_new_chunks_only(tmp_path: Path) -> None:
    """A re-read page replaces its chunks: when an edit leaves it fewer, the old surplus goes without
    --prune (search, grep and read never show text the file no longer has); a page that cannot be
    read keeps its last good chunks."""
    root = tmp_path / "docs"
    root.mkdir()
    zones = ["amber", "birch", "cedar", "delta", "ember", "fjord"]
    sections = [f"## Zone {zone}\n\n" + " ".join(f"Crate {i} holds items for the {zone} aisle." for i in range(60))
                for zone in zones]
    (root / "picking.md").write_text("# Picking\n\n" + "\n\n".join(sections) + "\n")
    (root / "returns.md").write_text("# Returns\n\nReturns are checked within two days of arrival.\n")
    store = tmp_path / "store"
    first = json.loads(kt("ingest", str(root), "--embedder", "hash", "--json", store=store).stdout)
    assert first["total"] >= 5
    (root / "picking.md").write_text("# Picking\n\n" + sections[0] + "\n")
    second = kt("ingest", str(root), "--json", store=store)
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert report["deleted"] > 0 and report["total"] == first["total"] - report["deleted"]
    assert report["updated"] + report["unchanged"] == report["total"]
    assert json.loads(kt("grep", "fjord", "--json", store=store).stdout)["hits"] == []
    assert kt("read", f"docs/picking.md#{report['total'] - 1}", store=store).returncode != 0
    # an unreadable page is a problem, not an edit: its chunks stay
    (root / "returns.md").write_bytes(b"\xff\xfe\x00bad")
    third = kt("ingest", str(root), "--skip-invalid", "--json", store=store)
    assert json.loads(third.stdout)["total"] == report["total"]
    # --prune removes files gone from disk, not one that is there but could not be read this time
    fourth = json.loads(kt("ingest", str(root), "--skip-invalid", "--prune", "--json", store=store).stdout)
    assert (fourth["deleted"], fourth["total"], fourth["skipped"]) == (0, report["total"], 1)
    assert json.loads(kt("grep", "arrival", "--json", store=store).stdout)["hits"]
    (root / "returns.md").unlink()
    fifth = json.loads(kt("ingest", str(root), "--prune", "--json", store=store).stdout)
    assert fifth["deleted"] == 1 and not json.loads(kt("grep", "arrival", "--json", store=store).stdout)["hits"]


def test_restructuredtext_saved_as_txt_is_read_as_restructuredtext(tmp_path: Path) -> None:
    """Django's and many Sphinx projects' sources are .txt files written in reST: their directives and
    roles are markup, their adorned titles sections, while a plain .txt in the same folder stays text."""
    root = tmp_path / "docs"
    (root / "topics").mkdir(parents=True)
    (root / "topics" / "queries.txt").write_text(
        "==============\nMaking queries\n==============\n\n.. currentmodule:: shop.models\n\n"
        "Once you have created your :doc:`data models </topics/models>`, call :meth:`Order.refund`.\n\n"
        "Saving changes\n==============\n\nTo save changes to an object, use :meth:`~Model.save`.\n\n"
        ".. code-block:: python\n\n    order.save()\n")
    (root / "notes.txt").write_text("Meeting notes\n\nWe spoke about refunds .. and agreed on 7 days.\n")
    store = tmp_path / "store"
    done = kt("ingest", str(root), "--embedder", "hash", "--json", store=store)
    assert done.returncode == 0, done.stderr
    read = kt("read", "docs/topics/queries.txt#0", "docs/notes.txt#0", "--json", store=store)
    assert read.returncode == 0, read.stderr
    chunks = {c["chunk_id"]: c for c in json.loads(read.stdout)["chunks"]}
    rst = chunks["docs/topics/queries.txt#0"]
    assert rst["section"] == "Making queries" and "Saving changes" in rst["text"]
    assert "Order.refund" in rst["text"] and "```python\norder.save()\n```" in rst["text"]
    assert not any(m in rst["text"] for m in (":meth:", ":doc:", "currentmodule", "code-block", "===="))
    assert chunks["docs/notes.txt#0"]["text"] == "Meeting notes\n\nWe spoke about refunds .. and agreed on 7 days."


def test_redirect_pages_are_listed_and_a_moved_page_leaves_with_prune(corpus: Path, tmp_path: Path) -> None:
    """A generated site keeps a stub at a moved page's old address that only redirects (meta refresh,
    no delay): it is listed, not indexed, so "Redirecting to…" never fills a node of the map or a
    search hit; when a page is moved and its old file becomes such a stub, --prune drops its chunks."""
    store = tmp_path / "store"
    stub = '<html><head><meta http-equiv="refresh" content="0; url=./wiki/macros.htm"></head>' \
           '<body><p>Redirecting to <a href="./wiki/macros.htm">./wiki/macros.htm</a>.</p></body></html>'
    (corpus / "macros.html").write_text(stub)
    report = json.loads(kt("ingest", str(corpus), "--embedder", "hash", "--json", store=store).stdout)
    assert report["redirects"] == {"docs/macros.html": "./wiki/macros.htm"}
    assert report["added"] == 4 and report["no_text"] == []
    hits = json.loads(kt("grep", "Redirecting", "--json", store=store).stdout)["hits"]
    assert hits == []
    human = kt("ingest", str(corpus), store=store)
    assert "1 redirect page(s), nothing to index (they only send the reader on): " \
           "docs/macros.html → ./wiki/macros.htm" in human.stdout

    # the Markdown page moves; an HTML stub is left where it was
    (corpus / "refunds.md").rename(corpus / "wiki" / "refunds.md")
    (corpus / "refunds.html").write_text(stub.replace("./wiki/macros.htm", "./wiki/refunds.md"))
    moved = json.loads(kt("ingest", str(corpus), "--prune", "--json", store=store).stdout)
    assert moved["redirects"]["docs/refunds.html"] == "./wiki/refunds.md"
    ids = {h["chunk_id"] for h in json.loads(kt("grep", "partial refund", "--json", store=store).stdout)["hits"]}
    assert ids and all(i.startswith("docs/wiki/refunds.md") for i in ids)

    # nothing but redirects: nothing to index is an error naming the page and where it points
    only = tmp_path / "only"
    only.mkdir()
    (only / "old.html").write_text(stub)
    refused = kt("ingest", str(only), "--json", store=tmp_path / "other")
    assert refused.returncode == 1
    assert "only/old.html: no text to index, a page that redirects to ./wiki/macros.htm" in refused.stderr


def test_a_stub_that_redirects_after_a_delay_is_listed_and_a_self_refreshing_page_indexed(
        corpus: Path, tmp_path: Path) -> None:
    """A built Sphinx site (pip's docs) keeps "This page has moved" with a refresh after 3 seconds at a
    moved page's old address: like an immediate redirect it is listed and gives no chunk. A status
    page that reloads itself every 5 minutes (no address, or its own) is content and is indexed."""
    store = tmp_path / "store"
    (corpus / "reference").mkdir()
    (corpus / "reference" / "macros.html").write_text(
        '<html><head><title>This page has moved</title>'
        '<meta http-equiv="refresh" content="3; url=../wiki/macros.htm"></head><body><main>'
        '<h1>This page has moved</h1><p>You should be redirected automatically in 3 seconds. If that '
        'didn\'t work, here\'s a link: <a href="../wiki/macros.htm">Support macros</a></p></main></body></html>')
    (corpus / "status.html").write_text(
        '<html><head><title>Queue status</title><meta http-equiv="refresh" content="300"></head><body><main>'
        '<h1>Queue status</h1><p>The picking queue drains every quarter hour.</p></main></body></html>')
    (corpus / "board.html").write_text(
        '<html><head><title>Dock board</title><meta http-equiv="refresh" content="300; url=board.html">'
        '</head><body><main><h1>Dock board</h1><p>Trucks unload at the north dock before noon.</p>'
        '</main></body></html>')
    result = kt("ingest", str(corpus), "--embedder", "hash", "--json", store=store)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["redirects"] == {"docs/reference/macros.html": "../wiki/macros.htm"}
    assert report["added"] == 6 and report["no_text"] == []
    assert json.loads(kt("grep", "has moved", "--json", store=store).stdout)["hits"] == []
    for words, page in (("quarter hour", "docs/status.html"), ("north dock", "docs/board.html")):
        hits = json.loads(kt("grep", words, "--json", store=store).stdout)["hits"]
        assert hits and hits[0]["chunk_id"].startswith(f"{page}#"), words
    human = kt("ingest", str(corpus), store=store)
    assert "1 redirect page(s), nothing to index (they only send the reader on): " \
           "docs/reference/macros.html → ../wiki/macros.htm" in human.stdout


def test_copies_of_one_text_fold_into_one_hit_led_by_the_page_itself(tmp_path: Path) -> None:
    """A generated site's print page (every page again, in one file) or a file kept twice gives each
    text twice; one hit stands for both, so k hits are k different texts. The copy nearest the start
    of its document leads (the page's own, not the print page's), the others are named on it."""
    site = tmp_path / "site"
    site.mkdir()
    cold = "# Cold chain\n\nChilled totes stay below five degrees from the dock to the van.\n"
    (site / "zone-cold.md").write_text(cold)
    (site / "print.md").write_text("# Returns\n\nDamaged parcels are returned within a week.\n\n" + cold)
    (site / "bread.md").write_text("# Bread\n\nLoaves are baked at dawn and sold warm.\n")
    store = tmp_path / "store"
    assert kt("ingest", str(site), "--embedder", "hash", store=store).returncode == 0
    for command in (["search", "chilled totes below five degrees", "-k", "3"], ["grep", "chilled totes", "-k", "3"]):
        result = kt(*command, "--json", store=store)
        assert result.returncode == 0, result.stderr
        hits = json.loads(result.stdout)["hits"]
        ids = [h["chunk_id"] for h in hits]
        assert ids[0] == "site/zone-cold.md#0" and hits[0]["copies"] == ["site/print.md#1"], command
        assert "site/print.md#1" not in ids and len(ids) == len(set(ids)), command
    assert len(json.loads(kt("search", "chilled totes", "-k", "3", "--json", store=store).stdout)["hits"]) == 3
    human = kt("search", "chilled totes below five degrees", "-k", "1", store=store)
    assert "[site/zone-cold.md#0]" in human.stdout and "(same text: site/print.md#1)" in human.stdout
    # Having read one copy, the session has read the text: the other copy is a repeat, not new text.
    assert "Chilled totes" in kt("read", "site/zone-cold.md#0", store=store).stdout
    again = json.loads(kt("read", "site/print.md#1", "site/bread.md#0", "--json", store=store).stdout)["chunks"]
    assert [(c["chunk_id"], c["already_read"], c["same_as"]) for c in again] == [
        ("site/print.md#1", True, "site/zone-cold.md#0"), ("site/bread.md#0", False, None)]
    said = kt("read", "site/print.md#1", store=store).stdout
    assert "[site/print.md#1] (already read — skip) (same text as site/zone-cold.md#0)" in said
    assert json.loads(kt("read", "site/print.md#1", "--force", "--json", store=store).stdout)["chunks"][0]["text"]


def test_k_hits_are_k_different_texts_when_a_text_repeats_on_many_pages(tmp_path: Path) -> None:
    """npm's docs repeat each config option's section on every command page that takes it: a search
    for it must still give -k different texts, the copies named on the first."""
    site = tmp_path / "site"
    site.mkdir()
    for n in range(8):
        (site / f"command-{n}.md").write_text(
            "# workspace-root\n\nInclude the workspace root when workspaces are enabled for a command.\n")
    (site / "workspaces.md").write_text("# Workspaces\n\nWorkspaces link packages of one root in a monorepo.\n")
    (site / "root.md").write_text("# Root\n\nThe root project holds the workspaces field.\n")
    store = tmp_path / "store"
    assert kt("ingest", str(site), "--embedder", "hash", store=store).returncode == 0
    for command in (["search", "include the workspace root"], ["search", "workspace root", "--preset", "fast"]):
        hits = json.loads(kt(*command, "-k", "3", "--json", store=store).stdout)["hits"]
        assert len(hits) == 3, (command, [h["chunk_id"] for h in hits])
        assert len(hits[0]["copies"]) == 7 and all(not h["copies"] for h in hits[1:]), command


def test_grep_shows_the_heading_not_the_anchor_above_it(tmp_path: Path) -> None:
    """Reference docs put ``<a id="NAME"></a>`` above each ``### `NAME` `` heading: the hit line
    a reader gets is the heading that writes the name, for a regex and for keywords alike."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "errors.md").write_text(
        "# Errors\n\nCodes the server raises.\n\n"
        '<a id="ERR_REQUEST_TIMEOUT"></a>\n\n### `ERR_REQUEST_TIMEOUT`\n\nThe client took too long to send.\n')
    store = tmp_path / "store"
    assert kt("ingest", str(docs), "--embedder", "hash", store=store).returncode == 0
    for args in (["--regex", "ERR_[A-Z_]+TIMEOUT"], ["request timeout"]):
        hits = json.loads(kt("grep", *args, "--json", store=store).stdout)["hits"]
        assert [h["snippet"] for h in hits] == ["`ERR_REQUEST_TIMEOUT`"], args  # no "###"


def test_a_leading_slash_counts_from_the_sphinx_project_inside_the_folder(tmp_path: Path) -> None:
    """A folder holding a Sphinx project (its own conf.py) below the ingested folder: `/example/x`
    in literalinclude, include and :doc: counts from that project's source folder, as Sphinx reads it."""
    root = tmp_path / "checkout"
    doc = root / "doc" / "en"
    (doc / "example").mkdir(parents=True)
    (doc / "conf.py").write_text("project = 'Harbour'\n")
    (doc / "example" / "moor.py").write_text("def moor(ship):\n    return ship.tie_up()\n")
    (doc / "example" / "note.rst").write_text("Mooring lines are checked at every tide change.\n")
    (doc / "tides.rst").write_text("Tide tables\n===========\n\nTables list high and low water.\n")
    (doc / "index.rst").write_text(
        "Harbour guide\n=============\n\nSee :doc:`/tides` for the water levels.\n\n"
        ".. literalinclude:: /example/moor.py\n\n.. include:: /example/note.rst\n")
    store = tmp_path / "store"
    done = kt("ingest", str(root), "--embedder", "hash", "--json", store=store)
    assert done.returncode == 0, done.stderr
    assert not json.loads(done.stdout)["unread_includes"]
    hits = json.loads(kt("grep", "tie_up", "--json", store=store).stdout)["hits"]
    assert [h["chunk_id"] for h in hits] == ["checkout/doc/en/index.rst#0"]
    (chunk,) = json.loads(kt("read", "checkout/doc/en/index.rst#0", "--json", store=store).stdout)["chunks"]
    assert "See Tide tables for the water levels" in chunk["text"]
    assert "checked at every tide change" in chunk["text"]


def test_gzip_compressed_documents_are_read_as_the_documents_they_hold(tmp_path: Path) -> None:
    """Debian ships docs as ``user_guide.rst.gz``: a folder ingest reads them like the plain files
    (format from the name inside, lines of the decompressed text, titles without ``.gz``); a file
    that is no gzip is named with what to do, and --skip-invalid takes the others in. Files that are no
    document (an image, ``build-log.gz`` with no document inside) are counted by extension."""
    import gzip

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.rst.gz").write_bytes(gzip.compress(
        b"User Guide\n==========\n\nInstalling\n----------\n\nRun ``pip install quokka`` to get the marsupial toolkit.\n"))
    (docs / "notes.md.gz").write_bytes(gzip.compress(b"# Notes\n\nThe wombat cache lives in `~/.wombat`.\n"))
    (docs / "plain.md").write_text("# Plain\n\nA numbat counts termites.\n")
    (docs / "broken.md.gz").write_bytes(b"# not gzip at all\n")
    (docs / "build-log.gz").write_bytes(gzip.compress(b"no document extension inside\n"))
    (docs / "v2.13-ReleaseNotes.gz").write_bytes(gzip.compress(b"a version's dot is no extension\n"))
    (docs / "sales.csv.gz").write_bytes(gzip.compress(b"a,b\n1,2\n"))
    (docs / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    store = tmp_path / "store"
    refused = kt("ingest", str(docs), "--embedder", "hash", store=store)
    assert refused.returncode == 1 and refused.stderr.startswith(
        "Error: docs/broken.md.gz: not a readable gzip file (") and "decompress it or replace it" in refused.stderr
    report = json.loads(kt("ingest", str(docs), "--embedder", "hash", "--skip-invalid", "--json", store=store).stdout)
    assert report["added"] == 3 and [p.split(":", 1)[0] for p in report["problems"]] == ["docs/broken.md.gz"]
    # named by what is inside, so the note never reads as if gzip were not read
    assert report["not_documents"] == {"(no extension).gz": 2, ".csv.gz": 1, ".png": 1}
    again = kt("ingest", str(docs), "--embedder", "hash", "--skip-invalid", store=store).stdout
    assert "note: 4 file(s) in the ingested folder(s) are not documents kt reads and were left out: " \
           "(no extension).gz (2), .csv.gz (1), .png (1)" in again
    hit = json.loads(kt("grep", "quokka", "--json", store=store).stdout)["hits"][0]
    assert hit["chunk_id"].startswith("docs/guide.rst.gz#")
    read = kt("read", hit["chunk_id"], store=store).stdout
    assert "docs/guide.rst.gz:1-7 — User Guide › Installing" in read and "User Guide › Installing" in read and "`pip install quokka`" in read
    assert json.loads(kt("grep", "wombat", "--json", store=store).stdout)["hits"][0]["chunk_id"].startswith(
        "docs/notes.md.gz#")
    assert not json.loads(kt("grep", "extension inside", "--json", store=store).stdout)["hits"]
    assert parsers.display_name("docs/guide.rst.gz") == "guide" and parsers.display_name("a/build-log.gz") == "build-log.gz"


def test_a_projects_extensionless_readme_and_news_are_read_as_text(tmp_path: Path) -> None:
    """A source release carries README, NEWS, INSTALL without an extension (Debian ships NEWS.gz):
    they are read as plain text, named with their folder; other extensionless files stay out, and so
    does a ChangeLog (a log of every change for developers, not documentation)."""
    import gzip

    root = tmp_path / "quokka-1.2"
    root.mkdir()
    (root / "README").write_text("Quokka\n======\n\nQuokka counts marsupials on small islands.\n")
    (root / "NEWS.gz").write_bytes(gzip.compress(b"Changes in 1.2\n--------------\n\nThe wallaby census is faster.\n"))
    (root / "Makefile").write_text("all:\n\tcc -o quokka quokka.c\n")
    (root / "ChangeLog").write_text("2026-01-02  Ann Example\n\n\t* quokka.c (count): Fix off-by-one.\n")
    (root / "THANKS").write_bytes("Thanks to Jos\u00e9 for the island maps.\n".encode("latin-1"))  # not UTF-8
    store = tmp_path / "store"
    report = json.loads(kt("ingest", str(root), "--embedder", "hash", "--json", store=store).stdout)
    # Makefile, ChangeLog and THANKS, which is no UTF-8 text (a guess by name is no reason to fail)
    assert report["added"] == 2 and report["not_documents"] == {"(no extension)": 3} and not report["problems"]
    (chunk,) = json.loads(kt("read", "quokka-1.2/README#0", "--json", store=store).stdout)["chunks"]
    assert chunk["title"] == "Quokka" and "small islands" in chunk["text"]
    hits = json.loads(kt("grep", "wallaby", "--json", store=store).stdout)["hits"]
    assert [h["chunk_id"] for h in hits] == ["quokka-1.2/NEWS.gz#0"]
    assert parsers.display_name("quokka-1.2/README") == "quokka-1.2 README"


def test_outline_news_chunks_carry_their_release_as_section(tmp_path: Path) -> None:
    """A GNU NEWS file is an Emacs outline: each chunk's section is the release its ``*`` line heads,
    and a Debian note beside it (``README.Debian``) is read as text."""
    root = tmp_path / "quokka-2.4"
    root.mkdir()
    (root / "NEWS").write_text(
        "Quokka NEWS  -*- outline -*-\n\n* Noteworthy changes in release 2.4\n\n** Bug fixes\n\n"
        "  The census no longer counts a quokka twice.\n\n* Noteworthy changes in release 2.3\n\n"
        "  The census skips wallabies.\n")
    (root / "README.Debian").write_text("Quokka for Debian\n\nThe maps live in /usr/share/quokka.\n\n"
                                        "Local Variables:\nfill-column: 72\nEnd:\n")
    store = tmp_path / "store"
    report = json.loads(kt("ingest", str(root), "--embedder", "hash", "--json", store=store).stdout)
    assert not report["problems"] and not report["not_documents"], report
    hits = json.loads(kt("grep", "wallabies", "--json", store=store).stdout)["hits"]
    (chunk,) = json.loads(kt("read", hits[0]["chunk_id"], "--json", store=store).stdout)["chunks"]
    assert chunk["section"] == "Noteworthy changes in release 2.3" and "-*-" not in chunk["text"]
    hits = json.loads(kt("grep", "twice", "--json", store=store).stdout)["hits"]
    (chunk,) = json.loads(kt("read", hits[0]["chunk_id"], "--json", store=store).stdout)["chunks"]
    assert chunk["section"] == "Noteworthy changes in release 2.4 › Bug fixes"
    assert [h["chunk_id"] for h in json.loads(kt("grep", "maps live", "--json", store=store).stdout)["hits"]] == [
        "quokka-2.4/README.Debian#0"]
    assert not json.loads(kt("grep", "fill-column", "--json", store=store).stdout)["hits"]  # editor settings


def test_bold_example_lines_head_their_chunks(tmp_path: Path) -> None:
    """A CLI's example pages head each example with a bold line (``**Example 2: …**``): each chunk's
    section is its example, so a hit says which example it is."""
    root = tmp_path / "examples"
    root.mkdir()
    body = "The following ``create-user`` command creates a user named ``Bob``. ::\n\n    cli create-user --name Bob\n\n"
    (root / "create-user.rst").write_text(
        "**Example 1: To create a user**\n\n" + body + "Output::\n\n    {\"User\": \"Bob\"}\n\n"
        "**Example 2: To create a user at a path**\n\n" + body.replace("Bob", "Ann") + "The path is kept.\n")
    (root / "return-codes.rst").write_text(":title: CLI Return Codes\n:category: General\n\nCode 2 means a bad flag.\n")
    (root / "index.rst").write_text("CLI\n===\n\nThe CLI creates users.\n\nIndices and tables\n==================\n\n"
                                    "* :ref:`genindex`\n* :ref:`search`\n")
    store = tmp_path / "store"
    kt("ingest", str(root), "--embedder", "hash", store=store)
    hits = json.loads(kt("grep", "path is kept", "--json", store=store).stdout)["hits"]
    assert hits[0]["section"] == "Example 2: To create a user at a path", hits[0]
    (chunk,) = json.loads(kt("read", hits[0]["chunk_id"], "--json", store=store).stdout)["chunks"]
    assert chunk["text"].startswith("# Example 2: To create a user at a path") and "Bob" not in chunk["text"]
    hits = json.loads(kt("grep", "bad flag", "--json", store=store).stdout)["hits"]
    (chunk,) = json.loads(kt("read", hits[0]["chunk_id"], "--json", store=store).stdout)["chunks"]
    assert chunk["title"] == "CLI Return Codes" and "category" not in chunk["text"]  # its :title: field
    assert not json.loads(kt("grep", "genindex", "--json", store=store).stdout)["hits"]  # Sphinx's navigation
    assert not json.loads(kt("grep", "Indices", "--json", store=store).stdout)["hits"]


def test_asciidoc_folder_ingests_reads_and_greps(tmp_path: Path) -> None:
    root = tmp_path / "adoc"
    root.mkdir()
    (root / "guide.adoc").write_text(
        "= Cold Room Guide\n:toc:\n\nKeep the door shut.\n\n== Defrost\n\nRun `defrost --now` weekly.\n\n"
        "[source,shell]\n----\ndefrost --now\n----\n\ninclude::steps.adoc[]\n")
    (root / "steps.adoc").write_text("=== Steps\n\nWipe the coils dry.\n")
    (root / "broken.adoc").write_text("= Broken\n\nifeval::[1==1]\nx\nendif::[]\n")
    (root / "SHA256SUMS.asc").write_text("-----BEGIN PGP SIGNATURE-----\nabc\n-----END PGP SIGNATURE-----\n")
    store = tmp_path / "store"
    result = kt("ingest", str(root), "--embedder", "hash", "--skip-invalid", store=store)
    assert result.returncode == 0, result.stderr
    problems = [line for line in result.stdout.splitlines() if "broken.adoc" in line]
    assert len(problems) == 1 and "asciidoc cannot convert it (line 3" in problems[0], result.stdout
    assert "WARNING" not in result.stdout + result.stderr and "SHA256SUMS" not in result.stderr
    result = kt("read", "adoc/guide.adoc#0", "--json", store=store)
    assert result.returncode == 0, result.stderr
    chunk = json.loads(result.stdout)["chunks"][0]
    assert chunk["title"] == "Cold Room Guide" and chunk["lines"][0] == 1
    assert "`defrost --now`" in chunk["text"] and "```shell\ndefrost --now\n```" in chunk["text"]
    assert "Wipe the coils dry." in chunk["text"] and "Table of Contents" not in chunk["text"]
    hits = json.loads(kt("grep", "coils", "--json", store=store).stdout)["hits"]
    assert hits and hits[0]["chunk_id"].startswith("adoc/guide.adoc#")
