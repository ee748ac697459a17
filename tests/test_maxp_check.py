"""The MaxP stage measured by benchmarks.maxp_check (not shipped): sentence windows, the window cache
and the top-N fusion. The experiment's figures rest on these behaving as described."""

from __future__ import annotations

from benchmarks.maxp import (
    PassageScorer,
    WindowRule,
    maxp_rescore,
    sentence_windows,
    split_sentences,
)
from knowtology_cli.embedders.hash import HashEmbedder
from knowtology_cli.stores.base import ScoredId


def test_sentences_follow_the_chunkers_rule_and_windows_overlap() -> None:
    text = "first one. second (two)! third?\n\nfourth without a stop\nstill fourth. fifth."
    assert split_sentences(text) == ["first one.", "second (two)!", "third?", "fourth without a stop still fourth.",
                                     "fifth."]
    assert sentence_windows(text, WindowRule(3, 2)) == [
        "first one. second (two)! third?", "third? fourth without a stop still fourth. fifth."]
    # six sentences, stride 2: the last window is moved to end on the last sentence
    six = " ".join(f"s{i}." for i in range(6))
    assert sentence_windows(six, WindowRule(3, 2)) == ["s0. s1. s2.", "s2. s3. s4.", "s3. s4. s5."]
    assert sentence_windows("only one sentence", WindowRule(3, 2)) == ["only one sentence"]
    assert sentence_windows("  ", WindowRule(1, 1)) == []


def test_rescoring_reorders_only_the_top_n_and_keeps_every_hit() -> None:
    ranking = [ScoredId(f"c{i}", 1.0 - i / 10) for i in range(8)]
    # incoming head (min-max) 1, 2/3, 1/3, 0; MaxP (min-max) 0.3, 0, 0.6, 1 -> fused .65, .33, .47, .5
    maxp = {"c0": 0.3, "c1": 0.0, "c2": 0.6, "c3": 1.0}
    out = maxp_rescore(ranking, maxp, top=4)
    assert [s.chunk_id for s in out] == ["c0", "c3", "c2", "c1", "c4", "c5", "c6", "c7"]
    assert out[4:] == ranking[4:]  # the tail is untouched, scores and all
    scores = [s.score for s in out]
    assert scores == sorted(scores, reverse=True)  # the head stays within its incoming score range
    assert all(ranking[3].score <= s <= ranking[0].score for s in scores[:4])
    assert maxp_rescore(ranking, {}, top=3) == ranking
    assert maxp_rescore(ranking[:1], maxp, top=3) == ranking[:1]


def test_a_chunk_with_one_matching_sentence_rises_above_a_diffuse_match() -> None:
    query = "glacier melt rate measurement"
    focused = ("the committee approved budget item apples after a long debate. "
               "we report a glacier melt rate measurement method. "
               "the committee approved budget item eagles after a long debate.")
    diffuse = ("a glacier was visited by the survey team in early spring. some melt was noticed along its lower "
               "northern edge. nobody knew the rate at which those old valleys changed. one measurement is planned "
               "for next summer by students.")
    other = "the orchestra tuned its harps and drums before the concert."
    embedder = HashEmbedder(256)
    qvec = embedder.embed_query(query)
    whole = embedder.embed_documents([focused, diffuse, other]) @ qvec
    assert whole[0] < whole[1]  # one vector per chunk: the diffuse chunk looks closer
    ranking = [ScoredId("diffuse", float(whole[1])), ScoredId("focused", float(whole[0])),
               ScoredId("other", float(whole[2])), ScoredId("tail", -1.0)]
    scorer = PassageScorer(embedder.embed_documents, WindowRule(1, 1))
    chunks = {"diffuse": ("", diffuse), "focused": ("", focused), "other": ("", other)}
    maxp = scorer.scores(qvec, chunks)
    assert maxp["focused"] > maxp["diffuse"] > maxp["other"]
    out = maxp_rescore(ranking, maxp, top=3)
    assert [s.chunk_id for s in out] == ["focused", "diffuse", "other", "tail"]
    # the windows are cached by chunk id + text: another query embeds nothing new, a changed text does
    embedded = scorer.embedded
    scorer.scores(embedder.embed_query("budget debate"), chunks)
    assert scorer.embedded == embedded
    scorer.scores(qvec, {"focused": ("", focused + " changed.")})
    assert scorer.embedded == embedded + 4  # its four sentences


def test_the_cache_evicts_the_least_recently_used_chunk() -> None:
    embedder = HashEmbedder()
    scorer = PassageScorer(embedder.embed_documents, WindowRule(1, 1), cache_windows=4)
    qvec = embedder.embed_query("x")
    scorer.scores(qvec, {"a": ("", "one. two."), "b": ("", "three. four.")})
    scorer.scores(qvec, {"a": ("", "one. two.")})  # a is now the most recent
    scorer.scores(qvec, {"c": ("", "five. six.")})  # evicts b
    before = scorer.embedded
    scorer.scores(qvec, {"a": ("", "one. two.")})
    assert scorer.embedded == before
    scorer.scores(qvec, {"b": ("", "three. four.")})
    assert scorer.embedded == before + 2
