"""Tests of knowtology_cli.chunking: structure-aware splitting and its invariants."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowtology_cli.chunking import DocChunk, find_headings, normalise, split_document
from knowtology_cli.errors import ConfigError
from knowtology_cli.tokens import count_tokens

_WS = re.compile(r"\s+")


def squash(text: str) -> str:
    return _WS.sub("", text)


def check_invariants(text: str, chunks: list[DocChunk], max_tokens: int) -> None:
    normalised, _ = normalise(text)
    # Nothing lost, nothing duplicated (modulo whitespace), and in document order.
    assert "".join(squash(c.text) for c in chunks) == squash(normalised)
    previous_end = 1 if text.startswith("\ufeff") else 0
    for index, chunk in enumerate(chunks):
        assert chunk.index == index
        assert chunk.text and chunk.text == chunk.text.strip()
        assert previous_end <= chunk.start < chunk.end <= len(text)
        # Offsets point into the original text: the same characters, modulo CRLF / CR.
        assert text[chunk.start : chunk.end].replace("\r\n", "\n").replace("\r", "\n") == chunk.text
        assert not squash(text[previous_end : chunk.start])
        previous_end = chunk.end
        assert chunk.tokens == count_tokens(chunk.text)
        assert chunk.tokens <= max_tokens
    assert not squash(text[previous_end:])


# -- properties -----------------------------------------------------------------------------

words = st.sampled_from(
    ["refund", "policy", "the", "parcel", "Perishables", "7", "days,", "über", "naïve", "日本語", "🙂",
     "e.g.", "end.", "Why?", "wow!", "x" * 40, "https://example.com/a/very/long/path?q=1", "<|endoftext|>"]
)
sentences = st.lists(words, min_size=1, max_size=25).map(lambda ws: " ".join(ws) + ".")
paragraphs = st.lists(sentences, min_size=1, max_size=6).map(" ".join)
headings = st.one_of(
    st.builds(lambda n, t: "#" * n + " " + t, st.integers(1, 4), sentences),
    sentences.map(lambda t: f"{t}\n{'=' * len(t)}"),
    sentences.map(lambda t: f"{t}\n{'-' * len(t)}"),
    sentences.map(lambda t: f"{'~' * len(t)}\n{t}\n{'~' * len(t)}"),
)
fences = st.lists(sentences, min_size=1, max_size=4).map(lambda ls: "```\n# not a heading\n" + "\n".join(ls) + "\n```")
blocks = st.one_of(paragraphs, paragraphs, headings, fences, st.text(max_size=80))
documents = st.builds(
    lambda bom, parts, newline: ("\ufeff" if bom else "") + "\n\n".join(parts).replace("\n", newline),
    st.booleans(),
    st.lists(blocks, max_size=14),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
sizes = st.tuples(st.integers(8, 60), st.integers(0, 40)).map(lambda t: (t[0] + t[1], t[0]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=documents, size=sizes)
def test_split_invariants_on_structured_documents(text: str, size: tuple[int, int]) -> None:
    max_tokens, target = size
    chunks = split_document(text, file_name="doc.md", max_tokens=max_tokens, target_tokens=target)
    check_invariants(text, chunks, max_tokens)
    assert split_document(text, file_name="doc.md", max_tokens=max_tokens, target_tokens=target) == chunks


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=600), size=sizes, name=st.sampled_from(["a.md", "a.rst", "a.txt"]))
def test_split_invariants_on_arbitrary_text(text: str, size: tuple[int, int], name: str) -> None:
    max_tokens, target = size
    chunks = split_document(text, file_name=name, max_tokens=max_tokens, target_tokens=target)
    check_invariants(text, chunks, max_tokens)


# -- concrete documents ---------------------------------------------------------------------

def test_markdown_heading_trail_becomes_title() -> None:
    body = " ".join(f"Perishable item {i} cannot be returned once opened." for i in range(60))
    text = (
        "# Refund policy\n\nRefunds are paid within 7 days.\n\n"
        f"## Perishables\n\n{body}\n\n"
        "## Electronics\n\nUnopened devices can be returned for 30 days.\n\n"
        "# Shipping\n\nWe ship worldwide.\n"
    )
    chunks = split_document(text, file_name="policy.md", max_tokens=120, target_tokens=80)
    check_invariants(text, chunks, 120)
    titles = [c.title for c in chunks]
    assert titles[-1] == "Shipping"
    perishables = [c for c in chunks if "Perishable item 30 " in c.text]
    assert len(perishables) == 1
    assert perishables[0].title == "Refund policy › Perishables"
    # No chunk mixes the two top-level sections.
    assert not any("Refund" in c.text and "worldwide" in c.text for c in chunks)
    assert all(c.tokens <= 120 for c in chunks) and len(chunks) >= 4


def test_small_sibling_sections_are_packed_with_their_common_heading() -> None:
    text = "# FAQ\n\n## Refunds?\n\nWithin 7 days.\n\n## Shipping?\n\nWorldwide.\n"
    chunks = split_document(text, file_name="faq.md")
    assert len(chunks) == 1
    assert chunks[0].title == "FAQ"
    assert chunks[0].text == text.strip()


def test_top_level_sections_are_not_packed_together() -> None:
    text = "# Returns\n\nWithin 7 days.\n\n# Shipping\n\nWorldwide.\n"
    chunks = split_document(text, file_name="faq.md")
    assert [c.title for c in chunks] == ["Returns", "Shipping"]
    assert [c.text for c in chunks] == ["# Returns\n\nWithin 7 days.", "# Shipping\n\nWorldwide."]


def test_rest_underlined_headings_and_levels() -> None:
    text = (
        "==========\nUser guide\n==========\n\nIntro text.\n\n"
        "Installing\n----------\n\nRun the installer.\n\n"
        "On Linux\n~~~~~~~~\n\nUse the package manager.\n"
    )
    assert [(h.level, h.title) for h in find_headings(text)] == [
        (1, "User guide"), (2, "Installing"), (3, "On Linux")
    ]
    chunks = split_document(text, file_name="guide.rst", max_tokens=12, target_tokens=8)
    check_invariants(text, chunks, 12)
    assert chunks[-1].title == "User guide › Installing › On Linux"
    assert chunks[-1].text.startswith("On Linux\n~~~~~~~~")


def test_hash_lines_are_not_headings_in_rst_or_code_fences() -> None:
    assert find_headings("# comment\n\ntext\n", atx=False) == []
    fenced = "Intro.\n\n```bash\n# install it\npip install x\n```\n"
    assert find_headings(fenced) == []
    assert split_document(fenced, file_name="a.md")[0].title == "a.md"


def test_front_matter_is_not_a_heading() -> None:
    text = "---\ntitle: Guide\n---\n\n# Real heading\n\nBody.\n"
    assert [h.title for h in find_headings(text)] == ["Real heading"]


def test_text_without_headings_is_titled_by_file_name() -> None:
    chunks = split_document("Just some notes.\n", file_name="notes/todo.txt")
    assert [(c.title, c.text) for c in chunks] == [("todo.txt", "Just some notes.")]


def test_long_paragraph_splits_at_sentence_ends() -> None:
    text = " ".join(f"Sentence number {i} talks about refunds and parcels." for i in range(200))
    chunks = split_document(text, file_name="a.txt", max_tokens=60, target_tokens=40)
    check_invariants(text, chunks, 60)
    assert len(chunks) > 5
    assert all(c.text.endswith(".") for c in chunks)
    assert all(c.tokens >= 15 for c in chunks)


def test_paragraph_boundaries_are_preferred_over_sentences() -> None:
    paragraphs = [" ".join(f"Paragraph {p} sentence {s} is here." for s in range(6)) for p in range(8)]
    text = "\n\n".join(paragraphs)
    chunks = split_document(text, file_name="a.txt", max_tokens=160, target_tokens=120)
    check_invariants(text, chunks, 160)
    # Every chunk is made of whole paragraphs (54 tokens each: two fit the target, three do not).
    assert [part for c in chunks for part in c.text.split("\n\n")] == paragraphs
    assert len(chunks) == 4


def test_unbroken_text_is_cut_between_tokens() -> None:
    text = "abcdefghij" * 400
    chunks = split_document(text, file_name="blob.txt", max_tokens=50, target_tokens=30)
    check_invariants(text, chunks, 50)
    assert "".join(c.text for c in chunks) == text
    assert len(chunks) > 1


def test_long_word_run_is_cut_at_spaces() -> None:
    text = " ".join(["word"] * 3000)
    chunks = split_document(text, file_name="a.txt", max_tokens=100, target_tokens=60)
    check_invariants(text, chunks, 100)
    assert all(set(c.text.split(" ")) == {"word"} for c in chunks)


def test_small_trailing_piece_is_merged_into_the_previous_chunk() -> None:
    # 6 sentences of ~10 tokens, target 30: packing gives 3 + 3 sentences... plus a 2-token tail.
    text = " ".join(f"This sentence number {i} has ten tokens." for i in range(6)) + " Bye."
    chunks = split_document(text, file_name="a.txt", max_tokens=70, target_tokens=30, min_tokens=5)
    check_invariants(text, chunks, 70)
    assert chunks[-1].text.endswith("has ten tokens. Bye.")


def test_crlf_and_bom_offsets_point_into_the_original() -> None:
    text = "\ufeff# Title\r\n\r\nFirst line.\r\nSecond line.\r\n"
    (chunk,) = split_document(text, file_name="a.md")
    assert chunk.text == "# Title\n\nFirst line.\nSecond line."
    assert chunk.start == 1
    assert text[chunk.start : chunk.end] == "# Title\r\n\r\nFirst line.\r\nSecond line."


@pytest.mark.parametrize("text", ["", "   \n\n\t", "\ufeff", "\r\n\r\n"])
def test_blank_documents_have_no_chunks(text: str) -> None:
    assert split_document(text, file_name="a.md") == []


def test_inconsistent_sizes_are_a_config_error() -> None:
    with pytest.raises(ConfigError):
        split_document("text", file_name="a.md", max_tokens=100, target_tokens=200)
    with pytest.raises(ConfigError):
        split_document("text", file_name="a.md", max_tokens=10, target_tokens=0)
