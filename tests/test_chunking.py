"""Tests of knowtology_cli.chunking: token-sized chunks over parsed sections, ranges and junk."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowtology_cli.chunking import DocChunk, chunk_document, has_prose, split_document
from knowtology_cli.errors import ConfigError
from knowtology_cli.parsers import parse
from knowtology_cli.tokens import count_tokens

_WORDS = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    return _WORDS.findall(text)


def check_invariants(text: str, chunks: list[DocChunk], max_tokens: int) -> None:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    previous = 1
    for index, chunk in enumerate(chunks):
        assert chunk.index == index
        assert chunk.text and chunk.text == chunk.text.strip()
        assert count_tokens(chunk.text) <= chunk.tokens <= max_tokens
        assert chunk.unit == "line"
        assert previous <= chunk.start <= chunk.end <= len(lines)
        previous = chunk.start


# -- properties -----------------------------------------------------------------------------

vocabulary = st.sampled_from(
    ["refund", "policy", "the", "parcel", "Perishables", "7", "days,", "über", "naïve", "日本語", "🙂",
     "e.g.", "end.", "Why?", "wow!", "x" * 40, "https://example.com/a/very/long/path?q=1", "camelCase"]
)
sentences = st.lists(vocabulary, min_size=1, max_size=25).map(lambda ws: " ".join(ws) + ".")
paragraphs = st.lists(sentences, min_size=1, max_size=6).map(" ".join)
headings = st.one_of(
    sentences.map(lambda t: f"{t}\n{'=' * len(t)}"),
    sentences.map(lambda t: f"{t}\n{'-' * len(t)}"),
    sentences.map(lambda t: f"{'~' * len(t)}\n{t}\n{'~' * len(t)}"),
)
blocks = st.lists(st.one_of(paragraphs.map(lambda p: (True, p)), headings.map(lambda h: (False, h))), max_size=14)
sizes = st.tuples(st.integers(8, 60), st.integers(0, 40)).map(lambda t: (t[0] + t[1], t[0]))


def is_subsequence(needle: list[str], haystack: list[str]) -> bool:
    rest = iter(haystack)
    return all(any(w == h for h in rest) for w in needle)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=blocks, size=sizes)
def test_plain_text_keeps_every_prose_word_in_order_within_limits(parts: list[tuple[bool, str]],
                                                                  size: tuple[int, int]) -> None:
    max_tokens, target = size
    text = "\n\n".join(t for _, t in parts)
    chunks = split_document(text, file_name="doc.txt", max_tokens=max_tokens, target_tokens=target)
    check_invariants(text, chunks, max_tokens)
    kept = [w for c in chunks for w in words(c.text)]
    # Prose is never lost; a heading is kept unless it cannot share a chunk with what follows it.
    assert is_subsequence(words(" ".join(t for prose, t in parts if prose)), kept)
    assert is_subsequence(kept, words(text))
    assert split_document(text, file_name="doc.txt", max_tokens=max_tokens, target_tokens=target) == chunks


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.one_of(paragraphs.map(lambda p: (True, p)), sentences.map(lambda t: (False, "## " + t))),
                      max_size=12), size=sizes)
def test_markdown_keeps_prose_and_each_line_range_holds_its_text(parts: list[tuple[bool, str]],
                                                                 size: tuple[int, int]) -> None:
    max_tokens, target = size
    text = "\n\n".join(t for _, t in parts)
    chunks = split_document(text, file_name="doc.md", max_tokens=max_tokens, target_tokens=target)
    check_invariants(text, chunks, max_tokens)
    kept = [w for c in chunks for w in words(c.text)]
    assert is_subsequence(words(" ".join(t for prose, t in parts if prose)), kept)
    lines = text.split("\n")
    for chunk in chunks:  # Markdown chunks are source slices: their words are in their line range
        assert set(words(chunk.text)) <= set(words("\n".join(lines[chunk.start - 1 : chunk.end])))


# -- concrete documents ---------------------------------------------------------------------

def test_markdown_heading_trail_becomes_title_and_ranges_are_lines() -> None:
    body = " ".join(f"Perishable item {i} cannot be returned once opened." for i in range(60))
    text = (
        "# Refund policy\n\nRefunds are paid within 7 days.\n\n"
        f"## Perishables\n\n{body}\n\n"
        "## Electronics\n\nUnopened devices can be returned for 30 days.\n\n"
        "# Shipping\n\nWe ship worldwide.\n"
    )
    chunks = split_document(text, file_name="policy.md", max_tokens=120, target_tokens=80)
    check_invariants(text, chunks, 120)
    assert chunks[-1].title == "Shipping" and chunks[-1].section == "Shipping"
    assert (chunks[-1].start, chunks[-1].end) == (13, 15)
    perishables = [c for c in chunks if "Perishable item 30 " in c.text]
    assert len(perishables) == 1 and perishables[0].title == "Refund policy › Perishables"
    assert perishables[0].start == perishables[0].end == 7  # a split paragraph keeps its one line
    assert not any("Refund" in c.text and "worldwide" in c.text for c in chunks)


def test_small_sibling_sections_are_packed_with_their_common_heading() -> None:
    text = "# FAQ\n\n## Refunds?\n\nWithin 7 days.\n\n## Shipping?\n\nWorldwide.\n"
    (chunk,) = split_document(text, file_name="faq.md")
    assert (chunk.title, chunk.start, chunk.end) == ("FAQ", 1, 9)
    assert chunk.text == text.strip()


def _entry(name: str, extra: str = "") -> str:
    return (f"## {name}\n\nThe {name} lint checks one thing in the code you write.{extra}\n\n"
            f"### Example\n\nCalling {name} twice gives a warning on the second call.\n\n"
            f"### Explanation\n\nThe {name} rule keeps programs safe and clear.\n\n")


@pytest.mark.parametrize("target", [70, 80])
def test_whole_sections_are_packed_before_neighbouring_ones(target: int) -> None:
    """A reference page of short entries: each entry's parts join first, so no chunk holds the tail
    of one entry and the head of the next (packing left to right would, under the page's title)."""
    text = "# Lints\n\n" + _entry("alpha") + _entry("beta", " It is on by default and cannot be off.") + _entry("gamma")
    chunks = chunk_document(parse(text, name="lints.md"), file_name="lints.md", target_tokens=target,
                            max_tokens=target + 20).chunks
    assert [c.title for c in chunks] == ["Lints › alpha", "Lints › beta", "Lints › gamma"]
    for chunk, name in zip(chunks, ["alpha", "beta", "gamma"], strict=True):
        assert chunk.text.count("### Example") == 1 and chunk.text.count(f"The {name} rule") == 1


def test_top_level_sections_are_not_packed_together() -> None:
    text = "# Returns\n\nWithin 7 days.\n\n# Shipping\n\nWorldwide.\n"
    chunks = split_document(text, file_name="faq.md")
    assert [c.title for c in chunks] == ["Returns", "Shipping"]
    assert [c.text for c in chunks] == ["# Returns\n\nWithin 7 days.", "# Shipping\n\nWorldwide."]


def test_heading_only_section_is_merged_into_the_next_and_counted() -> None:
    prose = " ".join(f"Sentence {i} about cold chain handling." for i in range(40))
    text = f"# Manual\n\n{prose}\n\n## Chapter 2\n\n### 2.1 Vans\n\n{prose}\n"
    result = chunk_document(parse(text, name="m.md"), file_name="m.md", max_tokens=400, target_tokens=300)
    assert result.junk_merged == 1
    assert all(has_prose(re.sub(r"^#+ .*$", "", c.text, flags=re.M)) for c in result.chunks)
    second = result.chunks[1]
    assert second.text.startswith("## Chapter 2\n\n### 2.1 Vans\n\n")
    assert second.title == "Manual › Chapter 2 › 2.1 Vans" and second.start == 5


def test_rules_modelines_and_comments_are_dropped_and_counted() -> None:
    text = "Intro text.\n\n-----\n\n<!-- vim: set ft=markdown: -->\n\n---\n\nMore text.\n\nvim: set ts=4 sw=4 :\n"
    result = chunk_document(parse(text, name="a.md"), file_name="a.md")
    assert [c.text for c in result.chunks] == ["Intro text.\n\nMore text."]
    assert result.junk_dropped == 4
    assert not has_prose("| --- | --- |") and not has_prose("# vim: set ft=rst :") and has_prose("A")


def test_text_without_headings_is_titled_by_name_without_extensions() -> None:
    chunks = split_document("Just some notes.\n", file_name="notes/os.path.rst.txt")
    assert [(c.title, c.section, c.text) for c in chunks] == [("os.path", "", "Just some notes.")]


def test_a_long_table_splits_between_rows_and_every_piece_keeps_its_header() -> None:
    """node-gyp's option table was cut inside a row at "(e.g."; a row is the table's unit, and a
    piece of a table without its header rows is no table to a reader."""
    rows = "\n".join(f"| --opt{i} | Set the target architecture (e.g. ia32). Then build. |" for i in range(80))
    chunks = split_document(f"# Options\n\n| Flag | Meaning |\n| --- | --- |\n{rows}\n", file_name="o.md")
    assert len(chunks) >= 3
    for chunk in chunks:
        table = chunk.text[chunk.text.index("| Flag"):]
        assert table.startswith("| Flag | Meaning |\n| --- | --- |\n| --opt"), chunk.text[:80]
        assert all(line.endswith("Then build. |") for line in table.split("\n")[2:]), chunk.text[-80:]
        assert count_tokens(chunk.text) <= 450


def test_a_long_fenced_block_is_fenced_in_every_piece_and_keeps_indents() -> None:
    """A piece of a long code block starts and ends with its fence, and its first line keeps its
    indent; an indented code block after a paragraph keeps its first line's indent too."""
    code = "\n".join(f"    value_{i} = compute({i})  # step {i}" for i in range(200))
    chunks = split_document(f"# Build\n\n```python\n{code}\n```\n\nInstall:\n\n    $ npm install tool\n"
                            f"    $ tool --help\n", file_name="b.md")
    fenced = [c for c in chunks if "value_" in c.text]
    assert len(fenced) >= 3
    for chunk in fenced:
        body = chunk.text[chunk.text.index("```python"):]
        assert body.startswith("```python\n    value_"), body[:40]
        assert body.rstrip().endswith("```") or "Install:" in body
        assert count_tokens(chunk.text) <= 450
    assert "\n    $ npm install tool\n    $ tool --help" in chunks[-1].text


def test_long_paragraph_splits_at_sentence_ends() -> None:
    text = " ".join(f"Sentence number {i} talks about refunds and parcels." for i in range(200))
    chunks = split_document(text, file_name="a.txt", max_tokens=60, target_tokens=40)
    check_invariants(text, chunks, 60)
    assert len(chunks) > 5 and all(c.text.endswith(".") for c in chunks)


def test_paragraph_boundaries_are_preferred_over_sentences() -> None:
    paragraphs = [" ".join(f"Paragraph {p} sentence {s} is here." for s in range(6)) for p in range(8)]
    text = "\n\n".join(paragraphs)
    chunks = split_document(text, file_name="a.txt", max_tokens=160, target_tokens=120)
    check_invariants(text, chunks, 160)
    assert [part for c in chunks for part in c.text.split("\n\n")] == paragraphs
    assert [(c.start, c.end) for c in chunks] == [(1, 3), (5, 7), (9, 11), (13, 15)]


def test_unbroken_text_is_cut_between_tokens() -> None:
    text = "abcdefghij" * 400
    chunks = split_document(text, file_name="blob.txt", max_tokens=50, target_tokens=30)
    check_invariants(text, chunks, 50)
    assert "".join(c.text for c in chunks) == text


def test_long_line_block_split_keeps_line_ranges_within_the_block() -> None:
    lines = [f"- item {i} keeps the van at five degrees or colder" for i in range(80)]
    text = "# List\n\n" + "\n".join(lines) + "\n"
    chunks = split_document(text, file_name="l.md", max_tokens=100, target_tokens=80)
    check_invariants(text, chunks, 100)
    assert len(chunks) > 3
    for chunk in chunks[1:]:
        first = int(re.search(r"item (\d+)", chunk.text).group(1))
        assert chunk.start == first + 3


def test_crlf_and_bom_are_normalised() -> None:
    (chunk,) = split_document("\ufeff# Title\r\n\r\nFirst line.\r\nSecond line.\r\n", file_name="a.md")
    assert chunk.text == "# Title\n\nFirst line.\nSecond line." and (chunk.start, chunk.end) == (1, 4)


@pytest.mark.parametrize("text", ["", "   \n\n\t", "\ufeff", "\r\n\r\n"])
def test_blank_documents_have_no_chunks(text: str) -> None:
    assert split_document(text, file_name="a.md") == []


def test_inconsistent_sizes_are_a_config_error() -> None:
    with pytest.raises(ConfigError):
        split_document("text", file_name="a.md", max_tokens=100, target_tokens=200)
    with pytest.raises(ConfigError):
        split_document("text", file_name="a.md", max_tokens=10, target_tokens=0)


def test_code_inside_a_long_note_is_fenced_in_every_piece() -> None:
    """A reST note or list item holding a long code block is one text block; cut into pieces, each
    piece closes a fence it opened and the next opens it again (no chunk with half a fence)."""
    from knowtology_cli.parsers.base import Block, Document, Section

    code = "\n".join(f"    path('item/{i}/', views.item_{i}, name='item-{i}')," for i in range(80))
    note = f"Note: the routes are:\n\n```python\nurlpatterns = [\n{code}\n]\n```\n\nThat is all."
    doc = Document(format="rst", unit="line", sections=(Section(("Routes",), (Block(note, 1, 90, "text"),)),))
    chunks = chunk_document(doc, file_name="urls.txt", target_tokens=120, max_tokens=200).chunks
    assert len(chunks) > 2
    for chunk in chunks:
        fences = [line.strip() for line in chunk.text.split("\n") if line.lstrip().startswith("```")]
        assert len(fences) % 2 == 0 and chunk.tokens <= 200, chunk.text
    assert all(c.text.count("```python") == 1 for c in chunks[1:] if "path(" in c.text.split("\n")[1])


def test_output_before_its_reply_goes_with_the_reply() -> None:
    """AWS CLI examples: a bold title, one line saying what the command does, the command, "Output ::"
    (which reST renders "Output") and the reply. A chunk does not end with "Output": the parser marks
    a paragraph that introduces a literal block as a lead."""
    reply = "\n".join(f'    "Key{i}": "Value {i} of the reply, long enough to fill a chunk",' for i in range(12))
    text = "\n".join(
        f"**Example {n}: To create role {n}**\n\nThe following command creates role {n}.\n\n::\n\n"
        f"    aws iam create-role --role-name R{n}\n\nOutput ::\n\n    {{\n{reply}\n    }}\n" for n in (1, 2, 3))
    chunks = chunk_document(parse(text, name="create-role.rst"), file_name="create-role.rst",
                            target_tokens=200, max_tokens=400).chunks
    assert len(chunks) >= 3
    for chunk in chunks:
        assert chunk.text.rstrip().split("\n\n")[-1] != "Output", chunk.text


def test_a_chunk_of_merged_sections_is_titled_by_the_one_it_is_mostly_about() -> None:
    """Sibling sections packed together keep their common heading, unless one of them holds most of
    the chunk's tokens: then the chunk is named by that one (its trail includes the common part). A
    chunk that holds the common section's own text (its heading, its intro) is named by it."""
    from knowtology_cli.chunking import split_document

    body = " ".join(["Imports are cached, so the caller's context is not passed by default."] * 6)
    opening = "# Guide\n\n" + " ".join(["The guide opens with a long introduction to the engine."] * 60)
    siblings = (f"## Import context\n\n{body}\n\n## Expressions\n\nExpressions work like Python.\n\n"
                "## Filters\n\nShort.\n")
    chunks = split_document(f"{opening}\n\n{siblings}", file_name="guide.md", target_tokens=300, max_tokens=800)
    assert [c.title for c in chunks] == ["Guide", "Guide › Import context"]
    assert "Expressions work like Python." in chunks[1].text and chunks[1].section == "Guide › Import context"
    whole = split_document(f"# Guide\n\nA short intro.\n\n{siblings}", file_name="g.md", target_tokens=400,
                           max_tokens=800)
    assert [c.title for c in whole] == ["Guide"]  # the page's own start: the page names it
    even = split_document(f"{opening}\n\n## A\n\nOne two three four.\n\n## B\n\nFive six seven eight.\n",
                          file_name="even.md", target_tokens=300, max_tokens=800)
    assert even[-1].title == "Guide"  # no section holds most of it: the common heading
