"""Property tests of the ingest reader (issue #6.1): for any bytes it never crashes, every line is
either a chunk or a listed problem, ids are stable across re-reads, and no text is lost.

The chunker's own invariants live in ``test_chunking.py``; here only what reading adds on top:
document chunk ids stable across re-ingest, and the document's words all reaching some chunk.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from knowtology_cli.errors import InputError
from knowtology_cli.ingest import MAX_ID_CHARS, MAX_TEXT_CHARS, read_inputs, require_valid

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
LOCATION = re.compile(r"^(?P<file>[^:]+)(?::(?P<line>\d+))?: .+ — .+$")

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=10)
texts = st.text(min_size=0, max_size=200)
ids = st.none() | st.text(max_size=40) | st.integers(-5, 10**12) | st.booleans() | json_values
row = st.fixed_dictionaries(
    {"text": st.one_of(texts, json_values)},
    optional={"id": ids, "_id": ids, "chunk_id": ids, "doc_id": st.none() | st.text(max_size=10) | st.integers(),
              "chunk_index": st.none() | st.integers(-3, 50) | st.text(max_size=3),
              "title": st.none() | st.text(max_size=30) | st.integers(), "metadata": json_values,
              "file_name": st.text(max_size=10)},
)
# a JSONL line holds no LF by definition (lone CR, U+2028 and U+0085 may appear: they are not line ends)
line = st.one_of(row.map(json.dumps), st.text(st.characters(exclude_characters="\n", exclude_categories=("Cs",)), max_size=60),
                 json_values.map(json.dumps), st.just(""))


def _write(tmp: Path, name: str, data: bytes) -> str:
    path = tmp / name
    path.write_bytes(data)
    return str(path)


@given(lines=st.lists(line, max_size=12), newline=st.sampled_from(["\n", "\r\n"]), bom=st.booleans())
@SETTINGS
def test_any_jsonl_is_read_without_crashing_and_every_line_is_accounted_for(tmp_path: Path, lines: list[str],
                                                                           newline: str, bom: bool) -> None:
    data = ("\ufeff" if bom else "") + newline.join(lines) + newline
    source = _write(tmp_path, "in.jsonl", data.encode("utf-8"))
    batch = read_inputs([source])
    for problem in batch.problems:
        match = LOCATION.match(problem)
        assert match and match["file"] == f"{tmp_path.name}/in.jsonl", problem  # source (folder) / path
    non_blank = [n for n, text in enumerate(data.lstrip("\ufeff").split(newline), 1) if text.strip()]
    where = {int(LOCATION.match(p)["line"]) for p in batch.problems if LOCATION.match(p)["line"]}
    # a line is a chunk, or a problem names it (duplicates name the later line)
    whole_file = [p for p in batch.problems if not LOCATION.match(p)["line"]]  # binary, empty
    assert len(batch.chunks) + len(where) == len(non_blank) or (whole_file and not batch.chunks)
    for chunk in batch.chunks:
        assert chunk.text.strip() and "\r\n" not in chunk.text and len(chunk.text) <= MAX_TEXT_CHARS
        assert chunk.chunk_id and len(chunk.chunk_id) <= MAX_ID_CHARS
        assert all(ord(c) >= 32 for c in chunk.chunk_id)
    assert len({c.chunk_id for c in batch.chunks}) == len(batch.chunks)


@given(data=st.binary(max_size=300))
@SETTINGS
def test_arbitrary_bytes_never_crash(tmp_path: Path, data: bytes) -> None:
    for name in ("in.jsonl", "in.md", "in.txt"):
        batch = read_inputs([_write(tmp_path, name, data)])
        assert batch.chunks or batch.problems or batch.no_text
        if not batch.chunks and not batch.problems:  # markup only: nothing to index is still an error
            with pytest.raises(InputError, match="no text to index"):
                require_valid(batch, skip_invalid=True)
        for problem in batch.problems:
            assert LOCATION.match(problem), problem


@given(rows=st.lists(st.fixed_dictionaries({"text": texts.filter(lambda t: t.strip())},
                                           optional={"doc_id": st.text(st.characters(min_codepoint=32), min_size=1, max_size=8),
                                                     "chunk_index": st.integers(0, 5),
                                                     "title": st.text(max_size=10)}), min_size=1, max_size=10))
@SETTINGS
def test_text_is_kept_verbatim_and_ids_are_stable(tmp_path: Path, rows: list[dict]) -> None:
    source = _write(tmp_path, "rows.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
    first, second = read_inputs([source]), read_inputs([source])
    assert [(c.chunk_id, c.content_hash) for c in first.chunks] == [(c.chunk_id, c.content_hash) for c in second.chunks]
    duplicates = {p.split(": ", 1)[0] for p in first.problems if "duplicate chunk_id" in p}
    assert len(first.chunks) + len(duplicates) == len(rows)
    by_line = {int(c_where.rsplit(":", 1)[1]): c for c_where, c in
               zip([first.origins[c.chunk_id] for c in first.chunks], first.chunks)}
    for number, chunk in by_line.items():
        assert chunk.text == rows[number - 1]["text"].replace("\r\n", "\n")  # nothing lost or trimmed


@given(rows=st.lists(st.text(min_size=1, max_size=50).filter(lambda t: t.strip()), min_size=1, max_size=8,
                     unique=True))
@SETTINGS
def test_derived_ids_do_not_depend_on_line_order_or_other_rows(tmp_path: Path, rows: list[str]) -> None:
    forward = read_inputs([_write(tmp_path, "a.jsonl", "".join(json.dumps({"text": t}) + "\n" for t in rows).encode())])
    backward = read_inputs([_write(tmp_path, "a.jsonl",
                                   "".join(json.dumps({"text": t}) + "\n" for t in reversed(rows)).encode())])
    assume(not forward.problems and not backward.problems)  # texts that only differ by CRLF collide
    assert {c.text: c.chunk_id for c in forward.chunks} == {c.text: c.chunk_id for c in backward.chunks}


words = st.text(alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd")), min_size=1, max_size=12)
paragraphs = st.lists(st.lists(words, min_size=1, max_size=40).map(" ".join), min_size=1, max_size=12)


@given(paras=paragraphs, heading=st.booleans(), crlf=st.booleans())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_document_words_all_land_in_chunks_with_stable_ids(tmp_path: Path, paras: list[str], heading: bool,
                                                           crlf: bool) -> None:
    body = ("# Title\n\n" if heading else "") + "\n\n".join(paras) + "\n"
    if crlf:
        body = body.replace("\n", "\r\n")
    source = _write(tmp_path, "doc.md", body.encode("utf-8"))
    first, second = read_inputs([source]), read_inputs([source])
    assert not first.problems
    assert [(c.chunk_id, c.content_hash) for c in first.chunks] == [(c.chunk_id, c.content_hash) for c in second.chunks]
    assert [c.chunk_id for c in first.chunks] == [f"{tmp_path.name}/doc.md#{i}" for i in range(len(first.chunks))]
    joined = " ".join(c.text for c in first.chunks).split()
    expected = [w for p in paras for w in p.split()]
    position = 0
    for word in expected:  # every word, in order (a chunk may repeat a heading, never drop text)
        position = joined.index(word, position) + 1
