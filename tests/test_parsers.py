"""Tests of knowtology_cli.parsers: each format's sections, title paths, ranges and clean text."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from _doc_fixtures import PAPER_BODY, write_lines_pdf, write_paper_pdf, write_two_page_pdf

from knowtology_cli.builders.snippets import make_snippet
from knowtology_cli.chunking import chunk_document
from knowtology_cli.errors import ConfigError, InputError
from knowtology_cli.parsers import detect_format, display_name, parse, parser_version, plain_text_name

MARKUP = re.compile(r":\w+:`|``|\.\. |\^\^\^|~~~|===|\|[a-z]+\||<[a-z/][^>]*>|\*\*|\]\(|^#", re.M)


def blocks(doc):
    return [(s.titles, b) for s in doc.sections for b in s.blocks]


def snippets(doc, name: str) -> list[str]:
    return [make_snippet(c.text, c.title) for c in chunk_document(doc, file_name=name, target_tokens=40,
                                                                   max_tokens=80).chunks]


# -- reStructuredText -----------------------------------------------------------------------

RST = """\
.. vim: set ft=rst tw=80 :

.. _top:

==================
Billing Handbook
==================

The :mod:`billing` service charges orders --- see :func:`~billing.charge.capture` and
:ref:`the refund rules <refunds>`. Product names come from |product|.

.. |product| replace:: Northwind Pantry

.. toctree::
   :maxdepth: 2

   refunds
   disputes

.. index:: single: billing; capture

.. This comment is for editors only.

Refunds
-------

Partial refunds
^^^^^^^^^^^^^^^

A partial refund returns the price of the missing items. Use ``refund --partial`` and
:class:`RefundRequest`.

.. note::

   Refunds to a card take up to 5 days.

.. versionadded:: 2.1
   Refunds in store credit.

.. code-block:: python
   :linenos:

   request = RefundRequest(order_id="A-1")

Disputes
--------

Chargebacks are answered within 7 days.
"""


def test_rst_overline_titles_roles_and_directives() -> None:
    doc = parse(RST.encode(), name="billing.rst")
    assert doc.format == "rst" and doc.parser == parser_version("rst")
    assert [s.titles for s in doc.sections] == [
        ("Billing Handbook",),
        ("Billing Handbook", "Refunds"),
        ("Billing Handbook", "Refunds", "Partial refunds"),
        ("Billing Handbook", "Disputes"),
    ]
    found = blocks(doc)
    heading = found[0][1]
    assert (heading.kind, heading.text, heading.start, heading.end) == ("heading", "# Billing Handbook", 5, 7)
    intro = found[1][1]
    assert intro.text == ("The `billing` service charges orders --- see `capture` and\n"
                          "the refund rules. Product names come from Northwind Pantry.")
    assert (intro.start, intro.end) == (9, 10)
    texts = [b.text for _, b in found]
    partial = next(b for _, b in found if b.text.startswith("A partial refund"))
    assert "refund --partial" in partial.text and "RefundRequest" in partial.text
    assert (partial.start, partial.end) == (30, 31)
    assert "Note: Refunds to a card take up to 5 days." in texts
    assert "New in version 2.1: Refunds in store credit." in texts
    assert '```python\nrequest = RefundRequest(order_id="A-1")\n```' in texts  # the fence names the language
    joined = "\n".join(texts)
    for gone in ("toctree", "maxdepth", "disputes\n", "single:", "editors only", "vim", "replace::", "_top"):
        assert gone not in joined
    assert doc.dropped >= 5  # modeline, target, substitution, toctree, index, comment
    for snippet in snippets(doc, "billing.rst"):
        assert not MARKUP.search(snippet), snippet


def test_markdown_front_matter_title_heads_trails_below_h1_and_its_description_is_text() -> None:
    """npm's pages state `title: npm-ci` and `description:` in front matter, then start at `###`:
    without the title every chunk was one of a hundred "Synopsis"; the summary was dropped."""
    page = b"---\ntitle: npm-ci\nsection: 1\ndescription: Clean install a project\n---\n\n### Synopsis\n\n" \
           b"```bash\nnpm ci\n```\n\n### Description\n\nThis command is like install.\n"
    doc = parse(page, name="npm-ci.md")
    assert [(s.titles, [b.text for b in s.blocks]) for s in doc.sections] == [
        (("npm-ci",), ["Clean install a project"]),
        (("npm-ci", "Synopsis"), ["### Synopsis", "```bash\nnpm ci\n```"]),
        (("npm-ci", "Description"), ["### Description", "This command is like install."]),
    ]
    assert doc.sections[0].blocks[0].start == 1
    # a page with its own h1 keeps its headings as they are
    titled = parse(b"---\ntitle: Refunds policy\n---\n\n# Refunds\n\nText.\n", name="r.md")
    assert [s.titles for s in titled.sections] == [("Refunds",)]


def test_markdown_headings_resolve_reference_links_and_drop_badges() -> None:
    """READMEs title themselves with badges and reference-style links: the trail is the words."""
    page = (b"# QRCode Terminal Edition [![Build Status][ci-img]][ci-url]\n\nPrint codes.\n\n"
            b"## Use [the API][api] now\n\nCall it.\n\n[ci-img]: https://ci/x.svg\n[ci-url]: https://ci\n"
            b"[api]: https://api\n")
    assert [s.titles for s in parse(page, name="README.md").sections] == [
        ("QRCode Terminal Edition",), ("QRCode Terminal Edition", "Use the API now")]


def test_rst_roles_keep_placeholders_and_conditions_and_paths_are_no_text() -> None:
    """CMake's docs name things with placeholders (``IMPORTED_LOCATION_<CONFIG>``, ``$<LINK_ONLY:..>``):
    only whitespace before ``<`` makes a role ``Title <target>``, as docutils reads it. A build
    condition (``.. only:: html``) and a directive pointing at a file are no text; their content is."""
    doc = parse(b"Options\n=======\n\nSee :prop_tgt:`IMPORTED_LOCATION_<CONFIG>`, :genex:`$<LINK_ONLY:...>` and "
                b":variable:`CMAKE_CXX_FLAGS <CMAKE_<LANG>_FLAGS>`.\n\n.. only:: html\n\n   Shown on the web.\n\n"
                b".. cmake-module:: ../../Modules/FindBoost.cmake\n", name="opts.rst")
    assert [b.text for _, b in blocks(doc)][1:] == [
        "See `IMPORTED_LOCATION_<CONFIG>`, `$<LINK_ONLY:...>` and `CMAKE_CXX_FLAGS`.", "Shown on the web."]
    stub = parse(b"FindBoost\n---------\n\n.. cmake-module:: ../../Modules/FindBoost.cmake\n", name="FindBoost.rst")
    assert [b.kind for _, b in blocks(stub)] == ["heading"]


def test_rst_a_version_note_that_ends_a_sentence_gets_no_colon() -> None:
    """CMake writes ``.. versionadded:: 3.20`` with its sentence on the next line and more below:
    "New in version 3.20: Use the default if any." is the line, not "…if any.:"."""
    doc = parse(b"T\n=\n\n.. versionadded:: 3.20\n  Use the default if any.\n\n  More text.\n", name="a.rst")
    assert [b.text for _, b in blocks(doc)][1] == "New in version 3.20: Use the default if any.\n\nMore text."


def test_rst_autodoc_directives_keep_their_signature_and_prose() -> None:
    # Seen on Sphinx's own docs (an API page of only autodoc directives was "no text to index"): the
    # signature names the API and the content under it is the page's prose; :members: is an option.
    text = ("Logging API\n===========\n\n.. currentmodule:: acme.log\n\n.. autofunction:: get_logger(name)\n\n"
            ".. autoclass:: Adapter(base.Adapter)\n   :members:\n\n   Logs a message at the level given.\n\n"
            ".. class:: Registry\n\n   .. attribute:: handlers\n\n      Every handler in order.\n")
    doc = parse(text, name="api.rst")
    texts = [b.text for _, b in blocks(doc)]
    joined = "\n".join(texts)
    assert "get_logger(name)" in texts
    assert "Adapter(base.Adapter)" in joined and "Logs a message at the level given." in joined
    assert "Registry" in joined and "Every handler in order." in joined
    assert "members" not in joined and "acme.log" not in joined and "::" not in joined


def test_rst_inline_literals_read_as_markdown_code_spans() -> None:
    """````code```` reads as ```code```, as a Markdown source writes it, so grep and read show both
    formats alike: in text, headings (the title path keeps the words), tables and definition terms;
    ````code```` written inside bold (which reST leaves literal) too, wrapped once; a literal holding
    a backtick in a longer run; a code role (``:func:``) is a code span too, as MyST and Sphinx show it."""
    from knowtology_cli.parsers.markdown import parse_markdown
    from knowtology_cli.parsers.rst import parse_rst

    doc = parse_rst("Setup\n=====\n\nSet ``DEBUG = True`` with :func:`configure`.\n\n"
                    "**Edit ``settings.py``** and mind ``a`b``.\n\n``name`` option\n---------------\n\n"
                    "=======  =====\nKey      Value\n=======  =====\n``ab``   one\n=======  =====\n\n"
                    "``timeout``\n    Seconds to wait.\n")
    assert [(s.titles, [b.text for b in s.blocks]) for s in doc.sections] == [
        (("Setup",), ["# Setup", "Set `DEBUG = True` with `configure`.", "Edit `settings.py` and mind ``a`b``."]),
        (("Setup", "name option"), ["## `name` option", "| Key | Value |\n| --- | --- |\n| `ab` | one |",
                                    "`timeout`: Seconds to wait."])]
    markdown = parse_markdown("# Setup\n\nSet `DEBUG = True` with `configure`.\n")
    assert [b.text for b in markdown.sections[0].blocks] == [b.text for b in doc.sections[0].blocks][:2]


def test_autodoc_directives_are_counted_as_docstrings_not_read(tmp_path: Path) -> None:
    """An autodoc directive's text is the docstring of code Sphinx imports, which Knowtology does not:
    each one (in the page, in an include, in MyST and its ``{eval-rst}``) is counted for the ingest
    report; the signature and prose the page writes stay; one shown as code is no directive."""
    from knowtology_cli.parsers.markdown import parse_markdown
    from knowtology_cli.parsers.rst import parse_rst

    (tmp_path / "api-part.rst").write_text(".. autofunction:: acme.log.flush\n")
    page = tmp_path / "api.rst"
    page.write_text("API\n===\n\n.. automodule:: acme.log\n   :members:\n\n.. autoclass:: Adapter(base)\n\n   Logs.\n\n"
                    ".. autosummary::\n\n   acme.log.get\n\n.. include:: api-part.rst\n\nShown as code::\n\n"
                    "   .. autoclass:: NotCounted\n")
    doc = parse_rst(page.read_text(), path=page)
    assert doc.docstrings == 4
    assert [b.text for s in doc.sections for b in s.blocks][1:4] == ["acme.log", "Adapter(base)\n\nLogs.", "acme.log.flush"]
    myst = parse_markdown("# API\n\n```{autoclass} acme.Adapter\n```\n\n```{eval-rst}\n.. autofunction:: acme.f\n```\n\n"
                          "```\n.. autoclass:: shown\n```\n")
    assert myst.docstrings == 2
    assert parse_rst("T\n=\n\n.. note:: Plain.\n").docstrings == 0


def test_rst_malformed_input_is_kept_as_text_and_never_reads_files(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET VALUE")
    text = f"Title\n=====\n\n.. include:: {secret}\n\n.. raw:: html\n\n   <b>raw</b>\n\n*unclosed emphasis\n"
    doc = parse(text, name="x.rst")
    joined = "\n".join(b.text for _, b in blocks(doc))
    assert "TOP SECRET" not in joined and "<b>" not in joined
    assert "unclosed emphasis" in joined


def test_rst_a_link_without_its_target_reads_as_its_text() -> None:
    """AWS CLI examples write ```Creating … Certificates`__`` with no ``.. __:`` target: docutils marks
    it problematic and kept the raw markup; it reads as the link's text, as a resolved link does."""
    doc = parse("Title\n=====\n\nSee `Creating, Uploading, and Deleting Certificates`__ in the guide, word_ and "
                "`Named <https://example.com>`_; |undefined| stays.\n\n"
                "**Example 1: To enable ``requester pays`` configuration**\n", name="x.rst")
    assert [b.text for _, b in blocks(doc)][1:] == [
        "See Creating, Uploading, and Deleting Certificates in the guide, word and Named; |undefined| stays.",
        "Example 1: To enable `requester pays` configuration"]  # code inside bold: reST leaves it literal


def test_rst_sphinx_descriptions_console_blocks_and_index_markers() -> None:
    """Django's pages: ``.. class:: CharField(max_length=None)`` with no content is a description's
    signature (docutils' own ``class`` sets a lower-case style class and stays dropped), kept and
    kept with what follows; ``.. console::`` is code; ``.. setting:: DEBUG`` over the title DEBUG is
    said once."""
    text = ("Fields\n======\n\n``CharField``\n-------------\n\n.. class:: CharField(max_length=None, **options)\n\n"
            "A string field.\n\n.. class:: special\n\nStyled paragraph.\n\n.. setting:: DEBUG\n\n``DEBUG``\n---------\n\n"
            "Default: ``False``\n\n.. console::\n\n    $ python manage.py migrate books 0002\n    Operations to perform:\n")
    found = [(b.kind, b.text) for _, b in blocks(parse(text, name="fields.txt"))]
    assert found == [
        ("heading", "# Fields"), ("heading", "## `CharField`"), ("label", "CharField(max_length=None, **options)"),
        ("text", "A string field."), ("text", "Styled paragraph."), ("heading", "## `DEBUG`"), ("text", "Default: `False`"),
        ("code", "```console\n$ python manage.py migrate books 0002\nOperations to perform:\n```")]


def test_rst_cross_references_read_as_words() -> None:
    """Without the titles Sphinx looks up, a ``:doc:`` or ``:ref:`` reads as its explicit title (no
    space needed before ``<``) or its target's last part in words, never a path or a slug; ``:rfc:``
    with a title (which docutils' own role refuses) reads as the title; a term or an admonition title
    that ends in punctuation gets no second mark."""
    text = ("T\n=\n\nSee :doc:`/ref/csrf`, :ref:`configuring-sessions`, :doc:`the migrations "
            "documentation</topics/migrations>`, :ref:`Sessions <sessions-ref>`, :rfc:`RFC 7231 "
            "<7231#section-6.5.5>` and :pep:`8`.\n\n.. admonition:: Restrictions on operators.\n\n    Only some.\n\n"
            "- ``timezone``:\n      The zone.\n")
    assert [b.text for _, b in blocks(parse(text, name="x.rst"))][1:] == [
        "See csrf, configuring sessions, the migrations documentation, Sessions, RFC 7231 and PEP 8.",
        "Restrictions on operators. Only some.",
        "- `timezone`: The zone."]


