"""Every reply a real local model gave (tests/fixtures/local-llm-tree-calls.jsonl) through validation and the splitter.

The fixture holds 14 tree-building calls kt made to Qwen2.5-Coder-0.5B-Instruct and Gemma 3 270M on
this machine: the exact messages sent and the raw replies (copied from
../shared/tools/local-llm/replies/, our own tool's recordings). Replies that finished are validated:
nothing of the rejected kinds may reach the tree. Replies cut at the output limit go through the
builder: the batch is split, the cut call is logged with the usage the server reported.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_llm_builder import assert_tree_sound, brain, build, make_kb, scripted

from knowtology_cli.builders.names import document_title
from knowtology_cli.builders.prompts import EXAMPLE_PATH, TREE_PLACEHOLDERS, system_prompt
from knowtology_cli.builders.validate import NameCheck, parse_reply, salvage_cut_reply
from knowtology_cli.llm.base import ProviderReply
from knowtology_cli.testing.fake_llm import parse_chunks, parse_tree

FIXTURE = Path(__file__).parent / "fixtures" / "local-llm-tree-calls.jsonl"
RECORDS = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]


def _parses(record: dict) -> bool:
    try:
        json.loads(record["output"])
    except json.JSONDecodeError:
        return False
    return True


FINISHED = [r for r in RECORDS if _parses(r)]
CUT = [r for r in RECORDS if r["finish_reason"] == "length"]


def sent_chunks(record: dict) -> list[tuple[str, str]]:
    return parse_chunks(record["messages"][-1]["content"])


def check_for(record: dict) -> NameCheck:
    chunks = sent_chunks(record)
    doc_of = {cid: cid.split("#")[0] for cid, _ in chunks}
    titles = {cid.split("#")[0]: document_title(text.split("\n")[0]) for cid, text in chunks}
    return NameCheck(chunk_ids=doc_of, files=set(doc_of.values()), examples=[EXAMPLE_PATH],
                     placeholders=TREE_PLACEHOLDERS, instructions=system_prompt(False) + system_prompt(True),
                     titles=titles, doc_of=doc_of)


def junk(segment: str, ids: set[str]) -> str | None:
    """An independent statement of what may never be a category name (kept apart from NameCheck)."""
    if any(cid in segment or segment in cid.split("/") for cid in ids):
        return "chunk id or part of its path"
    if re.search(r"[#|›<>`]", segment):
        return "marker"
    if not re.search(r"[^\W\d_]", segment):
        return "no letters"
    if re.search(r"\.(md|rst|txt|jsonl)$", segment):
        return "file name"
    if segment.casefold() in {"one line", "...", "path", "categories", "assignments", "snippet", "description"}:
        return "placeholder"
    return None


def test_the_fixture_holds_every_recorded_call():
    assert len(RECORDS) == 14 and len(FINISHED) + len(CUT) == 14  # each one is replayed by a test below
    assert all(r["finish_reason"] == "stop" for r in FINISHED)
    assert {r["model"].split(" ")[0] for r in RECORDS} == {"qwen2.5-coder-0.5b-instruct", "gemma-3-270m"}


@pytest.mark.parametrize("record", FINISHED, ids=lambda r: f"{r['prompt_tokens']}in-{r['completion_tokens']}out")
def test_no_recorded_junk_reaches_the_tree(record):
    chunks = sent_chunks(record)
    ids = [cid for cid, _ in chunks]
    existing = parse_tree(record["messages"][-1]["content"])
    valid = parse_reply(json.loads(record["output"]), ids, existing_paths=existing, names=check_for(record))
    new_nodes = {c.path for c in valid.categories}
    for path in new_nodes:
        assert not path.casefold().startswith("returns/refunds"), path  # the prompt's example
        for segment in path.split("/"):
            assert junk(segment, set(ids)) is None, (segment, junk(segment, set(ids)))
    for a in valid.assignments:  # an accepted chunk sits at a new node or at a leaf that already existed
        assert a.path in new_nodes or any(a.path == e or e.startswith(a.path + "/") or a.path.startswith(e)
                                          for e in existing)
    placed = [a.chunk_id for a in valid.assignments]
    rejected = [r.chunk_id for r in valid.rejected]
    assert not set(placed) & set(rejected)  # never mapped to a rejected node
    assert sorted(placed + rejected + valid.missing_ids) == sorted(ids)  # every chunk: placed, re-asked or retried
    assert all(c.description.casefold() not in {"one line", "..."} for c in valid.categories)


def test_recorded_replies_reject_what_the_issue_lists():
    reasons: dict[str, set[str]] = {}
    for record in FINISHED:
        ids = [cid for cid, _ in sent_chunks(record)]
        valid = parse_reply(json.loads(record["output"]), ids,
                            existing_paths=parse_tree(record["messages"][-1]["content"]), names=check_for(record))
        for r in valid.rejected:
            reasons.setdefault(r.reason, set()).add(r.name)
    text = " ".join(reasons)
    for kind in ("chunk id", "file", "'#'", "example path"):
        assert kind in text, (kind, reasons)


@pytest.mark.parametrize("record", CUT, ids=lambda r: f"{r['prompt_tokens']}in-{r['completion_tokens']}out")
def test_a_recorded_cut_reply_keeps_its_whole_part_or_splits_and_its_usage_is_logged(tmp_path, record):
    chunks = sent_chunks(record)
    rows = [{"chunk_id": cid, "doc_id": cid.split("#")[0], "text": text} for cid, text in chunks]
    kb = make_kb(tmp_path, rows)
    ids = sorted(cid for cid, _ in chunks)
    state = {"first": True}

    def replay(system, user):
        if state["first"]:
            state["first"] = False
            return ProviderReply(text=record["output"], input_tokens=record["prompt_tokens"],
                                 output_tokens=record["completion_tokens"], finish_reason="length", truncated=True)
        return brain(system, user)

    llm = scripted(replay)
    report = build(kb, llm)
    sent = [sorted(cid for cid, _ in parse_chunks(c.user)) for c in llm.calls]
    whole = salvage_cut_reply(record["output"])
    resent = {cid for call in sent[1:] for cid in call}
    kept = set(ids) - resent
    assert sent[0] == ids and all(len(call) == len(set(call)) for call in sent)
    if whole is None:  # nothing whole before the cut: the batch is split in halves
        assert not kept and sorted(sent[1] + sent[2]) == ids and sent[1] and sent[2]
    else:  # only chunks with a whole (and valid) assignment were kept; the rest went out again
        assert kept <= {a["chunk_id"] for a in whole["assignments"]}
    assert report.unmapped == 0
    rows_logged = kb.tree.calls("default")
    assert rows_logged[0]["status"] == "truncated"
    assert (rows_logged[0]["input_tokens"], rows_logged[0]["output_tokens"]) == (
        record["prompt_tokens"], record["completion_tokens"])
    assert report.input_tokens == sum(r["input_tokens"] for r in rows_logged)
    assert_tree_sound(kb)


def test_junk_replayed_twice_ends_with_offline_names_and_every_chunk_mapped(tmp_path):
    record = next(r for r in FINISHED if "sample_corpus/engineering/runbooks" in r["output"]
                  and "<tree>" not in r["messages"][-1]["content"])
    chunks = sent_chunks(record)
    rows = [{"chunk_id": cid, "doc_id": cid.split("#")[0], "file_name": cid.split("#")[0], "text": text}
            for cid, text in chunks]
    kb = make_kb(tmp_path, rows)
    ids = {cid for cid, _ in chunks}
    recorded = json.loads(record["output"])

    def same_junk(system, user):  # a model that repeats itself, whatever it is told
        sent = {cid for cid, _ in parse_chunks(user)}
        return {"categories": recorded["categories"],
                "assignments": [a for a in recorded["assignments"] if a["chunk_id"] in sent]
                + [{"chunk_id": c, "path": "sample_corpus", "snippet": ""} for c in sent
                   if c not in {a["chunk_id"] for a in recorded["assignments"]}]}

    llm = scripted(same_junk)
    report = build(kb, llm)
    assert report.unmapped == 0 and report.rejected_names > 0
    assert report.name_origins.get("offline", 0) >= 1 and report.name_origins.get("llm_reasked", 0) == 0
    reasks = [c for c in llm.calls if "used names that are not category names" in c.user]
    assert reasks and all("is a chunk id" in c.user or "file" in c.user for c in reasks)
    for node in kb.tree.nodes("default"):
        assert junk(node.name, ids) is None, node.name
    assert any(n.startswith("names: ") and "from the offline builder" in n for n in report.notes)
    assert_tree_sound(kb)
