"""One-line extractive snippets: Markdown stripped, boilerplate skipped, titled, cut at a word."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowtology_cli.builders.snippets import ELLIPSIS, clean_markdown, make_snippet

REFUNDS = """# Returns and Refunds Policy

**Table of contents**

- [Refund windows](#refund-windows)
- [Approval limits](#approval-limits)

## Refund windows

Perishables can be reported within **48 hours** of delivery; see the [policy page](https://example.com/p).
Non-perishables have 30 days.
"""


def test_markdown_syntax_is_stripped_and_the_section_title_prefixed() -> None:
    snippet = make_snippet(REFUNDS)
    assert snippet == "Refund windows: Perishables can be reported within 48 hours of delivery; see the policy page."
    for mark in ("#", "**", "](", "http", "[", "|", "`"):
        assert mark not in snippet


@pytest.mark.parametrize(("text", "expected"), [
    ("Run `npm pkg get <field>` to print one field.", "Run npm pkg get <field> to print one field."),
    ("Read content from a file called <filename> and store it in a <variable>.",
     "Read content from a file called <filename> and store it in a <variable>."),
    ("Pass `:not(<selector>)` to skip <b>matching</b> nodes.", "Pass :not(<selector>) to skip matching nodes."),
    ('A <a href="/x">link</a> and <my-card>a card</my-card> so Vec<S> stays.', "A link and a card so Vec<S> stays."),
    # git's manuals: a hyphenated placeholder with no closing tag is no custom element
    ("git subtree split [<local-commit>] [<repository>]", "git subtree split [<local-commit>] [<repository>]"),
    ('Use <x-note class="n">care</x-note> with <file-name>.', "Use care with <file-name>."),
])
def test_placeholders_stay_and_html_tags_go(text: str, expected: str) -> None:
    """``<filename>`` and ``<field>`` are what the text means (reST and man pages name arguments so,
    code spans too); only HTML's own elements, custom elements and tags with attributes are markup."""
    assert clean_markdown(text) == expected


def test_a_version_label_alone_is_no_snippet() -> None:
    """Sphinx's ``versionadded`` opens a third of CMake's reference pages; "New in version 3.13." is
    no lead, the sentence after it is. A label with its own words stays."""
    text = "New in version 3.13.\n\nSpecify the separator used when a compiler driver forwards linker flags."
    assert make_snippet(text, "LINKER_FLAG_SEP") == (
        "LINKER_FLAG_SEP: Specify the separator used when a compiler driver forwards linker flags.")
    assert make_snippet("Changed in version 3.2: paths may be relative.", "X") == (
        "X: Changed in version 3.2: paths may be relative.")


def test_a_heading_ending_in_a_colon_is_prefixed_with_one_colon() -> None:
    text = "### Within 24 hours (Class I and II):\n\nGenerate the customer list and call each customer."
    assert make_snippet(text) == "Within 24 hours (Class I and II): Generate the customer list and call each customer."


def test_boilerplate_lines_are_skipped() -> None:
    text = "Table of contents\n\nLast updated: 2026-01-01\n\nDrivers must keep frozen goods below -18 °C at all times."
    assert make_snippet(text) == "Drivers must keep frozen goods below -18 °C at all times."


def test_title_prefix_only_when_short_and_informative() -> None:
    body = "Drivers scan every tote before loading the van."
    assert make_snippet(body, title="Loading") == f"Loading: {body}"
    assert make_snippet(body, title="Introduction") == body  # generic
    assert make_snippet(body, title="A very long title that goes on and on about many different things") == body
    assert make_snippet("Refund policy: refunds are paid within 7 days.", title="Refund policy").startswith("Refund policy: refunds")


def test_short_sentences_are_extended_and_long_ones_cut_at_a_word() -> None:
    assert make_snippet("Refunds. They are paid within seven days of approval.") == (
        "Refunds. They are paid within seven days of approval."
    )
    long = "Customers " + "really " * 40 + "like fast refunds."
    snippet = make_snippet(long, max_chars=60)
    assert snippet.endswith(ELLIPSIS) and len(snippet) <= 60
    assert snippet[:-1] == snippet[:-1].rstrip() and long.startswith(snippet[:-1])


def test_tables_code_and_lists() -> None:
    table = "| Product | Window |\n|---|---|\n| Dairy | 48 hours |"
    assert make_snippet(table) == "Product; Window; Dairy; 48 hours"
    assert make_snippet("```python\nprint('hello world')\n```") == "print('hello world')"
    assert make_snippet("- first item is here\n- second item") == "first item is here; second item"
    assert clean_markdown("## Head\n\n*Body* with `code` and ![img](x.png)") == "Head Body with code and img"


def test_a_list_item_with_pipes_is_not_a_table_row() -> None:
    # API references write union types with pipes: {string|Buffer|URL}; a table without a leading
    # pipe still reads as one
    item = "* `path` {string|Buffer|URL|integer} filename or file descriptor"
    assert make_snippet(item) == "path {string|Buffer|URL|integer} filename or file descriptor"
    assert make_snippet("Product | Window | Note\n---|---|---\nDairy | 48 hours | chilled") == (
        "Product; Window; Note; Dairy; 48 hours; chilled")


@pytest.mark.parametrize("text", ["   ", "\n\n", "\x00\x01", "***", "---", "#", "| |"])
def test_never_empty_for_non_empty_text(text: str) -> None:
    snippet = make_snippet(text)
    assert snippet and "\n" not in snippet


@settings(max_examples=300, deadline=None)
@given(text=st.text(min_size=1), title=st.text(max_size=60), max_chars=st.integers(min_value=10, max_value=200))
def test_any_text_gives_a_single_line_within_the_limit(text: str, title: str, max_chars: int) -> None:
    snippet = make_snippet(text, title, max_chars=max_chars)
    assert snippet
    assert len(snippet.splitlines()) == 1 and snippet == snippet.strip()
    assert len(snippet) <= max_chars + 1


_MARKDOWN = st.lists(
    st.sampled_from(
        ["# Title", "## Section two", "**bold** text here", "a [link](http://x.y) inside", "code()",
         "| a | b |", "|---|---|", "- item one", "1. step", "> quote", "Plain sentence about refunds.", "",
         "Table of contents", "<b>html</b>", "***", "Word " * 30]
    ),
    min_size=1,
    max_size=12,
).map("\n".join)


@settings(max_examples=200, deadline=None)
@given(text=_MARKDOWN, max_chars=st.integers(min_value=20, max_value=160))
def test_markdown_documents_give_clean_snippets(text: str, max_chars: int) -> None:
    snippet = make_snippet(text, max_chars=max_chars)
    assert snippet and "\n" not in snippet and len(snippet) <= max_chars
    assert "**" not in snippet and "](" not in snippet and "|" not in snippet and "#" not in snippet
    # Inside a code fence the same text is code and is quoted as it is.
    fenced = make_snippet(f"```\n{text}\n```", max_chars=max_chars)
    assert fenced and "\n" not in fenced and "```" not in fenced


def test_a_table_leading_a_chunk_gives_way_to_its_sentences() -> None:
    """Node's rendered API pages open each entry with its change history (a table): the snippet says
    what the entry does in words; a chunk that is only a table still gets its rows."""
    text = ("### path.relative(from, to)\n\n| Version | Changes |\n| --- | --- |\n| v6.8.0 | Leading slashes kept |\n\n"
            "The method returns the relative path between two absolute paths.")
    snippet = make_snippet(text, "path")
    assert snippet.endswith("The method returns the relative path between two absolute paths.")
    assert "Version" not in snippet and "v6.8.0" not in snippet
    assert make_snippet("| Tier | Discount |\n| --- | --- |\n| Gold | 10% |", "Pricing tiers") == (
        "Pricing tiers: Tier; Discount; Gold; 10%")


def test_dunder_names_and_snake_case_keep_their_underscores() -> None:
    """reST and HTML chunks lose the code marks around ``Model.__str__()``; the snippet must not read
    its underscores as bold (a Django page's snippet said "Pizza.str()")."""
    assert make_snippet("Pizza.__str__() returns the name; define __init__ and use snake_case_name.", "Pizzas") == (
        "Pizzas: Pizza.__str__() returns the name; define __init__ and use snake_case_name.")
    assert make_snippet("This is __very important__ and **bold** and _light_.", "") == (
        "This is very important and bold and light.")


def test_a_generators_controls_and_version_marks_are_no_snippet() -> None:
    """rustdoc opens every item with "1.0.0 · Source" and "Expand description"; doc sites add "Copy",
    "Edit this page", "Show more". The snippet starts at what the item is; prose using the words stays."""
    text = ("# Struct Vec\n\n1.0.0 · Source\n\n```\npub struct Vec<T>\n```\n\nExpand description\n\n"
            "A contiguous growable array type.")
    assert make_snippet(text, "Vec") == "Struct Vec: A contiguous growable array type."
    assert make_snippet("Edit this page\n\nCopy\n\nShow more\n\nJobs run in the order they came.", "Queue") == (
        "Queue: Jobs run in the order they came.")
    assert make_snippet("Show the source of the file and edit it.", "Files") == (
        "Files: Show the source of the file and edit it.")