def test_rst_include_reads_fragments_inside_the_folder_only(tmp_path: Path) -> None:
    """An include brings its file's text into the page as docutils does: the page's substitutions
    apply, nested includes resolve from the fragment's folder, a leading ``/`` from the root, and the
    text cites the directive's line; nothing outside the root is read, and a loop stops."""
    root = tmp_path / "docs"
    (root / "command" / "parts").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("TOP SECRET VALUE\n")
    (root / "shared.txt").write_text("Shared root note.\n")
    (root / "command" / "FIND.txt").write_text(
        "The |NAME| command searches :variable:`CMAKE_PREFIX_PATH`.\n\n.. include:: parts/order.txt\n")
    (root / "command" / "parts" / "order.txt").write_text("Order text under |NAME|.\n")
    (root / "command" / "snippet.py").write_text("def f():\n    return 1\n")
    (root / "command" / "loop.rst").write_text("Loop text.\n\n.. include:: find_file.rst\n")
    page = root / "command" / "find_file.rst"
    page.write_text("find_file\n---------\n\n.. |NAME| replace:: find_file\n\n.. include:: FIND.txt\n\n"
                    "Own text.\n\n.. include:: ../../secret.txt\n\n.. include:: /shared.txt\n\n"
                    ".. include:: snippet.py\n   :literal:\n\n.. include:: missing.txt\n\n"
                    ".. include:: loop.rst\n\n.. include:: <isonum.txt>\n\nCopyright |copy| 2024.\n")
    doc = parse(page, root=root)
    found = {b.text: (b.start, b.end) for _, b in blocks(doc)}
    assert found["The find_file command searches `CMAKE_PREFIX_PATH`."] == (6, 6)
    assert found["Order text under find_file."] == (6, 6)
    assert found["Own text."] == (8, 8)
    assert found["Shared root note."] == (12, 12)
    assert found["```python\ndef f():\n    return 1\n```"][0] == 14
    assert "Loop text." in found and "Copyright © 2024." in found
    joined = "\n".join(found)
    assert "TOP SECRET" not in joined and "|NAME|" not in joined and joined.count("Own text.") == 1
    assert set(doc.includes) == {(root / p).resolve().as_posix() for p in (
        "command/FIND.txt", "command/parts/order.txt", "shared.txt", "command/snippet.py", "command/loop.rst")}
    assert doc.unread == ("../../secret.txt (outside the ingested folder)", "missing.txt (not found)",
                          "find_file.rst (circular inclusion: the page includes itself)")
    # the same page given as text (no path) reads no file at all
    alone = parse(page.read_text(), name="find_file.rst")
    assert all("find_file command searches" not in b.text for _, b in blocks(alone)) and alone.includes == ()
    # the default root is the page's own folder: /shared.txt is then outside it
    assert "Shared root note." not in [b.text for _, b in blocks(parse(page))]


# -- Markdown -------------------------------------------------------------------------------

MARKDOWN = """\
---
title: Refund Guide
tags: [billing]
---

# Refunds

Refunds are paid in **5 days**, see [the policy](policy.md).

<!-- vim: set ft=markdown: -->

## Commands

```bash
# This is not a heading
kt refund --order A-1
```

| Product | Window |
|---------|--------|
| Dairy   | 48 h   |
| Frozen  | 24 h   |

***

Setext title
------------

Under the setext title.
"""



def test_markdown_mkdocs_admonitions_and_tabs_read_as_text() -> None:
    """MkDocs sites write admonitions (``!!! warning "Title"``), collapsible blocks (``???``) and
    content tabs (``=== "Python"``) with the body indented: CommonMark alone takes the body for an
    indented code block and the marker for text. The marker reads as its title and the body as the
    text and code it is, at the same lines; inside a fence nothing changes."""
    text = ('# Middleware\n\n!!! warning "Experimental API"\n    The API may change.\n\n    Pin the version.\n\n'
            '??? info\n    Chunks are compressed as they come.\n\n=== "Do"\n\n    ```python\n    app = App()\n    ```\n\n'
            'Plain text again.\n\n```text\n!!! note\n    stays as written\n```\n\n> [!WARNING]\n> Back up first.\n')
    found = [(b.kind, b.text, b.start) for _, b in blocks(parse(text, name="middleware.md"))]
    assert found == [
        ("heading", "# Middleware", 1),
        ("text", "Experimental API:\nThe API may change.", 3),
        ("text", "Pin the version.", 6),
        ("text", "Info:\nChunks are compressed as they come.", 8),
        ("text", "Do:", 11),
        ("code", "```python\napp = App()\n```", 13),
        ("text", "Plain text again.", 17),
        ("code", "```text\n!!! note\n    stays as written\n```", 19),
        ("quote", "> Warning:\n> Back up first.", 24),
    ]


def test_markdown_front_matter_fences_and_tables() -> None:
    doc = parse(MARKDOWN, name="guide.md")
    assert doc.title == "Refund Guide"
    assert [s.titles for s in doc.sections] == [("Refunds",), ("Refunds", "Commands"), ("Refunds", "Setext title")]
    found = blocks(doc)
    fence = next(b for _, b in found if b.kind == "code")
    assert fence.text == "```bash\n# This is not a heading\nkt refund --order A-1\n```"
    assert (fence.start, fence.end) == (14, 17)
    table = next(b for _, b in found if b.kind == "table")
    assert table.text.splitlines()[2] == "| Dairy   | 48 h   |" and (table.start, table.end) == (19, 22)
    joined = "\n".join(b.text for _, b in found)
    assert "tags:" not in joined and "vim" not in joined and "***" not in joined
    chunks = chunk_document(doc, file_name="guide.md").chunks
    assert [c.title for c in chunks] == ["Refunds"]  # small siblings packed under their common heading
    snippet = make_snippet(chunks[0].text, chunks[0].title)
    assert snippet.startswith("Refunds are paid in 5 days, see the policy.") and not MARKUP.search(snippet)
    table_snippet = make_snippet(table.text)
    assert table_snippet.startswith("Product; Window; Dairy; 48 h")


def test_markdown_heading_attribute_lists_are_not_heading_text() -> None:
    """Pandoc / kramdown / Python-Markdown attr_list ids and classes after a heading (seen on
    Python-Markdown's own docs) are markup: not in section titles or the heading's text."""
    text = ("# API {: #api }\n\nIntro.\n\n## Phases of processing {: #stages }\n\nStages.\n\n"
            "### A hash style header ### {: #hash }\n\nHashes.\n\n"
            "## `markdown()` { #markdown data-toc-label='markdown.markdown' }\n\nCall it.\n\n"
            "## Sets like {a, b}\n\nA literal brace stays.\n")
    doc = parse(text, name="api.md")
    assert [s.titles[-1] for s in doc.sections] == [
        "API", "Phases of processing", "A hash style header", "markdown()", "Sets like {a, b}"]
    headings = [b.text for _, b in blocks(doc) if b.kind == "heading"]
    assert headings[:3] == ["# API", "## Phases of processing", "### A hash style header"]
    assert headings[-1] == "## Sets like {a, b}" and not any("{:" in h or "#stages" in h for h in headings)


README_HTML = """\
<p align="center">
  <img src="logo.svg" alt="Acme SDK logo" width="120">
  <br><b>Acme</b> talks to the <a href="https://acme.test">Acme API</a>.
</p>

# Acme SDK

<!-- badges: start -->
Press <kbd>Ctrl</kbd>+<kbd>C</kbd> to stop; see <a href="docs/usage.md">the usage guide</a>.<br>Then
run it again.

## Methods

- <code title="post /webhooks">client.webhooks.<a href="./src/acme/webhooks.py">create</a>(\\*\\*<a href="src/acme/params.py">params</a>) -> <a href="./src/acme/webhook.py">Webhook</a></code>

<details>
<summary>Advanced <code>retry</code> options</summary>

Retries back off <b>exponentially</b>.

</details>

Plain text stays: a < b, Vec<T> in prose, `<b>` in code, ffmpeg -i <input>, <https://example.com>.
"""


def test_markdown_embedded_html_reads_as_its_text() -> None:
    """READMEs and generated API pages (the openai SDK's ``api.md``) embed HTML: it reads as the text
    it shows, ``<code>`` as a code span, links as their text, images and comments as nothing,
    ``<br>`` as a line break; what only looks like a tag (``a < b``, ``Vec<T>``, a placeholder, an
    autolink, a code span) stays as written."""
    doc = parse(README_HTML, name="README.md")
    assert [(titles, b.text, b.start, b.end) for titles, b in blocks(doc)] == [
        ((), "Acme talks to the Acme API.", 1, 3),
        (("Acme SDK",), "# Acme SDK", 6, 6),
        (("Acme SDK",), "Press `Ctrl`+`C` to stop; see the usage guide.\nThen\nrun it again.", 9, 10),
        (("Acme SDK", "Methods"), "## Methods", 12, 12),
        (("Acme SDK", "Methods"), "- `client.webhooks.create(**params) -> Webhook`", 14, 15),
        (("Acme SDK", "Methods"), "Advanced `retry` options", 17, 17),
        (("Acme SDK", "Methods"), "Retries back off exponentially.", 19, 19),
        (("Acme SDK", "Methods"),
         "Plain text stays: a < b, Vec<T> in prose, `<b>` in code, ffmpeg -i <input>, <https://example.com>.", 23, 23),
    ]
    assert doc.dropped == 2  # the comment, the closing </details>


def test_markdown_multimarkdown_meta_data_is_the_title_not_text() -> None:
    """MkDocs / Python-Markdown meta-data (unfenced ``key: value`` lines opening the file) names the
    document; a first paragraph that merely starts ``Note:`` stays prose."""
    doc = parse("title:   Extensions API\nauthors: Ann\n    Bob\n\n# Writing Extensions\n\nBody.\n", name="api.md")
    assert doc.title == "Extensions API"
    found = blocks(doc)
    assert [b.text for _, b in found] == ["# Writing Extensions", "Body."] and found[0][1].start == 5
    prose = parse("Note: back up first.\nThen upgrade.\n\nMore.\n", name="n.md")
    assert prose.title == "" and blocks(prose)[0][1].text == "Note: back up first.\nThen upgrade."


# -- HTML -----------------------------------------------------------------------------------

HTML = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Support Macros - Northwind Intranet</title>
<style>h2 { color: red }</style>
<script>document.write("<h2>Injected</h2>");</script>
</head>
<body>
<header class="site-header"><a href="/">Intranet home</a></header>
<nav class="breadcrumbs"><a href="/">Home</a> / <a href="/support">Support</a> / <a href="/macros">Macros</a></nav>
<div id="sidebar"><ul><li><a href="/a">Alpha</a></li><li><a href="/b">Beta</a></li><li><a href="/c">Gamma</a></li></ul></div>
<main>
<h1>Support Macros</h1>
<p>Macros are canned replies agents send from the help desk.
Each macro has an owner.</p>
<h2>Late delivery</h2>
<p>Apologise, give the new <b>delivery window</b>, and add a
<a href="/credit">&pound;5 credit</a> when the order is over 60 minutes late.</p>
<ul>
  <li>Check the driver app timeline first.</li>
  <li>Never promise a time the app does not show.</li>
</ul>
<h3>Macro codes</h3>
<table>
  <thead><tr><th>Code</th><th>Use</th></tr></thead>
  <tbody><tr><td>LATE-1</td><td>Under 60 minutes</td></tr>
  <tr><td>LATE-2</td><td>Over 60 minutes</td></tr></tbody>
</table>
</main>
<footer>Copyright 2026 Northwind Pantry. All rights reserved.</footer>
<script src="/analytics.js"></script>
</body>
</html>
"""


def test_html_headings_sections_and_furniture_dropped() -> None:
    doc = parse(HTML.encode(), name="macros.html")
    assert doc.title == "Support Macros - Northwind Intranet"
    assert [s.titles for s in doc.sections] == [
        ("Support Macros",), ("Support Macros", "Late delivery"), ("Support Macros", "Late delivery", "Macro codes"),
    ]
    found = blocks(doc)
    joined = "\n".join(b.text for _, b in found)
    for gone in ("Injected", "color", "Intranet home", "Alpha", "Copyright", "Home", "analytics"):
        assert gone not in joined
    late = next(b for _, b in found if b.text.startswith("Apologise"))
    assert late.text == ("Apologise, give the new delivery window, and add a £5 credit when the order is "
                         "over 60 minutes late.")
    assert (late.start, late.end) == (18, 19)
    items = next(b for _, b in found if b.kind == "list")
    assert items.text == "- Check the driver app timeline first.\n- Never promise a time the app does not show."
    table = next(b for _, b in found if b.kind == "table")
    assert table.text.splitlines() == ["| Code | Use |", "| --- | --- |", "| LATE-1 | Under 60 minutes |",
                                       "| LATE-2 | Over 60 minutes |"]
    assert table.start == 25
    for snippet in snippets(doc, "macros.html"):
        assert not MARKUP.search(snippet), snippet


def test_html_without_main_uses_body_and_drops_page_header() -> None:
    page = b"<html><body><header><h1>Site</h1></header><h2>Topic</h2><p>Body text here.</p></body></html>"
    doc = parse(page, name="p.htm")
    assert [s.titles for s in doc.sections] == [("Topic",)]
    assert [b.text for _, b in blocks(doc)] == ["## Topic", "Body text here."]


def test_missing_extra_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "knowtology_cli.parsers.html", raising=False)
    monkeypatch.setitem(sys.modules, "lxml", None)
    monkeypatch.setitem(sys.modules, "lxml.html", None)
    with pytest.raises(ConfigError) as info:
        parse(b"<html><body><p>x</p></body></html>", name="a.html")
    assert "lxml" in info.value.message and "knowtology-cli[html]" in info.value.hint


# -- PDF ------------------------------------------------------------------------------------

def test_pdf_pages_outline_and_running_lines(tmp_path: Path) -> None:
    path = tmp_path / "cold-chain.pdf"
    write_two_page_pdf(path)
    doc = parse(path)
    assert (doc.format, doc.unit, doc.title) == ("pdf", "page", "Cold Chain Manual")
    assert [s.titles for s in doc.sections] == [
        ("Cold Chain Manual",), ("Cold Chain Manual", "Loading the van"), ("Cold Chain Manual", "Temperature checks"),
    ]
    found = [(s.titles[-1], b.kind, b.text, b.start, b.end) for s in doc.sections for b in s.blocks]
    assert found == [
        ("Cold Chain Manual", "heading", "# Cold Chain Manual", 1, 1),
        ("Cold Chain Manual", "text", "Chilled goods stay between 0 and 5 degrees C from the dock to the door.", 1, 1),
        ("Loading the van", "heading", "## Loading the van", 1, 1),
        ("Loading the van", "text", "Frozen totes go in the rear compartment, which holds -18 degrees C.", 1, 1),
        ("Temperature checks", "heading", "## Temperature checks", 2, 2),
        ("Temperature checks", "text", "Drivers record the chiller reading at every fifth stop.", 2, 2),
        ("Temperature checks", "text", "A reading above 8 degrees C means the order is replaced, not delivered.", 2, 2),
    ]
    assert doc.dropped == 4  # the running header and the page number, on both pages
    chunks = chunk_document(doc, file_name="cold-chain.pdf").chunks
    assert [(c.title, c.unit, c.start, c.end) for c in chunks] == [("Cold Chain Manual", "page", 1, 2)]


def test_pdf_chapter_running_headers_go_and_lines_repeated_twice_stay(tmp_path: Path) -> None:
    # Each chapter's title heads its pages (a manual's running header); it is never on most pages, so
    # only its run over nearby pages tells it from text. A body line at the top of two nearby pages
    # (a reference repeating a parameter) is text.
    path = tmp_path / "manual.pdf"
    words = ["dock", "pallet", "van", "chiller", "door", "route", "driver"]
    pages = [[f"The {word} is checked at stop {n}.", f"Every {word} log is signed.", f"No {word} waits."]
             for n, word in enumerate(words, 1)]
    pages[4].insert(0, "len: the buffer length in bytes.")
    pages[5].insert(0, "len: the buffer length in bytes.")
    write_lines_pdf(path, pages, headers=["Chilled goods"] * 4 + ["Returns and refunds"] * 3)
    doc = parse(path)
    text = "\n".join(b.text for _, b in blocks(doc))
    assert "Chilled goods" not in text and "Returns and refunds" not in text
    assert text.count("len: the buffer length in bytes.") == 2
    assert all(f"No {word} waits." in text for word in words)
    assert doc.dropped == 7


def test_pdf_headers_that_carry_the_page_number_go_however_short_the_chapter(tmp_path: Path) -> None:
    # A manual's header names the chapter and ends with the printed page number; a chapter of one or
    # two pages never repeats its header enough to be found by repetition, but the number gives it away.
    path = tmp_path / "manual.pdf"
    pages = [["Cold Chain Manual"], ["Docks open at six.", "Bay 4 is for frozen goods."],
             ["Each pallet is wrapped.", "Wrap twice above 40"], ["Vans leave at seven."],
             ["Drivers log the chiller."], ["Routes are planned daily.", "Stop 9"]]
    headers = ["", "Chapter 1: Docks 2", "Chapter 1: Docks 3", "Chapter 2: Vans 4", "Chapter 3: Routes 5",
               "Chapter 3: Routes 6"]
    write_lines_pdf(path, pages, headers=headers, numbered=True)
    doc = parse(path)
    text = "\n".join(b.text for _, b in blocks(doc))
    assert "Chapter" not in text
    # an edge line ending in another number than its page's is text
    assert "Wrap twice above 40" in text and "Stop 9" in text and "Bay 4 is for frozen goods." in text
    assert doc.dropped == 11  # five headers and six page numbers


def test_pdf_headings_without_an_outline_are_read_from_their_type_size(tmp_path: Path) -> None:
    # A report with no bookmarks: its title and section headings are larger type on lines of their
    # own; they open sections, nested by size. A short line in body type, and a sentence in large
    # type, stay text.
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()

    def para(size: float, *lines: str, gap: float = 4) -> None:
        pdf.set_font("Helvetica", "", size)
        pdf.ln(gap)
        for text in lines:
            pdf.cell(0, size * 0.45, text, new_x="LMARGIN", new_y="NEXT")

    para(20, "Cold Chain Report", gap=0)
    para(11, "Chilled goods stay between 0 and 5 degrees C", "from the dock to the door.")
    para(14, "1 Loading the van", gap=8)
    para(11, "Frozen totes go in the rear compartment,", "which holds -18 degrees C.")
    para(11, "Stop 9")
    para(13, "Sub-zero checks", gap=6)
    para(11, "Drivers log the chiller at every stop", "and at the depot.")
    para(14, "Every reading above 8 degrees is reported.")
    para(14, "2 Returns", gap=8)
    para(11, "Spoiled goods are refunded", "within a week.")
    path = tmp_path / "report.pdf"
    pdf.output(str(path))
    found = [(titles[-1] if titles else "", b.text) for titles, b in blocks(parse(path))]
    depth = [len(titles) for titles, _ in blocks(parse(path))]
    assert found == [
        ("Cold Chain Report", "# Cold Chain Report"),
        ("Cold Chain Report", "Chilled goods stay between 0 and 5 degrees C\nfrom the dock to the door."),
        ("1 Loading the van", "## 1 Loading the van"),
        ("1 Loading the van", "Frozen totes go in the rear compartment,\nwhich holds -18 degrees C."),
        ("1 Loading the van", "Stop 9"),
        ("Sub-zero checks", "### Sub-zero checks"),
        ("Sub-zero checks", "Drivers log the chiller at every stop\nand at the depot."),
        ("Sub-zero checks", "Every reading above 8 degrees is reported."),
        ("2 Returns", "## 2 Returns"),
        ("2 Returns", "Spoiled goods are refunded\nwithin a week."),
    ], found
    assert depth == [1, 1, 2, 2, 2, 3, 3, 3, 2, 2]


def test_pdf_paper_headings_in_bold_and_no_sections_for_its_authors(tmp_path: Path) -> None:
    # A paper without bookmarks: bold lines at the body's size ("Abstract", "1.1 Frozen totes") are
    # headings below the larger sections; the authors' line, in larger type on the title page with no
    # prose under it, is text of the title's section; a paragraph led by a bold "Note:" is text.
    path = tmp_path / "paper.pdf"
    write_paper_pdf(path)
    found = [(" › ".join(titles), " ".join(b.text.split())) for titles, b in blocks(parse(path))]
    title, first = "Cold Chain Deliveries in Small Vans", "Cold Chain Deliveries in Small Vans › 1 Loading the van"
    assert found == [
        (title, "# Cold Chain Deliveries in Small Vans"),
        (title, "Alice Example and Bob Sample"),
        (title, "Department of Logistics, Example University"),
        (f"{title} › Abstract", "## Abstract"),
        (f"{title} › Abstract", PAPER_BODY),
        (first, "## 1 Loading the van"),
        (first, PAPER_BODY),
        (f"{first} › 1.1 Frozen totes", "### 1.1 Frozen totes"),
        (f"{first} › 1.1 Frozen totes", f"{PAPER_BODY} Note: totes wait in the shade."),
        (f"{title} › 2 Returns", "## 2 Returns"),
        (f"{title} › 2 Returns", PAPER_BODY),
    ], found


def test_pdf_bold_marks_no_heading_where_the_body_is_bold(tmp_path: Path) -> None:
    # A document set in bold throughout: bold says nothing, only the larger type heads sections.
    path = tmp_path / "bold.pdf"
    write_paper_pdf(path, bold_body=True)
    titles = {" › ".join(t) for t, _ in blocks(parse(path))}
    assert titles == {"Cold Chain Deliveries in Small Vans", "Cold Chain Deliveries in Small Vans › 1 Loading the van",
                      "Cold Chain Deliveries in Small Vans › 2 Returns"}, titles


def test_pdf_tex_accents_join_their_letters_and_roman_page_numbers_go(tmp_path: Path) -> None:
    # TeX sets an accent as a glyph before its letter (PDFium reads "M\u00a8oller"): one letter. A
    # front matter's page numbers are Roman ("ii" at the foot): furniture, like Arabic ones.
    path = tmp_path / "manual.pdf"
    write_lines_pdf(path, [["Nettle Manual", "Written by Niels M\u00a8oller and Micha\u00a8el Peeters.", "ii"],
                           ["Caf\u00b4e opening hours: 8 to 5, \u00a8 alone stays.", "iii"]])
    text = "\n".join(b.text for _, b in blocks(parse(path)))
    assert text.split("\n") == ["Nettle Manual", "Written by Niels M\u00f6ller and Micha\u00ebl Peeters.",
                                 "Caf\u00e9 opening hours: 8 to 5, \u00a8 alone stays."], text


def test_pdf_contents_and_index_entries_are_navigation(tmp_path: Path) -> None:
    # Entries with dot leaders and a page number (a table of contents, an index) and the index's
    # letter headings are no text; a sentence that trails off stays.
    path = tmp_path / "manual.pdf"
    write_lines_pdf(path, [
        ["Contents", "1 Loading the van . . . . . . . . . . . . 2", "2 Returns.............................. iv"],
        ["Frozen totes go in the rear compartment.", "Wait for the beep.... then close the door."],
        ["Index", "A", "allergens . . . . . . . . . 3", "F", "freezer . . . . . . . . . . . 2"],
    ])
    text = "\n".join(b.text for _, b in blocks(parse(path)))
    assert text.split("\n") == ["Contents", "Frozen totes go in the rear compartment.",
                                 "Wait for the beep.... then close the door.", "Index"], text


def test_pdf_outline_title_finds_its_numbered_heading_line(tmp_path: Path) -> None:
    # The outline says "Loading the van" where the page prints "1.2 Loading the van": the printed line
    # is the heading, not a second copy of it in the text.
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "", 11)
    pdf.cell(0, 6, "Vans are checked before loading.", new_x="LMARGIN", new_y="NEXT")
    pdf.start_section("Loading the van", level=0)
    pdf.cell(0, 6, "1.2 Loading the van", new_x="LMARGIN", new_y="NEXT")
    pdf.cell(0, 6, "Frozen totes go in the rear compartment.", new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "vans.pdf"
    pdf.output(str(path))
    found = [(titles, b.text) for titles, b in blocks(parse(path))]
    assert found[-2:] == [(("Loading the van",), "# Loading the van"),
                          (("Loading the van",), "Frozen totes go in the rear compartment.")]
    assert "Vans are checked before loading." in found[0][1]


@pytest.mark.parametrize(("lines", "expected"), [
    # The document's own words decide: it writes "encoding" and "--gen-suppressions" elsewhere.
    (["Libtasn1 does DER encod-", "ing of values. Encoding is fast.", "Use --gen-",
      "suppressions=yes and then --gen-suppressions=all."],
     ["DER encoding of values", "Use --gen-suppressions=yes"]),
    # Without a word elsewhere: a break inside a word that has a hyphen already keeps it (a compound,
    # an option); a plain word follows what the document did where it could tell, here split
    # syllables ("encoding" is written whole elsewhere).
    (["The day-to-", "day runs, the encod-", "ing step, and the pro-", "cessing step. Encoding is fast."],
     ["day-to-day runs", "the encoding step", "the processing step"]),
    # A document that breaks lines only at real hyphens ("pre-installed" is written whole elsewhere)
    # keeps them in plain words too.
    (["A pre-", "installed tool is a single-", "stage build. Each pre-installed tool is listed."],
     ["A pre-installed tool is a single-stage build"]),
])
def test_pdf_line_end_hyphens_follow_the_documents_own_words(
        tmp_path: Path, lines: list[str], expected: list[str]) -> None:
    path = tmp_path / "hyphens.pdf"
    write_lines_pdf(path, [lines])
    text = " ".join(b.text for _, b in blocks(parse(path)))
    assert "\ufffe" not in text
    for phrase in expected:
        assert phrase in text, text


def test_pdf_a_hyphen_that_ends_a_page_keeps_its_page_number_out(tmp_path: Path) -> None:
    """PDFium joins a page's last line, when it ends in a hyphen, to the page number below it:
    "--leak-check-1". The number is furniture; the hyphen waits for the next page."""
    path = tmp_path / "manual.pdf"
    write_lines_pdf(path, [["Leak checking is on by default.", "This is set independently of the option --leak-check-"],
                           ["heuristics, which takes a list."]], numbered=True)
    doc = parse(path)
    text = " ".join(b.text for _, b in blocks(doc))
    assert "--leak-check-1" not in text and "--leak-check-" in text and "\ufffe" not in text
    assert doc.dropped == 2  # both page numbers


def test_damaged_pdf_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"^bad\.pdf: cannot read the PDF .* — it is damaged"):
        parse(b"%PDF-1.7\nnot really", name="bad.pdf")


# -- plain text, detection, names -----------------------------------------------------------

def test_plain_text_paragraphs_and_underlined_headings() -> None:
    text = "NOTES\n=====\n\nFirst paragraph\nstill first.\n\n-----\n\nPart two\n--------\n\nSecond.\n"
    doc = parse(text, name="notes.txt")
    assert [(s.titles, [(b.kind, b.start, b.end) for b in s.blocks]) for s in doc.sections] == [
        (("NOTES",), [("heading", 1, 2), ("text", 4, 5)]),
        (("NOTES", "Part two"), [("heading", 9, 10), ("text", 12, 12)]),
    ]
    assert doc.dropped == 1
    assert [b.text for _, b in blocks(doc) if b.kind == "heading"] == ["# NOTES", "## Part two"]


def test_plain_text_heading_is_no_snippet_of_its_own_chunk() -> None:
    # A title underlined in a .txt file reads as a heading, as the other formats' titles do: the
    # snippet of the chunk it opens says what the text under it is, not the title once more.
    notes = ("Tool 1.2 Release Notes\n======================\n\n * The fetch command no longer\n"
             "   stops at a link that points nowhere, and it now says which link it skipped.\n")
    assert snippets(parse(notes, name="1.2.txt"), "1.2.txt") == [
        "Tool 1.2 Release Notes: The fetch command no longer stops at a link that points nowhere, and it now says which link it…"]
    page = "tool(1)\n=======\n\nDESCRIPTION\n-----------\nSubtrees let a project hold another.\n"
    assert snippets(parse(page, name="tool.txt"), "tool.txt") == [
        "DESCRIPTION: Subtrees let a project hold another."]


def test_outline_news_stars_open_nested_sections() -> None:
    # GNU NEWS files are Emacs outlines: ``*`` lines are headings, nested by their stars; the mode
    # line is markup, the title before it text. A starred entry that wraps stays text of its section.
    news = ("Quokka NEWS                                  -*- outline -*-\n\n"
            "* Noteworthy changes in release 2.4 (2026-03-01)\n\n** Bug fixes\n\n"
            "  The census no longer counts a quokka twice.\n\n** New features\n\n"
            "*** Island maps\n\n  quokka --map draws the island.\n\n"
            "* Noteworthy changes in release 2.3 (2025-11-02)\n\n"
            "** The census now skips wallabies and no longer\n   stops at a rock.\n")
    doc = parse(news, name="NEWS")
    assert [(s.titles, [(b.kind, b.start, b.end) for b in s.blocks]) for s in doc.sections] == [
        ((), [("text", 1, 1)]),
        (("Noteworthy changes in release 2.4 (2026-03-01)",), [("heading", 3, 3)]),
        (("Noteworthy changes in release 2.4 (2026-03-01)", "Bug fixes"), [("heading", 5, 5), ("text", 7, 7)]),
        (("Noteworthy changes in release 2.4 (2026-03-01)", "New features"), [("heading", 9, 9)]),
        (("Noteworthy changes in release 2.4 (2026-03-01)", "New features", "Island maps"),
         [("heading", 11, 11), ("text", 13, 13)]),
        (("Noteworthy changes in release 2.3 (2025-11-02)",), [("heading", 15, 15), ("text", 17, 18)]),
    ]
    assert doc.sections[0].blocks[0].text == "Quokka NEWS"
    assert doc.sections[4].blocks[0].text == "### Island maps"


@pytest.mark.parametrize("name", ["create-user.rst", "create-user.md"])
def test_a_bold_paragraph_that_reads_as_a_heading_opens_a_section_a_level_down(name: str) -> None:
    """``**Example 2: To create a user**`` heads the example under it; a bold sentence, a lead-in
    ending in a colon, an admonition name and a bold line right above a real heading stay labels."""
    rst = name.endswith(".rst")
    head = "Users\n=====\n\n" if rst else "# Users\n\n"
    sub = "Groups\n------\n\n" if rst else "## Groups\n\n"
    text = (f"{head}Intro.\n\n**Example 1: To create a user**\n\nRun create.\n\n**Note**\n\nCareful.\n\n"
            "**Output:**\n\nSome output.\n\n**Never run this as root.**\n\nIt breaks.\n\n"
            f"**Example 2: To list users**\n\nRun list.\n\n**Groups**\n\n{sub}Group text.\n")
    doc = parse(text, name=name)
    assert [s.titles for s in doc.sections] == [
        ("Users",), ("Users", "Example 1: To create a user"), ("Users", "Example 2: To list users"),
        ("Users", "Groups")]
    kinds = [(b.kind, b.text) for s in doc.sections[1:3] for b in s.blocks]
    assert kinds[0] == ("heading", "## Example 1: To create a user")
    assert [k for k, t in kinds if "Note" in t or "Output" in t or "root" in t or "Groups" in t] == [
        "label", "label", "label", *(["label"] if not rst else [])]  # reST drops a label its heading repeats


def test_sphinx_navigation_sections_leave_no_heading_behind() -> None:
    """sphinx-quickstart's "Indices and tables" (links to the generated index and search pages) and a
    section holding only a toctree are navigation: no text, and no heading joining a neighbour's chunk.
    An empty section whose heading stands over nothing dropped keeps it (context for the next)."""
    page = ("Tool\n====\n\nTool does things.\n\nContents\n--------\n\n.. toctree::\n\n   usage\n\n"
            "Empty\n-----\n\nSame level\n----------\n\nMore text.\n\n"
            "Indices and tables\n==================\n\n* :ref:`genindex`\n* :ref:`modindex`\n* :ref:`search`\n")
    doc = parse(page, name="index.rst")
    assert [s.titles for s in doc.sections] == [("Tool",), ("Tool", "Empty"), ("Tool", "Same level")]
    kept = parse("Links\n=====\n\n* :ref:`genindex`\n* `Home <https://example.org>`_\n", name="a.rst")
    assert "genindex" in blocks(kept)[-1][1].text  # a list with other links too is the page's own


def test_a_target_after_an_include_at_a_pages_end_is_dropped_quietly(tmp_path: Path) -> None:
    """CMake's policy pages end with an include and a link target: the target's line lies past the
    page's own lines (the included text came in between); dropping it must not read past them."""
    (tmp_path / "DEPRECATED.txt").write_text(".. note::\n  The old behavior\n  may be removed.\n")
    (tmp_path / "CMP.rst").write_text("CMP\n---\n\nText.\n\n.. include:: DEPRECATED.txt\n\n"
                                      ".. _`Hedley`: https://example.org/\n")
    doc = parse(tmp_path / "CMP.rst")
    assert [b.text for _, b in blocks(doc)][:2] == ["# CMP", "Text."]


@pytest.mark.parametrize("name", ["put-policy.rst", "put-policy.md"])
def test_a_bold_heading_right_under_another_goes_a_level_below_it(name: str) -> None:
    """``**To set a policy**`` directly over ``**Example 1: …**``: the examples are parts of it."""
    page = ("**To set a policy**\n\n**Example 1: To deny publishers**\n\nRun deny.\n\n"
            "**Example 2: To load a file**\n\nRun load.\n")
    assert [s.titles for s in parse(page, name=name).sections] == [
        ("To set a policy",), ("To set a policy", "Example 1: To deny publishers"),
        ("To set a policy", "Example 2: To load a file")]


def test_a_leading_title_field_titles_an_rst_page_without_a_heading() -> None:
    """``:title: AWS CLI Return Codes`` (Pelican's and many doc sites' metadata) titles the page's
    chunks instead of its file name; the field list stays out of the text."""
    page = ":title: Quokka Return Codes\n:category: General\n\nThese are the codes.\n\n* ``0`` -- it worked.\n"
    doc = parse(page, name="return-codes.rst")
    assert doc.title == "Quokka Return Codes"
    assert [b.text for _, b in blocks(doc)] == ["These are the codes.", "- `0` -- it worked."]
    assert parse(":orphan:\n\nText.\n", name="a.rst").title == ""
    assert parse("Text.\n\n:title: Late\n", name="a.rst").title == ""  # a field list later is text


def test_emacs_file_variables_are_no_text() -> None:
    # a mode line of any mode, and a Local Variables list at the end, prefixed or not, are editor settings
    news = ("GNU quokka NEWS    -*-indented-text-*-\n\nVersion 2.4 counts twice as fast.\n\n"
            "Copying is permitted.\n\n----------------\nLocal variables:\nversion-control: never\n"
            "fill-column: 72\nEnd:\n")
    doc = parse(news, name="NEWS")
    assert [(b.text, b.start) for _, b in blocks(doc)] == [
        ("GNU quokka NEWS", 1), ("Version 2.4 counts twice as fast.", 3), ("Copying is permitted.", 5)]
    readme = "#!/bin/sh\n# -*- coding: utf-8 -*-\nRun it.\n\n# Local Variables:\n# mode:org\n# End:\n"
    assert [b.text for _, b in blocks(parse(readme, name="README"))] == ["#!/bin/sh", "Run it."]
    # not a list: a line without the prefix inside it, no End:, or too far from the end
    kept = "Notes.\n\n# Local Variables:\nmode: org\n# End:\n"
    assert "Local Variables" in blocks(parse(kept, name="README"))[-1][1].text
    assert "Local Variables" in blocks(parse("Notes.\n\nLocal Variables:\nmode: text\n", name="README"))[-1][1].text
    far = "Local Variables:\nmode: text\nEnd:\n\n" + "A long paragraph of text. " * 200
    assert "Local Variables" in blocks(parse(far, name="README"))[0][1].text


def test_outline_levels_rank_by_first_appearance() -> None:
    # GDB's NEWS heads its versions ``***`` and their topics ``*`` under them, among starred entries
    # that wrap or stand in a row (no mode line: most ``***`` lines read as headings)
    news = ("\t\tWhat has changed in GDB?\n\n*** Changes in GDB 13\n\n"
            "* MI version 1 is deprecated.\n\n* GDB now supports dumping memory\n  tag data.\n\n"
            "* New commands\n\nmaintenance info frame-unwinders\n  List the frame unwinders.\n\n"
            "*** Changes in GDB 12\n\n* DBX mode has been removed.\n")
    assert [s.titles for s in parse(news, name="NEWS").sections] == [
        (), ("Changes in GDB 13",), ("Changes in GDB 13", "New commands"), ("Changes in GDB 12",)]


def test_plain_text_star_bullets_stay_text() -> None:
    # ``* item`` lines of a list come in runs, or stand apart as siblings: no heading, however many
    readme = ("Quokka\n======\n\nFeatures:\n\n* Counts quokkas\n* Draws island maps\n* Skips wallabies\n\n"
              "Install it with make.\n\nLimits\n------\n\n* No boats\n\n* No night counts\n\n"
              "Ask the rangers.\n\n* Tide tables wrap onto\n  a second line\n\nMore prose.\n")
    doc = parse(readme, name="README")
    assert [s.titles for s in doc.sections] == [("Quokka",), ("Quokka", "Limits")]
    assert [b.text for _, b in blocks(doc) if b.kind == "heading"] == ["# Quokka", "## Limits"]
    assert "* Skips wallabies" in doc.sections[0].blocks[2].text
    # ... and in an outline, its headings stand alone above their text, its lists' items do not
    outline = ("Quokka  -*- outline -*-\n\n* Features\n\nQuokka does three things:\n\n* Counts quokkas\n* Draws island maps\n"
               "* Skips wallabies\n\n* Limits\n\nIt does not go:\n\n* No boats\n\n* No night counts\n\nAsk the rangers.\n")
    doc = parse(outline, name="README")
    assert [(s.titles, [b.kind for b in s.blocks]) for s in doc.sections] == [
        ((), ["text"]), (("Features",), ["heading", "text", "text"]),
        (("Limits",), ["heading", "text", "text", "text", "text"])]


@pytest.mark.parametrize(("name", "expected"), [
    ("README.Debian", "text"), ("NEWS.Debian.gz", "text"), ("README.source", "text"),
    ("README.Debian.amd64.gz", "text"), ("doc/README.md", "markdown"), ("README.html", "html"),
    ("README.py", None), ("NEWS.yml", None), ("README.tar.gz", None), ("NEWS.bz2", None),
    ("ChangeLog.Debian", None), ("README.", None),
])
def test_plain_text_names_with_a_suffix_that_is_no_format(name: str, expected: str | None) -> None:
    assert detect_format(name) == expected
    assert plain_text_name(name) is (expected == "text")


@pytest.mark.parametrize(("name", "content_type", "head", "expected"), [
    ("guide.rst.txt", None, None, "rst"),
    ("guide.md.txt", None, None, "markdown"),
    ("page.htm", None, None, "html"),
    ("page.HTML", None, None, "html"),
    ("notes.txt", None, None, "text"),
    ("v1.2.notes.txt", None, None, "text"),
    ("manual.pdf", None, None, "pdf"),
    ("download", "application/pdf", None, "pdf"),
    ("export.txt", "text/html; charset=utf-8", None, "html"),
    ("saved.txt", None, b"\n<!DOCTYPE html><html><body>x</body></html>", "html"),
    ("scan.bin", None, b"%PDF-1.7\n", "pdf"),
    # reStructuredText saved as .txt (Django's docs): two directives or roles say so ...
    ("models.txt", None, b"Models\n======\n\n.. module:: db.models\n\nSee :class:`Model`.\n", "rst"),
    ("fields.txt", "text/plain", b"Fields\n======\n\nUse :attr:`null` and :attr:`blank`.\n", "rst"),
    # ... one alone, dots, colons and backquotes of plain prose do not.
    ("todo.txt", None, b"TODO\n====\n\n.. and then: ratio 1:2, the `quoted` word.\n", "text"),
    ("mail.txt", None, b"Re: :role:`once` in a mail.\n\nRegards .. J.\n", "text"),
    ("page.md", None, b"See :func:`a` and :func:`b`.\n", "markdown"),
    # an overlined title (Django's index and release-note pages: a title and a toctree), inline
    # literals, a paragraph ending '::' before its indented code
    ("index.txt", None, b"=============\nAPI Reference\n=============\n\n.. toctree::\n\n   models\n", "rst"),
    ("views.txt", None, b"Views\n=====\n\nUse ``TemplateView`` or ``View``.\n", "rst"),
    ("notes.txt", None, b"Notes\n\nWe'll be using these models::\n\n    class A: pass\n\n.. note:: x\n", "rst"),
    # AsciiDoc's listing delimiters are no overline: shorter than what they enclose
    ("git-contacts.txt", None, b"------------\n$ git contacts feature/*.patch\n------------\n", "text"),
    # AsciiDoc saved as .txt (man pages, older projects' docs): two kinds of its markup say so, a
    # block style and a project's own inline macro, a header's attribute entries, an include and a
    # listing after its block attributes (tried before reST: a one-line listing is an overline) ...
    ("tool-sync.txt", None, b"tool-sync(1)\n============\n\nSYNOPSIS\n--------\n[verse]\n'tool sync' <dir>\n\n"
                            b"Set it up with linkman:tool-config[5].\n", "asciidoc"),
    ("guide.txt", None, b"= Guide\nJane Doe <jane@example.com>\n:toc:\n\nText.\n", "asciidoc"),
    ("build.txt", None, b"Build\n=====\n\ninclude::common.txt[]\n\n[source,sh]\n----\nmake\n----\n", "asciidoc"),
    # ... one rule and a footnote mark are plain text; field lists over an overlined title are reST
    ("essay.txt", None, b"Essay\n=====\n\nA claim [1].\n\n----\n\n[1] A source, p. 4.\n", "text"),
    ("intro.txt", None, b":orphan:\n:tocdepth: 2\n\n=====\nIntro\n=====\n\n.. note:: Read me.\n", "rst"),
    ("archive.zip", None, None, None),
    ("data.jsonl", None, None, None),
])
def test_detect_format(name: str, content_type: str | None, head: bytes | None, expected: str | None) -> None:
    assert detect_format(name, content_type=content_type, head=head) == expected


@pytest.mark.parametrize(("file_name", "shown"), [
    ("docs/library/os.path.rst.txt", "os.path"),
    ("faq-billing.md", "faq-billing"),
    ("Runbook_DB.failover.HTML", "Runbook_DB.failover"),
    ("camelCaseGuide.md.txt", "camelCaseGuide"),
    ("report.pdf", "report"),
    ("tickets.jsonl", "tickets"),
    ("README", "README"),
    (".md", ".md"),
    # a file named for its role in its folder is named with the folder (22 npm packages' README.md)
    ("readmes/nopt/README.md", "nopt README"),
    ("pkg/CHANGELOG.md", "pkg CHANGELOG"),
    ("docs/readme-first.md", "readme-first"),
])
def test_display_name_strips_document_extensions_and_keeps_case(file_name: str, shown: str) -> None:
    assert display_name(file_name) == shown


def test_an_html_page_that_redirects_at_once_is_a_pointer_with_nothing_to_index() -> None:
    """Book and site generators leave a stub at each moved page's old address: ``<meta
    http-equiv="refresh" content="0; URL=…">`` and "Redirecting to…". A browser never shows it, so
    it is no content; a page that only reloads itself (no address) is."""
    from knowtology_cli.parsers.html import parse_html

    stub = ('<html><head><title>Redirecting...</title><META HTTP-EQUIV="Refresh" CONTENT="0;URL=\'./vec/vec.html\'">'
            '</head><body><p>Redirecting to... <a href="./vec/vec.html">./vec/vec.html</a>.</p></body></html>')
    page = parse_html(stub)
    assert (page.redirect, page.sections, page.title) == ("./vec/vec.html", (), "Redirecting...")
    for content in ("0", "5", "300"):
        live = parse_html(f'<meta http-equiv="refresh" content="{content}"><p>Queue length is 4 orders.</p>')
        assert live.redirect == "" and "Queue length" in live.sections[0].blocks[0].text, content


def test_an_html_page_that_redirects_after_a_delay_is_a_pointer_too() -> None:
    """A built Sphinx site (pip's docs) keeps ``<meta http-equiv="refresh" content="3; url=…">`` over
    "This page has moved" at a moved page's old address: a browser and a crawler go there after the
    delay, so it is a redirect whatever the delay, as a reST source's refresh is."""
    from knowtology_cli.parsers.html import parse_html

    stub = ('<html><head><title>This page has moved</title>'
            '<meta http-equiv="refresh" content="3; url=../../cli/pip_install/"></head><body><main>'
            '<h1>This page has moved</h1><p>You should be redirected automatically in 3 seconds. If that '
            'didn\'t work, here\'s a link: <a href="../../cli/pip_install/">pip install</a></p></main></body></html>')
    page = parse_html(stub, name="pip/reference/pip_install.html")
    assert (page.redirect, page.sections, page.title) == ("../../cli/pip_install/", (), "This page has moved")
    for content in ("30; url=next.html", "5,https://example.com/new/", "0; url=/new/"):
        moved = parse_html(f'<meta http-equiv="refresh" content="{content}"><p>Moved.</p>', name="site/old.html")
        assert moved.redirect and moved.sections == (), content
    # the first refresh a browser can read decides; one it cannot read is passed over
    assert parse_html('<meta http-equiv="refresh" content="soon"><meta http-equiv="refresh" '
                      'content="2; url=new.html"><p>Moved.</p>').redirect == "new.html"


@pytest.mark.parametrize(("name", "head"), [
    ("ops/status.html", '<meta http-equiv="refresh" content="300">'),
    ("ops/status.html", '<meta http-equiv="refresh" content="300; url=status.html">'),
    ("ops/status.html", '<meta http-equiv="refresh" content="60; URL=\'../ops/./status.html?auto=1\'">'),
    ("ops/status.html", '<meta http-equiv="refresh" content="60; url=#queue">'),
    ("ops/status/index.html", '<meta http-equiv="refresh" content="60; url=./">'),
    ("ops/status.html.gz", '<meta http-equiv="refresh" content="60; url=status.html">'),
    ("ops/status/index.html", '<meta http-equiv="refresh" content="0; url=../status/">'),
    ("ops/status.html", '<link rel="canonical" href="https://ops.example.com/status.html">'
                        '<meta http-equiv="refresh" content="120; url=https://ops.example.com/status.html">'),
    ("ops/status.html", '<link rel="canonical" href="https://ops.example.com/status.html">'
                        '<meta http-equiv="refresh" content="120; url=/status.html">'),
])
def test_an_html_page_that_refreshes_itself_is_content(name: str, head: str) -> None:
    """A status page that reloads itself on a timer — no address, or its own address however written
    (relative, with a query or fragment, its folder for an index page, its canonical URL) — is real
    content and stays indexed."""
    from knowtology_cli.parsers.html import parse_html

    page = parse_html(f"<html><head>{head}</head><body><p>Queue length is 4 orders.</p></body></html>", name=name)
    assert page.redirect == "" and "Queue length" in page.sections[0].blocks[0].text


def test_html_nested_list_text_is_said_once() -> None:
    """A list item holding a list (with the usual newline after it) repeated the nested items in its
    own line: generated sites (mdBook, Sphinx) write every list that way."""
    from knowtology_cli.parsers.html import parse_html

    page = parse_html("<main><ul>\n<li>Things drop at other times.\n<ul>\n<li>cargo fix inserts a let.</li>\n</ul>\n"
                      "</li>\n<li><p>Third</p><ol><li>deep</li></ol> and after</li>\n</ul></main>")
    assert page.sections[0].blocks[0].text == (
        "- Things drop at other times.\n  - cargo fix inserts a let.\n- Third\n  1. deep\n  and after")


def test_html_list_items_and_definitions_keep_their_paragraphs_code_and_lists_in_place() -> None:
    """Reference pages put whole sections inside a list item or a definition (npm's flag lists,
    DocBook's option lists): paragraphs stay lines, code keeps its lines, nested lists their place."""
    from knowtology_cli.parsers.html import parse_html

    page = parse_html(
        "<main><ul><li><p>Some flags:</p><ul><li>-P</li></ul><p>Two more:</p><ul><li>-E</li></ul>"
        "<p>On success:</p><pre>diff --git a/x b/x\nindex 1..2</pre></li></ul>"
        "<dl><dt>--opt</dt><dd><p>First.</p><pre>a\n  b</pre><p>Second.</p></dd></dl></main>")
    items, definitions = (b.text for b in page.sections[0].blocks)
    assert items.split("\n") == ["- Some flags:", "  - -P", "  Two more:", "  - -E", "  On success:",
                                  "  ```", "  diff --git a/x b/x", "  index 1..2", "  ```"]
    assert definitions.split("\n") == ["--opt:", "  First.", "  ```", "  a", "    b", "  ```", "  Second."]


def test_html_chunks_cut_from_one_long_list_cite_their_own_lines() -> None:
    """A reference page's option list is one block over hundreds of source lines; each chunk cut
    from it cites the lines its own items are on, not the block's first lines."""
    items = "".join(f"<li>\n<p>Option{n} sets the {n}th limit.\n  " + "It is checked at every step. " * 12
                    + "</p>\n</li>\n" for n in range(40))
    page = f"<html><body><main>\n<h1>Options</h1>\n<ul>\n{items}</ul>\n</main></body></html>\n"
    source = page.split("\n")
    chunks = chunk_document(parse(page.encode(), name="options.html"), file_name="options.html").chunks
    assert len(chunks) >= 3
    for chunk in chunks[1:]:  # its first item starts on the cited line or within the item it was cut in
        first = next(w for w in chunk.text.replace("-", " ").split() if w.startswith("Option"))
        line = next(i for i, text in enumerate(source, 1) if f"<p>{first} " in text)
        assert chunk.start <= line <= chunk.start + 4 and chunk.end >= line, (chunk.start, line, chunk.end)


def test_html_text_laid_out_with_breaks_keeps_its_indents_and_blank_lines() -> None:
    """DocBook renders READMEs and release notes as literallayout: <br> and &nbsp; carry the shape."""
    from knowtology_cli.parsers.html import parse_html

    page = parse_html("<main><div class='literallayout'><p>Building:<br>\n&nbsp;&nbsp;0.&nbsp;Clone the code.<br>"
                      "<br>\n&nbsp;&nbsp;1.&nbsp;Run make.<br></p></div><p>Plain\n   prose.</p></main>")
    assert [b.text for b in page.sections[0].blocks] == [
        "Building:\n  0. Clone the code.\n\n  1. Run make.", "Plain prose."]


def test_html_link_rich_prose_stays_and_link_lists_go() -> None:
    """Readability's link-density rule is for menus: a sentence with three links is prose, and a
    container whose paragraph is prose keeps it while its own link list goes; a definition list of
    links (an FAQ's list of questions) is a link list too."""
    from knowtology_cli.parsers.html import parse_html

    page = parse_html(
        "<main><p>See <a href='i'>npm install</a>, <a href='c'>npm ci</a> and <a href='u'>npm update</a> for details.</p>"
        "<div><p>This guide explains how to install the tool.</p>"
        "<ul><li><a href='a'>Alpha</a></li><li><a href='b'>Beta</a></li><li><a href='g'>Gamma</a></li></ul></div>"
        "<div><p><a href='h'>Home</a></p><p><a href='o'>About</a></p><p><a href='t'>Contact</a></p></div>"
        "<dl><dt><a href='#q1'>1. Background</a></dt><dd><a href='#q11'>1.1. How is it said?</a></dd>"
        "<dd><a href='#q12'>1.2. Where is it from?</a></dd></dl></main>")
    text = [b.text for s in page.sections for b in s.blocks]
    assert text == ["See npm install, npm ci and npm update for details.", "This guide explains how to install the tool."]


def test_html_a_heading_left_with_nothing_under_it_goes() -> None:
    """npm's pages end with "See Also" over a link list: once the list goes as furniture, the heading
    alone closed a chunk. A heading the cleaning left with neither text nor a subsection is dropped,
    and so is a parent whose only subsection was such a heading; a heading that had nothing under it
    in the page itself (Node's first of two signatures of one function) stays, as in Markdown."""
    from knowtology_cli.parsers.html import parse_html

    page = parse_html("<main><h1>npm-ci</h1><p>Clean install.</p><h2>Empty</h2><h3>Nothing</h3>"
                      "<h2>Notes</h2><p>Kept.</p><h2>Related</h2><h3>See Also</h3>"
                      "<ul><li><a href='a'>npm install</a></li><li><a href='b'>npm update</a></li>"
                      "<li><a href='c'>npm audit</a></li></ul></main>")
    assert [b.text for s in page.sections for b in s.blocks] == [
        "# npm-ci", "Clean install.", "## Empty", "### Nothing", "## Notes", "Kept."]
    assert page.dropped == 3  # the link list and the two headings over nothing but it


def test_html_api_reference_lists_marks_and_example_variants() -> None:
    """Node.js's rendered API pages: a parameter list (each item a name and its type links) and a
    list a sentence introduces are content, not menus; a heading's permalink mark (``#``, ``¶``) and
    ``[src]`` link are no part of its title; CommonJS and ES-module variants sharing one ``<pre>``
    stay apart."""
    from knowtology_cli.parsers.html import parse_html

    page = parse_html(
        "<main><h3>assert(value[, message])<span><a class='mark' href='#assert'>#</a></span></h3>"
        "<ul><li><code>value</code> <a class='type' href='t1'>&lt;any&gt;</a></li>"
        "<li><code>message</code> <a class='type' href='t2'>&lt;string&gt;</a> | <a href='t3'>&lt;Error&gt;</a></li>"
        "<li><code>depth</code> <a class='type' href='t4'>&lt;integer&gt;</a></li></ul>"
        "<h2>Class: Hash<a class='srclink' href='https://x/hash.js'>[src]</a><a href='#hash'>¶</a></h2>"
        "<p>Examples of readable streams include:</p>"
        "<ul><li><a href='http.html#a'>HTTP responses</a></li><li><a href='fs.html#b'>fs read streams</a></li>"
        "<li><a href='zlib.html#c'>zlib streams</a></li></ul>"
        "<pre><code class='language-js cjs'>const a = require('a');\n</code>"
        "<code class='language-js mjs'>import a from 'a';</code></pre>"
        "<nav><ul><li><a href='a'>Home</a></li><li><a href='b'>About</a></li><li><a href='c'>Blog</a></li></ul></nav>"
        "<ul><li><a href='a'>Next</a></li><li><a href='b'>Prev</a></li><li><a href='c'>Index</a></li></ul></main>")
    text = [b.text for s in page.sections for b in s.blocks]
    assert text == [
        "### assert(value[, message])",
        "- `value` <any>\n- `message` <string> | <Error>\n- `depth` <integer>",
        "## Class: Hash",
        "Examples of readable streams include:",
        "- HTTP responses\n- fs read streams\n- zlib streams",
        "```js\nconst a = require('a');\n\nimport a from 'a';\n```",
    ]
    assert page.sections[-1].titles == ("Class: Hash",)


def test_html_docbook_navigation_bars_go_and_a_table_of_names_and_addresses_stays() -> None:
    """DocBook's stylesheets put Prev/Home/Next tables in ``navheader``/``navfooter`` divs: furniture.
    A section holding a table whose rows are names with their e-mail links is content, although
    links are most of its text; a ``&#13;`` line end in code is no stray character."""
    from knowtology_cli.parsers.html import parse_html

    rows = "".join(f"<tr><td>&#13;{name} <code>&lt;<a href='mailto:{mail}'>{mail}</a>&gt;</code></td></tr>"
                   for name, mail in (("Ada Byron", "ada at example.org"), ("Alan Turing", "alan at example.org"),
                                      ("Grace Hopper", "grace at example.org")))
    page = parse_html(
        "<body><div class='NAVHEADER'><table><tr><th colspan='3'>Spec</th></tr><tr><td><a href='a.html'>Prev</a></td>"
        "<td></td><td><a href='c.html'>Next</a></td></tr></table></div>"
        f"<div class='sect1'><h1>3. Contributors</h1><p></p><table>{rows}</table>"
        "<pre>&#13;\n&lt;mime-info&gt;&#13;\n</pre></div>"
        "<div class='NAVFOOTER'><table><tr><td><a href='a.html'>Prev</a></td><td><a href='i.html'>Home</a></td>"
        "<td><a href='c.html'>Next</a></td></tr></table></div></body>")
    text = [b.text for s in page.sections for b in s.blocks]
    assert text == ["# 3. Contributors",
                    "| Ada Byron `<ada at example.org>` |\n| Alan Turing `<alan at example.org>` |\n"
                    "| Grace Hopper `<grace at example.org>` |",
                    "```\n<mime-info>\n```"]


def test_html_texinfo_navigation_bars_and_index_letter_bars_go() -> None:
    """Texinfo's pages open and close with "Next: …, Up: … [Index]" (makeinfo 6 in ``div.header``,
    7 in ``div.nav-panel``): links that name their relation to the page (``rel="next"``) and labels,
    a navigation bar by HTML's link types; an index's "Jump to: A W" bar jumps to letters on the
    page. Both go; a sentence linking on with ``rel="next"``, a term with its permalink and an item
    with its footnote's mark (one in-page link of one character: no bar) stay."""
    from knowtology_cli.parsers.html import parse_html

    # makeinfo 6 (libffi's manual): the header div, an index's letter bar and entries
    six = parse_html(
        "<html><head><meta name='Generator' content='makeinfo'><title>Types (Widgets)</title></head><body lang='en'>"
        "<div class='section' id='Types'><div class='header'><p>\nNext: <a href='Calls.html' accesskey='n' rel='next'>"
        "Calls</a>, Up: <a href='index.html' accesskey='u' rel='up'>Widgets</a> &nbsp; [<a href='Index.html' "
        "title='Index' rel='index'>Index</a>]</p>\n</div>\n<hr>\n<span id='Types-1'></span><h3 class='section'>2.1 Types</h3>\n"
        "<p>A widget has a type; see <a href='Calls.html' rel='next'>Calls</a> for how to use it.</p>\n"
        "<dl compact='compact'>\n<dt><code>wt_int</code><a class='copiable-anchor' href='#index-wt_005fint'> &para;</a></dt>"
        "<dd><p>An integer.</p></dd>\n</dl>\n<ul><li><code>wt_big</code><sup><a href='#fn1'>1</a></sup></li></ul>\n"
        "<table><tr><th valign='top'>Jump to: &nbsp; </th><td><a class='summary-letter' href='#Index_cp_letter-A'><b>A</b>"
        "</a>\n &nbsp; \n<a class='summary-letter' href='#Index_cp_letter-T'><b>T</b></a>\n &nbsp; \n"
    "<a class='summary-letter' href='#Index_cp_letter-W'><b>W</b></a>\n &nbsp; \n</td></tr></table>\n"
        "<hr>\n<div class='header'><p>\nNext: <a href='Calls.html' accesskey='n' rel='next'>Calls</a> &nbsp; "
        "[<a href='Index.html' title='Index' rel='index'>Index</a>]</p>\n</div>\n</div></body></html>")
    assert [(b.kind, b.text) for s in six.sections for b in s.blocks] == [
        ("heading", "### 2.1 Types"), ("text", "A widget has a type; see Calls for how to use it."),
        ("list", "`wt_int`:\n  An integer."), ("list", "- `wt_big`1")]
    seven = parse_html(
        "<html><head><meta name='Generator' content='texi2any'></head><body lang='en'>"
        "<div class='appendix-level-extent' id='Index'><div class='nav-panel'><p>\nPrevious: <a href='Calls.html' "
        "accesskey='p' rel='prev'>Calls</a>, Up: <a href='index.html' accesskey='u' rel='up'>Widgets</a> &nbsp; "
        "[<a href='index.html#SEC_Contents' title='Table of contents' rel='contents'>Contents</a>]"
        "[<a href='#Index' title='Index' rel='index'>Index</a>]</p>\n</div>\n<h2 class='appendix' id='Index-1'>"
        "<span>Index<a class='copiable-link' href='#Index-1'> &para;</a></span></h2>\n<p>Every widget term.</p>\n"
        "<div class='printindex cp-printindex'>\n<table class='cp-letters-header-printindex'><tr><th>Jump to: &nbsp; </th>"
        "<td><a class='summary-letter-printindex' href='#Index_cp_symbol-1'><b>-</b></a>\n &nbsp; \n<br>\n"
        "<a class='summary-letter-printindex' href='#Index_cp_letter-A'><b>A</b></a>\n &nbsp; \n"
        "<a class='summary-letter-printindex' href='#Index_cp_letter-W'><b>W</b></a>\n &nbsp; \n</td></tr></table>\n"
        "<table class='cp-entries-printindex' border='0'>\n<tr><td></td><th class='entries-header-printindex'>Index Entry"
        "</th><th class='sections-header-printindex'>Section</th></tr>\n<tr><td colspan='3'><hr></td></tr>\n"
        "<tr><th id='Index_cp_letter-A'>A</th></tr>\n<tr><td></td><td class='printindex-index-entry'><a href='Types.html#index-a'>"
        "alignment</a></td><td class='printindex-index-section'><a href='Types.html'>Types</a></td></tr>\n"
        "<tr><th id='Index_cp_letter-W'>W</th></tr>\n<tr><td></td><td class='printindex-index-entry'><a href='Types.html#index-w'>"
        "width</a></td><td class='printindex-index-section'><a href='Types.html'>Types</a></td></tr>\n"
        "</table>\n</div></div></body></html>")
    assert [(b.kind, b.text) for s in seven.sections for b in s.blocks] == [
        ("heading", "## Index"), ("text", "Every widget term.")]


#: A rustdoc page in miniature, its markup as rustdoc writes it (classes, nesting), its words made up.
RUSTDOC_PAGE = (
    "<!DOCTYPE html><html><head><meta name='generator' content='rustdoc'><title>Tally in kit - Rust</title></head>"
    "<body><nav class='sidebar'><ul><li><a href='#method.new'>new</a></li></ul></nav><main>"
    "<section id='main-content' class='content'><div class='main-heading'>"
    "<h1>Struct <span class='struct'>Tally</span>&nbsp;<button id='copy-path'>Copy item path</button></h1>"
    "<span class='sub-heading'><span class='since'>1.2.0</span> · <a class='src' href='../src/t.rs.html#3'>Source</a>"
    "</span></div>"
    "<pre class='rust item-decl'><code>pub struct Tally&lt;T&gt;<div class='where'>where\n"
    "    T: <a class='trait' href='trait.Count.html'>Count</a>,</div>{ /* private fields */ }</code></pre>"
    "<details class='toggle top-doc' open><summary class='hideme'><span>Expand description</span></summary>"
    "<div class='docblock'><p>A running count.</p></div></details>"
    "<h2 id='implementations' class='section-header'>Implementations"
    "<a href='#implementations' class='anchor'>§</a></h2>"
    "<details class='toggle implementors-toggle' open><summary><section id='impl-Tally' class='impl'>"
    "<a class='src rightside' href='../src/t.rs.html#9'>Source</a><a href='#impl-Tally' class='anchor'>§</a>"
    "<h3 class='code-header'>impl&lt;T&gt; <a class='struct' href='struct.Tally.html'>Tally</a>&lt;T&gt;</h3>"
    "</section></summary><div class='impl-items'>"
    "<details class='toggle method-toggle' open><summary><section id='method.new' class='method'>"
    "<span class='rightside'><span class='since'>1.2.0</span> · <a class='src' href='../src/t.rs.html#11'>Source</a>"
    "</span><h4 class='code-header'>pub fn <a href='#method.new' class='fn'>new</a>() -&gt; Self</h4></section>"
    "</summary><div class='docblock'><p>Makes an empty tally.</p>"
    "<h5 id='examples'><a class='doc-anchor' href='#examples'>§</a>Examples</h5>"
    "<div class='example-wrap'><pre class='rust rust-example-rendered'><code>let t = Tally::new();</code></pre>"
    "</div></div></details>"
    "<details class='toggle method-toggle' open><summary><section id='method.skip' class='method'>"
    "<a class='src rightside' href='../src/t.rs.html#20'>Source</a><h4 class='code-header'>pub fn "
    "<a href='#method.skip' class='fn'>skip</a>(&amp;mut self, n: <a class='primitive' href='p.usize.html'>usize</a>)"
    " -&gt; <a class='struct' href='struct.Tally.html'>Tally</a>&lt;T&gt; "
    "<a href='#' class='tooltip' data-notable-ty='Tally'>ⓘ</a><div class='where'>where\n"
    "    T: <a class='trait' href='trait.Clone.html'>Clone</a>,</div></h4></section>"
    "<span class='item-info'><div class='stab unstable'><span class='emoji'>🔬</span><span>This is a nightly-only "
    "experimental API. (<code>tally_skip</code>&nbsp;<a href='https://example.org/i/7'>#7</a>)</span></div></span>"
    "</summary><div class='docblock'><p>Skips <code>n</code> items.</p>"
    "<h5 id='examples-1'><a class='doc-anchor' href='#examples-1'>§</a>Examples</h5>"
    "<div class='example-wrap'><pre class='rust rust-example-rendered'><code>t.skip(2);</code></pre></div></div>"
    "</details></div></details>"
    "<h2 id='trait-implementations' class='section-header'>Trait Implementations"
    "<a href='#trait-implementations' class='anchor'>§</a></h2>"
    "<details class='toggle implementors-toggle' open><summary><section id='impl-Clone-for-Tally' class='impl'>"
    "<a class='src rightside' href='../src/t.rs.html#30'>Source</a><a href='#impl-Clone-for-Tally' class='anchor'>§</a>"
    "<h3 class='code-header'>impl <a class='trait' href='trait.Clone.html'>Clone</a> for "
    "<a class='struct' href='struct.Tally.html'>Tally</a></h3></section></summary><div class='impl-items'>"
    "<details class='toggle method-toggle' open><summary><section id='method.clone' class='method trait-impl'>"
    "<a class='src rightside' href='../src/t.rs.html#31'>Source</a><a href='#method.clone' class='anchor'>§</a>"
    "<h4 class='code-header'>fn <a href='trait.Clone.html#tymethod.clone' class='fn'>clone</a>(&amp;self) -&gt; "
    "<a class='struct' href='struct.Tally.html'>Tally</a></h4></section></summary>"
    "<div class='docblock'>Returns a copy of the <code>Tally</code>. "
    "<a href='trait.Clone.html#tymethod.clone'>Read more</a></div></details></div></details>"
    "</section></main></body></html>")


def test_html_rustdoc_methods_are_sections_and_its_furniture_goes() -> None:
    """rustdoc names itself in ``<meta name="generator">`` and sets each impl and method signature as
    a heading in its toggle's ``<summary>``: each method is a section with its Examples inside it. Its
    "1.0.0 · Source" (``rightside``, ``sub-heading``) and "Expand description" (``summary.hideme``)
    are its own furniture; the ``§`` and ``ⓘ`` marks (links to anchors) and a trait method's "Read
    more" (a link to where its heading's link goes) are no text anywhere; a ``where`` clause set on a
    line of its own stays apart from the signature; the unstable-API banner is a paragraph of its own;
    a method's id (``method.skip``) names no page furniture; its ``<pre class="rust">`` is Rust."""
    from knowtology_cli.parsers.html import parse_html

    page = parse_html(RUSTDOC_PAGE)
    impl = ("Struct Tally", "Implementations", "impl<T> Tally<T>")
    skip = (*impl, "pub fn skip(&mut self, n: usize) -> Tally<T> where T: Clone,")
    clone = ("Struct Tally", "Trait Implementations", "impl Clone for Tally", "fn clone(&self) -> Tally")
    assert [(s.titles, b.text) for s in page.sections for b in s.blocks] == [
        (("Struct Tally",), "# Struct Tally"),
        (("Struct Tally",), "```rust\npub struct Tally<T>\nwhere\n    T: Count,\n{ /* private fields */ }\n```"),
        (("Struct Tally",), "A running count."),
        (impl[:2], "## Implementations"),
        (impl, "### impl<T> Tally<T>"),
        ((*impl, "pub fn new() -> Self"), "#### pub fn new() -> Self"),
        ((*impl, "pub fn new() -> Self"), "Makes an empty tally."),
        ((*impl, "pub fn new() -> Self", "Examples"), "##### Examples"),
        ((*impl, "pub fn new() -> Self", "Examples"), "```rust\nlet t = Tally::new();\n```"),
        (skip, "#### " + skip[-1]),
        (skip, "🔬 This is a nightly-only experimental API. (`tally_skip` #7)"),
        (skip, "Skips `n` items."),
        ((*skip, "Examples"), "##### Examples"),
        ((*skip, "Examples"), "```rust\nt.skip(2);\n```"),
        (clone[:2], "## Trait Implementations"),
        (clone[:3], "### impl Clone for Tally"),
        (clone, "#### fn clone(&self) -> Tally"),
        (clone, "Returns a copy of the `Tally`."),
    ]


def test_html_a_linked_slice_type_in_a_signature_is_part_of_it() -> None:
    """rustdoc links ``[T]`` and ``[T; N]`` to the slice and array pages: words of the signature, not
    an action label such as ``[src]``."""
    from knowtology_cli.parsers.html import parse_html

    page = parse_html("<main><h4>pub fn as_slices(&amp;self) -&gt; (&amp;<a href='primitive.slice.html'>[T]</a>, "
                      "&amp;<a href='primitive.slice.html'>[T]</a>)</h4><p>Both halves.</p>"
                      "<h3>impl From&lt;<a href='primitive.array.html'>[T; N]</a>&gt; for Ring</h3><p>Arrays.</p>"
                      "<h2>Class: Hash<a class='srclink' href='https://x/hash.js'>[src]</a></h2><p>Hashes.</p></main>")
    assert [b.text for s in page.sections for b in s.blocks if b.kind == "heading"] == [
        "#### pub fn as_slices(&self) -> (&[T], &[T])", "### impl From<[T; N]> for Ring", "## Class: Hash"]


def test_html_pointers_marks_and_phrases_read_as_a_browser_shows_them() -> None:
    """A link that ends a passage and goes where the heading's own link goes points on ("Read more"
    under a post's linked title on a blog's index); a link to an anchor with no word (``§``, ``↩``)
    is a mark wherever it stands; text runs on into an element as written (``createHook,``), two
    elements side by side with nothing between are parted (a stylesheet sets them apart); a heading
    in a ``<summary>`` opens a section."""
    from knowtology_cli.parsers.html import parse_html

    page = parse_html(
        "<main><article><h2><a href='/posts/tides.html'>Tides</a></h2><p>How the moon pulls the sea. "
        "<a href='/posts/tides.html'>Read more</a></p></article>"
        "<div>Use <code>createHook</code>, not <code>AsyncHook</code>.<a href='#use'>§</a></div>"
        "<div><span>Added in: v1.0</span><span>Deprecated since: v2.0</span></div>"
        "<details><summary><h3>Options</h3></summary><p>All off by default.<a href='#r1'>↩</a></p></details></main>")
    assert [(s.titles, b.text) for s in page.sections for b in s.blocks] == [
        (("Tides",), "## Tides"), (("Tides",), "How the moon pulls the sea."),
        (("Tides",), "Use `createHook`, not `AsyncHook`."), (("Tides",), "Added in: v1.0 Deprecated since: v2.0"),
        (("Tides", "Options"), "### Options"), (("Tides", "Options"), "All off by default."),
    ]


def test_a_table_column_empty_in_every_row_is_left_out() -> None:
    """gtk-doc's parameter tables carry a third, always empty column for annotations."""
    from knowtology_cli.parsers.html import parse_html

    page = parse_html("<main><p>Parameters:</p><table><tr><td>req_version</td><td>Required version, or NULL.</td>"
                      "<td></td></tr><tr><td>flags</td><td>Options.</td><td> </td></tr></table></main>")
    assert [b.text for s in page.sections for b in s.blocks][1] == (
        "| req_version | Required version, or NULL. |\n| flags | Options. |")


def test_html_a_sections_header_is_content_and_a_layout_table_is_walked() -> None:
    """A ``header`` inside a section is that section's title (npm puts each page's h1 and summary
    there); only one outside every sectioning element is the site's banner (HTML-AAM). A table
    whose cells hold headings and code lays a page out (an FAQ): its headings open sections."""
    from knowtology_cli.parsers.html import parse_html

    page = parse_html(
        "<body><header><a href='/'>Site</a></header><section><header><h1>npm-diff</h1>"
        "<span>The registry diff command</span></header><section id='table_of_contents'><h2>Table of contents</h2>"
        "<ul><li><a href='#d'>Description</a></li></ul></section><h3>Description</h3><p>Prints diffs.</p></section>"
        "<table><tr><td><h3>1. Background</h3></td></tr><tr><td><p>Why so?</p><pre>a\nb</pre></td></tr>"
        "<tr><td><h3>2. Building</h3></td></tr><tr><td>It builds.</td></tr></table></body>")
    found = [(s.titles, b.text) for s in page.sections for b in s.blocks]
    assert found == [
        (("npm-diff",), "# npm-diff"), (("npm-diff",), "The registry diff command"),
        (("npm-diff", "Description"), "### Description"), (("npm-diff", "Description"), "Prints diffs."),
        (("npm-diff", "1. Background"), "### 1. Background"), (("npm-diff", "1. Background"), "Why so?"),
        (("npm-diff", "1. Background"), "```\na\nb\n```"),
        (("npm-diff", "2. Building"), "### 2. Building"), (("npm-diff", "2. Building"), "It builds."),
    ]


def test_code_blocks_keep_the_language_their_markup_names() -> None:
    """A fence says what its code is when the source does: reST's ``code-block``/``prompt`` argument,
    Sphinx's ``highlight-python`` wrapper, highlight.js/Prism ``language-`` classes, ``data-lang``;
    a highlighter's "default" or "text" and a bare ``<pre>`` name none."""
    from knowtology_cli.parsers.html import parse_html
    from knowtology_cli.parsers.rst import parse_rst

    rst = parse_rst("Run\n===\n\n.. code-block:: Shell-Session\n\n   $ kt ingest docs\n\n"
                    ".. prompt:: bash $\n\n   make test\n\n.. code-block::\n\n   plain\n\nOr::\n\n   literal\n\n"
                    ".. doctest::\n\n   >>> 1 + 1\n   2\n\n>>> shelf.count()\n3\n")
    fences = [b.text.split("\n", 1)[0] for s in rst.sections for b in s.blocks if b.kind == "code"]
    assert fences == ["```shell-session", "```bash", "```", "```", "```pycon", "```pycon"]  # as Sphinx highlights
    page = parse_html(
        "<main><h1>Use</h1><div class='highlight-python notranslate'><div class='highlight'><pre>x = 1</pre></div></div>"
        "<pre><code class='hljs language-TypeScript'>let y = 2;</code></pre>"
        "<pre data-lang='sql'>SELECT 1;</pre>"
        "<div class='highlight-default'><div class='highlight'><pre>z = 3</pre></div></div>"
        "<pre class='language-text'>out</pre><pre>bare</pre></main>")
    fences = [b.text.split("\n", 1)[0] for s in page.sections for b in s.blocks if b.kind == "code"]
    assert fences == ["```python", "```typescript", "```sql", "```", "```", "```"]


def test_mkdocs_snippet_forms_ranges_escapes_and_loops(tmp_path: Path) -> None:
    """pymdownx.snippets' forms: a block of paths between bare ``--8<--`` lines, 1-based line ranges,
    an escaped ``;--8<--`` shown as written, a file including itself read once, a missing file named;
    included blocks cite the including line, lines after them keep their own numbers."""
    from knowtology_cli.parsers.markdown import parse_markdown

    (tmp_path / "steps.md").write_text("one\n\ntwo\n\nthree\n")
    (tmp_path / "loop.md").write_text('Looping text.\n\n--8<-- "loop.md"\n')
    page = tmp_path / "page.md"
    page.write_text('# Page\n\n--8<--\nsteps.md:3:6\nloop.md\n;skipped.md\nmissing.md\n--8<--\n\n'
                    ';--8<-- "steps.md"\n\nLast line.\n')
    doc = parse_markdown(page.read_text(), name="page.md", path=page)
    found = [(b.text, b.start, b.end) for s in doc.sections for b in s.blocks]
    assert found == [("# Page", 1, 1), ("two", 4, 4), ("three", 4, 4), ("Looping text.", 5, 5),
                     ('--8<-- "steps.md"', 10, 10), ("Last line.", 12, 12)]
    assert [Path(f).name for f in doc.includes] == ["steps.md", "loop.md"]
    assert doc.unread == ("loop.md (circular inclusion)", "missing.md (not found)")
    # without a path (bytes from a stream) nothing is read and the notation stays
    assert "steps.md" in parse_markdown(page.read_text()).sections[0].blocks[1].text


def test_rst_python_roles_do_not_show_their_leading_dot() -> None:
    """Sphinx's ``:attr:`.Request.host``` looks in the current module first and shows "Request.host";
    a file role keeps its dot (``:file:`.bashrc```)."""
    from knowtology_cli.parsers.rst import parse_rst

    doc = parse_rst("Lifecycle\n=========\n\nThis calls :meth:`.Flask.wsgi_app` and reads :file:`.bashrc`.\n")
    assert doc.sections[0].blocks[-1].text == "This calls `Flask.wsgi_app` and reads `.bashrc`."


MYST = """(intro)=
# Pantry {sup}`API`

% an editor's comment
Use {func}`~pantry.stock.recount` or {meth}`.Shelf.scan`; see {doc}`the guide <guide>`, {ref}`fees-section`
and {pep}`8`.

:::{warning} Counting
Recount after a move.
:::

```{note}
Shelves are counted weekly.
```

```{versionadded} 2.1
Basalt shelves.
```

```{code-block} python
:caption: Recount
:linenos:

recount(shelf)
```

::::{tab-set}
:::{tab-item} Python
Call it from Python.
:::
::::

```{toctree}
:maxdepth: 2
guide
```

```{eval-rst}
.. function:: recount(shelf)

   Recounts one **shelf**.
```

+++
```{py:function} pantry.scan(aisle)
Scans an aisle.
```
"""


def test_myst_markdown_reads_as_what_sphinx_shows() -> None:
    """MyST (Sphinx's Markdown): roles as their text, admonitions and version notes as their label
    and text, code directives as fenced code naming the language (options dropped), tabs as their
    title, toctree gone, eval-rst rendered by the reST reader, targets/comments/breaks no text."""
    from knowtology_cli.parsers.markdown import parse_markdown

    doc = parse_markdown(MYST, name="pantry.md")
    found = [(b.kind, b.text, b.start) for s in doc.sections for b in s.blocks]
    assert found == [
        ("heading", "# Pantry API", 2),
        ("text", "Use `recount` or `Shelf.scan`; see the guide, fees section\nand PEP 8.", 5),
        ("text", "Warning: Counting\nRecount after a move.", 8),
        ("text", "Note:\nShelves are counted weekly.", 12),
        ("text", "New in version 2.1:\nBasalt shelves.", 16),
        ("code", "```python\nrecount(shelf)\n```", 20),
        ("text", "Python:\nCall it from Python.", 28),
        ("text", "recount(shelf)", 38),  # what eval-rst renders cites its directive's line
        ("text", "Recounts one shelf.", 38),
        ("text", "pantry.scan(aisle)", 45),
        ("text", "Scans an aisle.", 46),
    ]
    assert doc.sections[0].titles == ("Pantry API",)
    # a role whose text runs on to the next line reads whole
    split = parse_markdown("# Args\n\nThey are {ref}`documented in the\ncommand docstring <docs>` as usual.\n")
    assert split.sections[0].blocks[1].text == "They are documented in the command docstring as usual."
    # an extension's directive with nothing but its argument shows nothing; a signature alone stays
    bare = parse_markdown("# Changes\n\n```{towncrier-draft-entries} main\n```\n\n```{py:function} scan(aisle)\n```\n")
    assert [b.text for b in bare.sections[0].blocks] == ["# Changes", "scan(aisle)"]
    # plain Markdown with braces is left alone
    plain = parse_markdown("# Sets\n\nA set {1, 2} and `{x}` code.\n\n% of users\n\nLogs `${rotation}` and `${pid}`.\n")
    assert [b.text for b in plain.sections[0].blocks] == [
        "# Sets", "A set {1, 2} and `{x}` code.", "% of users", "Logs `${rotation}` and `${pid}`."]
    # a role's look-alike inside a code span stays code in a MyST page too
    assert "the `{eq}` role" in parse_markdown("# M\n\nUse {eq}`e1`, the `{eq}` role.\n").sections[0].blocks[1].text


def test_rst_file_wide_metadata_is_no_text() -> None:
    """Sphinx reads a field list before anything else as file-wide metadata (``:orphan:``,
    ``:tocdepth: 2``); a field list in the body is content."""
    from knowtology_cli.parsers.rst import parse_rst

    doc = parse_rst(":orphan:\n:tocdepth: 2\n\nJQuery\n======\n\nText here.\n\n:Parameters: shelf -- the shelf\n")
    assert [b.text for s in doc.sections for b in s.blocks] == ["# JQuery", "Text here.", "Parameters: shelf -- the shelf"]


def test_doc_references_show_the_title_of_the_document_they_name(tmp_path: Path) -> None:
    """Sphinx shows a ``:doc:`` (MyST ``{doc}``) reference as the target document's title: the file
    is found from the citing page's folder (``/`` from the ingested folder), its suffix optional;
    a target outside the folder or missing reads as its last part in words."""
    from knowtology_cli.parsers.markdown import parse_markdown
    from knowtology_cli.parsers.rst import parse_rst

    (tmp_path / "patterns").mkdir()
    (tmp_path / "patterns" / "appfactories.rst").write_text(".. _factories:\n\n=====================\nApplication Factories\n=====================\n\nText.\n")
    (tmp_path / "tutorial.md").write_text("---\ntitle: The *Tutorial*\n---\n\n# Other\n")
    (tmp_path / "outside.rst").write_text("Outside\n=======\n")
    page = tmp_path / "patterns" / "dispatch.rst"
    page.write_text("Dispatch\n========\n\nSee the :doc:`appfactories` pattern, :doc:`/tutorial`, "
                    ":doc:`missing-page` and :doc:`../outside`.\n")
    doc = parse_rst(page.read_text(), path=page, root=tmp_path / "patterns")
    assert doc.sections[0].blocks[-1].text == ("See the Application Factories pattern, tutorial, missing page "
                                               "and outside.")
    doc = parse_rst(page.read_text(), path=page, root=tmp_path)
    assert doc.sections[0].blocks[-1].text == ("See the Application Factories pattern, The Tutorial, missing page "
                                               "and Outside.")
    myst = tmp_path / "guide.md"
    myst.write_text("# Guide\n\nRead {doc}`patterns/appfactories` first.\n")
    assert parse_markdown(myst.read_text(), path=myst, root=tmp_path).sections[0].blocks[-1].text == \
        "Read Application Factories first."


def test_literalinclude_reads_code_inside_the_folder_and_names_the_rest(tmp_path: Path) -> None:
    """``literalinclude`` (reST and MyST) shows the file's lines as code naming its language (the
    ``:language:`` option, else the file name as Pygments reads it), with ``:lines:`` /
    ``:start-after:`` applied; a file outside the ingested folder is named, not read."""
    from knowtology_cli.parsers.markdown import parse_markdown
    from knowtology_cli.parsers.rst import parse_rst

    docs = tmp_path / "docs"
    (docs / "examples").mkdir(parents=True)
    (docs / "examples" / "recount.py").write_text("import pantry\n# start\ndef recount(shelf):\n    return shelf.count()\n")
    (tmp_path / "LICENSE.txt").write_text("SECRET TERMS\n")
    page = docs / "guide.rst"
    page.write_text("Guide\n=====\n\n.. literalinclude:: examples/recount.py\n   :start-after: # start\n\n"
                    ".. literalinclude:: /examples/recount.py\n   :language: text\n   :lines: 1\n\n"
                    ".. literalinclude:: ../LICENSE.txt\n")
    doc = parse_rst(page.read_text(), path=page, root=docs)
    code = [b.text for s in doc.sections for b in s.blocks if b.kind == "code"]
    assert code == ["```python\ndef recount(shelf):\n    return shelf.count()\n```", "```text\nimport pantry\n```"]
    assert doc.unread == ("../LICENSE.txt (outside the ingested folder)",)
    myst = docs / "guide.md"
    myst.write_text("# Guide\n\n```{literalinclude} examples/recount.py\n:lines: 3-4\n```\n")
    doc = parse_markdown(myst.read_text(), path=myst, root=docs)
    assert [b.text for b in doc.sections[0].blocks][1] == "```python\ndef recount(shelf):\n    return shelf.count()\n```"


def test_ref_labels_show_the_title_of_the_section_they_stand_above(tmp_path: Path) -> None:
    """``:ref:`label``` (MyST ``{ref}``) shows the title of the section the label stands above, in any
    document of the ingested folder (stacked labels, overlined titles, MyST targets); an unknown
    label reads as its words."""
    from knowtology_cli.parsers.markdown import parse_markdown
    from knowtology_cli.parsers.rst import parse_rst

    (tmp_path / "security.rst").write_text(
        "Security\n========\n\n.. _security-xss:\n.. _`xss`:\n\nCross Site Scripting (XSS)\n"
        "--------------------------\n\nText.\n\n.. _not-a-title:\n\nA paragraph.\n")
    (tmp_path / "intro.md").write_text("(first-steps)=\n\n# First *steps*\n")
    (tmp_path / "loop").symlink_to(tmp_path, target_is_directory=True)  # labels are read as ingest walks
    page = tmp_path / "uploads.rst"
    page.write_text("Uploads\n=======\n\nSee :ref:`security-xss`, :ref:`XSS`, :ref:`first-steps` and "
                    ":ref:`not-a-title`.\n")
    doc = parse_rst(page.read_text(), path=page, root=tmp_path)
    assert doc.sections[0].blocks[-1].text == ("See Cross Site Scripting (XSS), Cross Site Scripting (XSS), "
                                               "First steps and not a title.")
    myst = tmp_path / "guide.md"
    myst.write_text("# Guide\n\nMind {ref}`xss`, [](#first-steps), [](security.rst), [](first-steps) "
                    "and [](no-such-label); keep `[](code)`.\n")
    assert parse_markdown(myst.read_text(), path=myst, root=tmp_path).sections[0].blocks[-1].text == (
        "Mind Cross Site Scripting (XSS), First steps, Security, First steps and no such label; keep `[](code)`.")


def test_an_unknown_directive_holding_code_shows_it_as_written() -> None:
    """A directive docutils does not know whose content indents where reST allows no indent is code
    (``.. click:example::`` holds Python): a fenced block with its indentation, not paragraphs; one
    whose content is reST stays text."""
    from knowtology_cli.parsers.rst import parse_rst

    doc = parse_rst("Options\n=======\n\n.. click:example::\n\n    @click.command()\n    def info(shout):\n"
                    "        rv = sys.platform\n        if shout:\n            rv = rv.upper()\n\n"
                    ".. custom-note::\n\n    This is a *note*.\n\n    - a list\n")
    assert [b.text for s in doc.sections for b in s.blocks][1:] == [
        "```\n@click.command()\ndef info(shout):\n    rv = sys.platform\n    if shout:\n        rv = rv.upper()\n```",
        "This is a note.\n\n- a list"]


def test_an_unknown_directive_s_code_is_kept_as_written_whatever_rest_makes_of_it() -> None:
    """Click's ``.. click:run::`` holds Python that reST reads as something else: a call continued on
    an indented line as a definition list (it read ``invoke(…},: auto_envvar_prefix=…)``), an import
    and a call as a paragraph, code right under the marker as the directive's argument. Each is a code
    block exactly as written; a domain directive's description and a version note stay prose."""
    from knowtology_cli.parsers.rst import parse_rst

    doc = parse_rst("Options\n=======\n\n.. click:run::\n\n   invoke(greet, env={'GREETER_USERNAME': 'john'},\n"
                    "          auto_envvar_prefix='GREETER')\n\n.. click:run::\n\n   import os\n"
                    "   invoke(perform, env={\"PATHS\": \"./a\"})\n\n.. click:example::\n    def out():\n"
                    "        yield 1\n\n    print(out)\n\n.. py:function:: f(x)\n\n   Return (for now) x doubled.\n\n"
                    "   mode\n      The mode.\n\n.. versionchanged:: 2.0\n   Added run(a, b).\n")
    assert [(b.kind, b.text, b.start, b.end) for b in doc.sections[0].blocks][1:] == [
        ("code", "```\ninvoke(greet, env={'GREETER_USERNAME': 'john'},\n       auto_envvar_prefix='GREETER')\n```", 4, 7),
        ("code", '```\nimport os\ninvoke(perform, env={"PATHS": "./a"})\n```', 9, 12),
        ("code", "```\ndef out():\n    yield 1\n\nprint(out)\n```", 14, 18),
        ("text", "f(x)\n\nReturn (for now) x doubled.\n\nmode: The mode.", 20, 25),
        ("label", "Changed in version 2.0: Added run(a, b).", 27, 28)]


def test_only_keeps_what_an_html_build_shows() -> None:
    """``.. only:: not latex`` holds what the HTML documentation shows, ``.. only:: latex`` what a PDF
    does: a reader gets one copy. The content kept reads as what it is (a table stays a table)."""
    from knowtology_cli.parsers.markdown import parse_markdown
    from knowtology_cli.parsers.rst import parse_rst

    doc = parse_rst("Plugins\n=======\n\n.. only:: not latex\n\n   +-------+---------+\n   | name  | summary |\n"
                    "   +=======+=========+\n   | alpha | first   |\n   +-------+---------+\n\n"
                    ".. only:: latex\n\n   alpha\n     first\n\n.. only:: (html or epub) and not man\n\n   Shown.\n")
    assert [(b.kind, b.text) for b in doc.sections[0].blocks][1:] == [
        ("table", "| name | summary |\n| --- | --- |\n| alpha | first |"), ("text", "Shown.")]
    myst = parse_markdown("# P\n\n```{only} latex\nFor print.\n```\n\n```{only} html\nFor the web.\n```\n")
    assert [b.text for b in myst.sections[0].blocks] == ["# P", "For the web."]


def test_markdown_pymdownx_blocks_read_as_their_title_and_text() -> None:
    """pymdownx Blocks (``/// warning | Title``, options indented below, ``///`` closing) read as the
    title and the text, as MkDocs' ``!!!`` admonitions do; a rendered-output wrapper (``/// html``)
    leaves its content; an alert kind a plugin adds (``> [!new] New 11.0``) reads like GitHub's;
    Blocks syntax inside code stays code."""
    from knowtology_cli.parsers.markdown import parse_markdown

    doc = parse_markdown("# Snippets\n\n/// warning | Not Meant for Users\n    type: warning\n\nMeant for docs.\n"
                         "///\n\n/// tab | Python\n```py\nx = 1\n```\n///\n\n/// note\nA note.\n///\n\n"
                         "/// html | div.result\nRendered **out**.\n///\n\n> [!new] New 11.0\n> Added.\n\n"
                         "```\n/// note\nkept\n///\n```\n")
    assert [b.text for b in doc.sections[0].blocks][1:] == [
        "Not Meant for Users:", "Meant for docs.", "Python:", "```py\nx = 1\n```", "Note:\nA note.",
        "Rendered **out**.", "> New 11.0:\n> Added.", "```\n/// note\nkept\n///\n```"]


def test_markdown_attribute_lists_and_icon_shortcodes_are_no_text() -> None:
    """Python-Markdown attribute lists (``{: .source-link }``, ``{: #\\9.0}`` on a heading) and MkDocs
    Material icons (``:octicons-file-code-24:``) are markup; a line of nothing else goes. In code
    spans and code blocks they stay."""
    from knowtology_cli.parsers.markdown import parse_markdown

    doc = parse_markdown("# 9.0 Migration Notes {: #\\9.0}\n\n[:octicons-file-code-24:][_b64]{: .source-link }\n\n"
                         "## Bug Reports :material-bug:\n\nUse [the button](x.md){: .md-button } now.\n\n"
                         "A dict {a: 1} and `{: .kept}` code.\n\n```\n{: .kept-in-code }\n```\n")
    assert [b.text for s in doc.sections for b in s.blocks] == [
        "# 9.0 Migration Notes", "## Bug Reports", "Use [the button](x.md) now.", "A dict {a: 1} and `{: .kept}` code.",
        "```\n{: .kept-in-code }\n```"]
    assert [s.titles for s in doc.sections][-1] == ("9.0 Migration Notes", "Bug Reports")


def test_mkdocstrings_insertions_keep_the_name_and_drop_their_options(tmp_path: Path) -> None:
    """mkdocstrings' ``::: package.Object`` names the API it inserts (kept, like an autodoc signature);
    its indented YAML options are no text. A reST ``include`` of code with ``:literal:`` names its
    language as Pygments reads the file name."""
    from knowtology_cli.parsers.markdown import parse_markdown
    from knowtology_cli.parsers.rst import parse_rst

    doc = parse_markdown("# Commands\n\n::: make.help\n    options:\n        heading_level: 3\n\nText after.\n")
    assert [b.text for b in doc.sections[0].blocks] == ["# Commands", "make.help", "Text after."]
    (tmp_path / "x.py").write_text("def f():\n    return 1\n")
    page = tmp_path / "a.rst"
    page.write_text("T\n=\n\n.. include:: x.py\n   :literal:\n")
    code = [b.text for s in parse_rst(page.read_text(), path=page).sections for b in s.blocks if b.kind == "code"]
    assert code == ["```python\ndef f():\n    return 1\n```"]


def test_rst_list_items_with_nothing_in_them_keep_their_marker() -> None:
    """``7.`` alone on a line is an empty enumerated item to docutils; its text is not lost."""
    doc = parse("Title\n=====\n\nrefund.\n\n7.\n\n8. Eight\n\n9.\n", name="a.rst")
    assert [b.text for s in doc.sections for b in s.blocks][1:] == ["refund.", "7.\n8. Eight\n9."]


def test_code_roles_and_code_elements_read_as_code_spans_in_every_format() -> None:
    """A reader sees code as code whatever the source format: reST's code roles (``:func:``,
    ``:code:``, ``:envvar:``, ``:kbd:``) and MyST's read as Markdown code spans, word roles
    (``:term:``, ``:ref:``) as words; HTML's ``<code>``/``<tt>``/``<samp>``/``<kbd>`` likewise, with
    the code of a ``<pre>`` as written and a heading's title path in plain words."""
    from knowtology_cli.parsers.html import parse_html
    from knowtology_cli.parsers.markdown import parse_markdown
    from knowtology_cli.parsers.rst import parse_rst

    rst = parse_rst("Run\n===\n\nCall :py:func:`open`, set :envvar:`HOME` with :code:`x = 1`, press :kbd:`Ctrl-C`; "
                    "see :term:`shell` and :ref:`the guide <guide>`.\n")
    myst = parse_markdown("---\nmyst: {}\n---\n# Run\n\nCall {py:func}`open`, set {envvar}`HOME` with {code}`x = 1`, "
                          "press {kbd}`Ctrl-C`; see {term}`shell` and {ref}`the guide <guide>`.\n", name="run.md")
    said = "Call `open`, set `HOME` with `x = 1`, press `Ctrl-C`; see shell and the guide."
    assert rst.sections[0].blocks[-1].text == said
    assert myst.sections[0].blocks[-1].text == said
    page = parse_html("<html><body><h2>The <code>open()</code> call</h2><p>See <code class='xref'>"
                      "<span class='pre'>click.echo()</span> <span class='pre'>x</span></code>, <tt>argv</tt>, "
                      "<samp>out</samp> and <code> sp </code>end.</p><pre><code>a = `b`</code></pre>"
                      "<ul><li><code>item</code> one</li></ul></body></html>")
    assert [(s.titles, [b.text for b in s.blocks]) for s in page.sections] == [
        (("The open() call",), ["## The `open()` call", "See `click.echo() x`, `argv`, `out` and `sp` end.",
                                "```\na = `b`\n```", "- `item` one"])]


def test_myst_unknown_directives_holding_code_read_as_code_blocks() -> None:
    """An extension's directive the reader does not know (``{click:example}``) shows its content:
    as a code block when it is code, judged as the reST reader judges one (mostly no words), and as
    text when it is prose, a list or a table."""
    from knowtology_cli.parsers.markdown import parse_markdown

    doc = parse_markdown("---\nmyst: {}\n---\n# Run\n\n```{click:example}\nimport click\n\n@click.command()\n"
                         "def hello():\n    click.echo('Hello World!')\n```\n\n:::{click:run}\n"
                         "invoke(hello, args=['--help'])\n:::\n\n```{custom-thing}\nSome words about `hello` here.\n"
                         "```\n\n```{custom-list}\n- a\n- b\n```\n\n```{custom-table}\n| a | b |\n| - | - |\n```\n",
                         name="run.md")
    assert [(b.kind, b.text) for s in doc.sections for b in s.blocks] == [
        ("heading", "# Run"),
        ("code", "```\nimport click\n\n@click.command()\ndef hello():\n    click.echo('Hello World!')\n```"),
        ("code", "```\ninvoke(hello, args=['--help'])\n```"),
        ("text", "Some words about `hello` here."), ("list", "- a\n- b"), ("table", "| a | b |\n| - | - |")]


def test_a_terminal_session_in_an_unknown_directive_reads_as_code_in_rest_and_myst() -> None:
    """A session (``$ pip install …`` and its output) is mostly words, yet code: its first line opens
    with a prompt. Both readers show it as written; a sentence about ``$`` amounts stays text."""
    from knowtology_cli.parsers.markdown import parse_markdown
    from knowtology_cli.parsers.rst import parse_rst

    session = "$ pip --python .venv install SomePackage\n[...]\nSuccessfully installed SomePackage"
    myst = parse_markdown("---\nmyst: {}\n---\n# Use\n\n```{pip-cli}\n" + session + "\n```\n\n```{pip-cli}\n"
                          "Prices start at $5 for a small box of fresh produce and herbs.\n```\n", name="use.md")
    rst = parse_rst("Use\n===\n\n.. pip-cli::\n\n" + "".join(f"   {line}\n" for line in session.split("\n")))
    assert [(b.kind, b.text) for b in myst.sections[0].blocks][1:] == [
        ("code", f"```\n{session}\n```"), ("text", "Prices start at $5 for a small box of fresh produce and herbs.")]
    assert [(b.kind, b.text) for b in rst.sections[0].blocks][1:] == [("code", f"```\n{session}\n```")]


def test_a_rest_page_whose_meta_refresh_sends_it_elsewhere_is_a_pointer() -> None:
    """pip leaves a stub at each moved page's old source: ``.. meta:: :http-equiv=refresh: 3;
    url=…`` over "This page has moved". A documentation source never reloads itself to show live
    data, so any delay makes it a pointer; a meta block without a refresh is the page's own."""
    from knowtology_cli.parsers.rst import parse_rst

    stub = parse_rst(":orphan:\n\n.. meta::\n\n  :http-equiv=refresh: 3; url=../../cli/pip_install/\n\n"
                     "This page has moved\n===================\n\nYou should be redirected automatically in 3 "
                     "seconds. If that didn't\nwork, here's a link: :doc:`../cli/pip_install`\n")
    assert (stub.redirect, stub.sections) == ("../../cli/pip_install/", ())
    page = parse_rst(".. meta::\n   :description: Installing packages\n   :keywords: pip\n\nInstall\n=======\n\n"
                     "Run the installer.\n")
    assert page.redirect == "" and [b.text for b in page.sections[0].blocks] == ["# Install", "Run the installer."]
