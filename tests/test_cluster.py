"""The offline tree builder: shape, determinism, topical separation, nearest-leaf assignment, and the
naming method (class-based TF-IDF against siblings, coverage, MMR, grab-bag rule) on hand-made nodes."""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict

import numpy as np
import pytest

from knowtology_cli.builders.cluster import (
    ClusterItem,
    assign_to_leaves,
    build_cluster_tree,
    leaf_centroids,
    spherical_kmeans,
)
from knowtology_cli.builders.naming import Namer, Node, _clean
from knowtology_cli.builders.params import DEFAULT_PARAMS, TreeParams
from knowtology_cli.builders.terms import (
    PHRASE,
    build_term_index,
    corpus_wide_terms,
    join_names,
    lsa_features,
    phrases,
    stem,
)
from knowtology_cli.embedders import get_embedder
from knowtology_cli.errors import BuildError
from knowtology_cli.models import TreeReply

TOPICS = {
    "cooking": (
        "recipe oven dough flour butter sugar bake simmer sauce garlic onion pasta knead yeast "
        "roast chicken skillet whisk vinegar olive seasoning dessert"
    ).split(),
    "networking": (
        "router packet latency bandwidth firewall subnet switch ethernet protocol tcp dns gateway "
        "routing vlan throughput socket handshake bgp ipv6 congestion"
    ).split(),
    "astronomy": (
        "telescope galaxy nebula orbit planet comet asteroid star supernova redshift eclipse lunar "
        "solar cosmic quasar pulsar spectrum constellation meteor observatory"
    ).split(),
}
FILLER = "the a of and to in is for with this that on we it".split()


def _corpus(per_topic: int = 30, seed: int = 7) -> tuple[list[ClusterItem], list[str]]:
    rng = random.Random(seed)
    items, topics = [], []
    for topic, vocab in TOPICS.items():
        for i in range(per_topic):
            words = [rng.choice(vocab) if rng.random() < 0.6 else rng.choice(FILLER) for _ in range(40)]
            title = " ".join(rng.sample(vocab, 2)).title()
            items.append(
                ClusterItem(
                    chunk_id=f"{topic}-{i}",
                    text=" ".join(words).capitalize() + ".",
                    title=title,
                    doc_id=f"{topic}-doc-{i // 3}",
                    file_name=f"{topic}/doc-{i // 3}.md",
                )
            )
            topics.append(topic)
    return items, topics


def _embed(items: list[ClusterItem]) -> np.ndarray:
    return get_embedder("hash").embed_documents([f"{it.title}\n{it.text}" for it in items])


@pytest.fixture(scope="module")
def corpus() -> tuple[list[ClusterItem], list[str], np.ndarray, TreeReply]:
    items, topics = _corpus()
    vectors = _embed(items)
    return items, topics, vectors, build_cluster_tree(items, vectors)


def _check_shape(reply: TreeReply, items: list[ClusterItem]) -> int:
    """Every item mapped once to a leaf, no node with a single child; returns the deepest level."""
    assert [a.chunk_id for a in reply.assignments] == [it.chunk_id for it in items]
    paths = [c.path for c in reply.categories]
    assert len(paths) == len(set(paths)), "a category is listed twice"
    categories = set(paths)
    prefixes = {"/".join(a.path.split("/")[:k]) for a in reply.assignments for k in range(1, a.path.count("/") + 2)}
    assert categories == prefixes, "categories must be exactly the prefixes of the leaf paths"
    leaves = {a.path for a in reply.assignments}
    parents = {p.rsplit("/", 1)[0] for p in categories if "/" in p}
    assert leaves == categories - parents, "assignments must point at leaves"
    depths = {p.count("/") + 1 for p in leaves}
    assert all(1 <= d <= 3 for d in depths)
    for category in reply.categories:  # parents are listed before their children
        if "/" in category.path:
            assert paths.index(category.path.rsplit("/", 1)[0]) < paths.index(category.path)
    children = Counter(p.rsplit("/", 1)[0] for p in categories if "/" in p)
    only_child = [parent for parent, n in children.items() if n == 1]
    assert not only_child, f"nodes with a single child: {only_child}"
    return max(depths)


def test_every_chunk_mapped_once_to_a_leaf_and_the_tree_reaches_three_levels(corpus) -> None:
    items, _, _, reply = corpus
    assert _check_shape(reply, items) == 3
    assert all(a.snippet and "\n" not in a.snippet for a in reply.assignments)
    assert all(c.description for c in reply.categories)


def test_same_input_same_tree(corpus) -> None:
    items, _, vectors, reply = corpus
    again = build_cluster_tree(list(items), vectors.copy())
    assert again == reply
    other_seed = build_cluster_tree(items, vectors, seed=5)
    _check_shape(other_seed, items)


def test_names_unique_among_siblings_without_slash_or_parent_name(corpus) -> None:
    _, _, _, reply = corpus
    children: dict[str, list[str]] = defaultdict(list)
    for category in reply.categories:
        parent, _, name = category.path.rpartition("/")
        children[parent].append(name)
        assert name.strip() == name and name, "empty or padded name"
        assert "cluster" not in name.lower()
        if parent:
            assert name.lower() != parent.rsplit("/", 1)[-1].lower(), "a child repeats its parent's name"
    for names in children.values():
        assert len({n.lower() for n in names}) == len(names), f"duplicate sibling names: {names}"


def test_topics_land_in_separate_level_one_categories_with_telling_names(corpus) -> None:
    _, topics, _, reply = corpus
    topics_of: dict[str, Counter[str]] = defaultdict(Counter)
    for topic, assignment in zip(topics, reply.assignments, strict=True):
        topics_of[assignment.path.split("/")[0]][topic] += 1
    assert 3 <= len(topics_of) <= 6
    for name, counts in topics_of.items():
        topic, count = counts.most_common(1)[0]
        assert count >= 0.9 * sum(counts.values()), f"{name!r} mixes topics: {counts}"
        assert _stems(name) & {stem(w) for w in TOPICS[topic]}, f"{name!r} does not say {topic}"
    assert {c.most_common(1)[0][0] for c in topics_of.values()} == set(TOPICS)


def test_descriptions_are_plain_sentences_without_counts(corpus) -> None:
    _, _, _, reply = corpus
    parents = {c.path.rsplit("/", 1)[0] for c in reply.categories if "/" in c.path}
    for category in reply.categories:
        text = category.description
        assert text.startswith("About ") and text.endswith((".", "…")), text
        assert not re.search(r"\b\d+ chunks?\b|\(\d+\)", text), f"a description with counts: {text!r}"
        if category.path in parents:
            assert "Covers " in text, text
        name_stems = _stems(category.path.rsplit("/", 1)[-1])
        about = text.split(".")[0].removeprefix("About ")
        assert not (_stems(about) & name_stems), f"the description repeats the name: {category.path!r}: {text!r}"


def _stems(text: str) -> set[str]:
    return {t.key for phrase in phrases(text) for t in phrase if t.key}


@pytest.mark.parametrize("n", [1, 2, 5, 11, 23, 24])
def test_small_collections_get_fewer_levels(n: int) -> None:
    items, _ = _corpus(per_topic=10)
    items = items[:: max(1, len(items) // n)][:n]
    reply = build_cluster_tree(items, _embed(items))
    depth = _check_shape(reply, items)
    assert depth <= (3 if n >= 24 else 2 if n >= 12 else 1)
    if n < 6:  # too small to split into two parts of min_leaf: one category holds everything
        assert len(reply.categories) == 1


def test_a_node_that_cannot_be_split_is_a_leaf_at_any_level() -> None:
    # Short documents of four chunks: each is a natural leaf, so leaves sit at levels 2 and 3
    # and no node gets a lone child that repeats it.
    items, _ = _corpus(per_topic=24)
    items = [ClusterItem(it.chunk_id, it.text, it.title, f"{it.doc_id}-{i // 4}", it.file_name)
             for i, it in enumerate(items)]
    vectors = _embed(items)
    reply = build_cluster_tree(items, vectors)
    assert _check_shape(reply, items) == 3
    assert {a.path.count("/") + 1 for a in reply.assignments} == {2, 3}
    # New chunks are placed by nearest leaf, whatever the leaf's level.
    paths = [a.path for a in reply.assignments]
    placed = assign_to_leaves(vectors, leaf_centroids(paths, vectors))
    assert {p.count("/") + 1 for p in placed} == {2, 3}
    assert sum(p == q for p, q in zip(placed, paths, strict=True)) >= 0.8 * len(paths)


def test_words_found_in_every_document_never_name_a_category() -> None:
    # Every document mentions the company; the cooking chunks mention it every time and say
    # little else, which makes it look distinctive there. It is still the collection's word.
    rng = random.Random(5)
    items = []
    for topic, vocab in TOPICS.items():
        share = 0.15 if topic == "cooking" else 0.6
        for i in range(30):
            words = [rng.choice(vocab) if rng.random() < share else rng.choice(FILLER) for _ in range(40)]
            if topic == "cooking" or i % 3 == 0:
                words.append("Zephyrcorp")
            items.append(ClusterItem(f"{topic}-{i}", " ".join(words), "", f"{topic}-doc-{i // 3}", f"{topic}/{i // 3}.md"))
    reply = build_cluster_tree(items, _embed(items))
    _check_shape(reply, items)
    names = [part for c in reply.categories for part in c.path.split("/")]
    assert not [n for n in names if "zephyrcorp" in n.lower()], names
    assert not [c.description for c in reply.categories if "zephyrcorp" in c.description.lower()]
    index = build_term_index([it.text for it in items], [it.title for it in items])
    doc_of = np.asarray([int(it.chunk_id.split("-")[1]) // 3 + 10 * list(TOPICS).index(it.chunk_id.split("-")[0])
                         for it in items])
    blocked = corpus_wide_terms(index, doc_of)
    assert blocked[index.terms.index("zephyrcorp")]
    assert not blocked[index.terms.index("oven")]


def test_leaf_names_come_from_the_majority_of_their_chunks() -> None:
    # Within each leaf, some word of the name appears in at least half of the leaf's chunks.
    items, _ = _corpus(per_topic=30)
    reply = build_cluster_tree(items, _embed(items))
    by_leaf: dict[str, list[set[str]]] = defaultdict(list)
    for it, a in zip(items, reply.assignments, strict=True):
        by_leaf[a.path].append(_stems(f"{it.title} {it.text}"))
    for path, texts in by_leaf.items():
        name = path.rsplit("/", 1)[-1].split(" (")[0]
        covered = sum(bool(_stems(name) & words) for words in texts)
        assert covered >= len(texts) / 2, f"{path!r} is named by a minority of its chunks"


def test_max_depth_and_branching_are_honoured() -> None:
    items, _ = _corpus(per_topic=20)
    vectors = _embed(items)
    two = build_cluster_tree(items, vectors, max_depth=2)
    assert _check_shape(two, items) == 2
    fixed = build_cluster_tree(items, vectors, branching=2)
    top = {c.path for c in fixed.categories if "/" not in c.path}
    assert len(top) <= 2
    with pytest.raises(BuildError):
        build_cluster_tree(items, vectors, max_depth=4)


def test_degenerate_texts_are_still_mapped() -> None:
    texts = ["", "   ", "# Heading only", "```\ncode()\n```", "| a | b |\n|---|---|", "x", "!!!", "** **"] * 4
    items = [ClusterItem(chunk_id=f"c{i}", text=t) for i, t in enumerate(texts)]
    vectors = np.zeros((len(items), 8), dtype=np.float32)  # all-zero vectors too
    reply = build_cluster_tree(items, vectors)
    _check_shape(reply, items)
    assert all(name for c in reply.categories for name in c.path.split("/"))


def test_bad_input_is_a_build_error() -> None:
    items = [ClusterItem("a", "alpha"), ClusterItem("b", "beta")]
    with pytest.raises(BuildError):
        build_cluster_tree(items, np.zeros((3, 4), dtype=np.float32))
    with pytest.raises(BuildError):
        build_cluster_tree([items[0], items[0]], np.zeros((2, 4), dtype=np.float32))
    assert build_cluster_tree([], np.zeros((0, 4), dtype=np.float32)) == TreeReply()


def test_chunks_of_one_document_tend_to_stay_together() -> None:
    # Two documents whose chunks mix two vocabularies; the doc pull keeps each document in one branch.
    rng = random.Random(3)
    items = []
    for doc, vocab in enumerate([TOPICS["cooking"], TOPICS["astronomy"], TOPICS["networking"]] * 4):
        for part in range(6):
            words = [rng.choice(vocab) for _ in range(25)]
            items.append(ClusterItem(f"d{doc}-{part}", " ".join(words), doc_id=f"d{doc}"))
    reply = build_cluster_tree(items, _embed(items))
    top: dict[str, set[str]] = defaultdict(set)
    for it, a in zip(items, reply.assignments, strict=True):
        top[it.doc_id].add(a.path.split("/")[0])
    assert sum(len(v) == 1 for v in top.values()) >= 11


def test_assign_to_leaves_picks_the_nearest_centroid() -> None:
    centroids = {
        "A/x/1": np.array([1.0, 0.0, 0.0], dtype=np.float32),
        "B/y/2": np.array([0.0, 1.0, 0.0], dtype=np.float32),
        "C/z/3": np.array([0.0, 0.0, 2.0], dtype=np.float32),  # not unit: cosine ignores length
    }
    vectors = np.array([[0.9, 0.1, 0.0], [0.1, 0.2, 0.9], [0.0, 1.0, 0.1], [0.5, 0.5, 0.0]], dtype=np.float32)
    assert assign_to_leaves(vectors, centroids) == ["A/x/1", "C/z/3", "B/y/2", "A/x/1"]  # tie -> first path
    assert assign_to_leaves(np.zeros((0, 3), dtype=np.float32), centroids) == []
    with pytest.raises(BuildError):
        assign_to_leaves(vectors[:, :2], centroids)
    with pytest.raises(BuildError):
        assign_to_leaves(vectors, {})


def test_leaf_centroids_place_new_chunks_in_their_topic(corpus) -> None:
    items, topics, vectors, reply = corpus
    centroids = leaf_centroids([a.path for a in reply.assignments], vectors)
    assert set(centroids) == {a.path for a in reply.assignments}
    assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-5 for v in centroids.values())
    fresh, fresh_topics = _corpus(per_topic=5, seed=99)
    placed = assign_to_leaves(_embed(fresh), centroids)
    topic_of: dict[str, Counter[str]] = defaultdict(Counter)
    for assignment, topic in zip(reply.assignments, topics, strict=True):
        topic_of[assignment.path][topic] += 1
    hits = sum(topic_of[path].most_common(1)[0][0] == t for path, t in zip(placed, fresh_topics, strict=True))
    assert hits >= 0.8 * len(fresh)


def test_spherical_kmeans_recovers_separated_groups() -> None:
    rng = np.random.default_rng(0)
    centres = np.eye(4, 16, dtype=np.float32)
    x = np.concatenate([c + 0.1 * rng.standard_normal((25, 16)).astype(np.float32) for c in centres])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    labels, centroids = spherical_kmeans(x, 4, seed=1)
    assert centroids.shape == (4, 16)
    groups = [set(labels[i * 25 : (i + 1) * 25]) for i in range(4)]
    assert all(len(g) == 1 for g in groups) and len(set.union(*groups)) == 4
    again, _ = spherical_kmeans(x, 4, seed=1)
    assert np.array_equal(labels, again)


def test_terms_share_stems_and_keep_identifiers_and_acronyms_as_written() -> None:
    texts = ["The API rate limits apply to partner clients of getUser."] * 3 + [
        "Refund policies for perishable items; the refund policy of pantry_ctl."] * 3
    index = build_term_index(texts, [""] * 6, ["api-rate-limits.md"] * 3 + ["refunds.md"] * 3)
    shown = dict(zip(index.terms, index.display, strict=True))
    assert stem("policies") == stem("policy") and shown[f"{stem('refund')} {stem('policy')}"] in (
        "Refund policies", "refund policy", "refund policies")
    assert shown["api"] == "API"
    assert shown["getuser"] == "getUser" and shown["pantry_ctl"] == "pantry_ctl"
    assert index.ident[index.terms.index("getuser")] and not index.ident[index.terms.index("api")]
    assert shown["§api rate limit"] == "api rate limits"  # a file name, as written
    features = lsa_features(index, params=TreeParams(lsa_dim=4))
    assert features.shape[0] == 6 and np.allclose(np.linalg.norm(features, axis=1), 1.0, atol=1e-5)
    assert join_names(["Comets", "Ovens", "Routers"]) == "Comets, Ovens & Routers"


@pytest.mark.parametrize("block", [1, 3, 7, 1 << 20])
def test_lsa_products_in_blocks_equal_the_dense_products(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The TF-IDF products run in blocks of whole rows (or columns): the sums are exactly those of one
    pass, including a column longer than a block and empty rows and columns."""
    import knowtology_cli.builders.terms as terms

    items, _ = _corpus(per_topic=4)
    texts = [it.text for it in items] + ["", "a"]  # an empty row; "a" indexes nothing
    index = build_term_index(texts, [it.title for it in items] + ["", ""])
    rng = np.random.default_rng(0)
    data = rng.random(len(index.indices)).astype(np.float32)
    dense = np.zeros((index.n_rows, index.n_terms), dtype=np.float32)
    dense[index.rows_of_entries(), index.indices] = data
    right, left = rng.random((index.n_terms, 5), dtype=np.float32), rng.random((index.n_rows, 5), dtype=np.float32)
    monkeypatch.setattr(terms, "_PRODUCT_BLOCK", 1 << 20)
    whole = terms._Csr(index, data)
    once = whole.dot(right), whole.tdot(left)
    monkeypatch.setattr(terms, "_PRODUCT_BLOCK", block)
    assert np.array_equal(whole.dot(right), once[0]) and np.array_equal(whole.tdot(left), once[1])
    assert np.allclose(once[0], dense @ right, atol=1e-4) and np.allclose(once[1], dense.T @ left, atol=1e-4)
    assert max(np.bincount(index.indices)) > 3 and max(np.diff(index.indptr)) > 7  # longer than small blocks


def test_a_name_led_by_an_acronym_is_one_identifier_and_a_plural_acronym_a_word() -> None:
    """CMake, SQLite, OAuth are single names as written (before: "C" + "Make", "SQ" + "Lite"); APIs and
    URLs stay the plural of the words API and URL."""
    texts = ["CMake builds SQLite; OAuth tokens guard the APIs and their URLs."] * 3 + ["Ovens bake bread."] * 3
    index = build_term_index(texts, [""] * 6, ["build.md"] * 3 + ["oven.md"] * 3)
    shown = dict(zip(index.terms, index.display, strict=True))
    for key, written in (("cmake", "CMake"), ("sqlite", "SQLite"), ("oauth", "OAuth")):
        assert shown[key] == written and index.ident[index.terms.index(key)], key
    assert not index.ident[index.terms.index("api")] and not index.ident[index.terms.index("url")]
    assert "make" not in index.terms and "lite" not in index.terms


def test_a_term_is_shown_as_the_prose_writes_it_not_as_code_does() -> None:
    """AWS CLI examples write ``aws iam create-user`` in every command and "AWS IAM" in their prose:
    the map said "Aws iam". Code counts for the term, but a name is spelled as the text spells it."""
    texts = [f"Creates a user in AWS IAM.\n\n```\naws iam create-user --user-name Bob{i}\naws iam get-user\n```"
             for i in range(3)] + ["Ovens bake bread for dynamodb."] * 3
    index = build_term_index(texts, [""] * 6, ["iam.md"] * 3 + ["oven.md"] * 3)
    shown = dict(zip(index.terms, index.display, strict=True))
    assert shown[f"{stem('aws')} iam"] == "AWS IAM" and shown[stem("aws")] == "AWS" and shown["iam"] == "IAM"
    assert shown["dynamodb"] == "dynamodb"  # written so in prose: kept as written


def test_a_word_mostly_before_a_determiner_reads_as_a_verb_and_names_less_well() -> None:
    texts = ["Planting the seeds takes a minute; planting a seed twice is fine."] * 3 + ["The seeds arrived."] * 3
    texts += ["Bread rises."] * 2
    index = build_term_index(texts, [""] * len(texts))
    fit = dict(zip(index.terms, index.nameability, strict=True))
    assert fit[stem("planting")] < 0.5 <= fit[stem("seeds")] == 1.0


def test_a_word_english_uses_as_a_verb_adjective_or_adverb_names_less_well() -> None:
    """The map named a group of support tickets "Forgot" and another "door & Refund went": irregular
    past tenses carry no ending a rule can see. Brill's part-of-speech lexicon knows them; a gerund it
    lists as a noun ("logging") and a word it lacks ("runbook") stay full names."""
    texts = ["Customer forgot. Refund went out warm and manually."] * 3
    texts += ["Logging in the runbook helps."] * 3 + ["Bread rises."] * 2
    index = build_term_index(texts, [""] * len(texts))
    fit = dict(zip(index.terms, index.nameability, strict=True))
    for word in ("forgot", "went", "warm", "manually"):
        assert fit[stem(word)] == pytest.approx(DEFAULT_PARAMS.non_noun_nameability), word
    for word in ("refund", "customer", "logging", "runbook"):
        assert fit[stem(word)] == 1.0, word
    assert fit[f"{stem('refund')} {stem('went')}"] < fit[stem("refund")]  # a bigram is read by its head


def test_where_chunks_have_titles_a_word_no_title_uses_names_less_well() -> None:
    texts = ["Seedlings need light every minute of the day."] * 3 + ["Soil holds water for minutes."] * 3
    titles = ["Seedlings"] * 3 + ["Soil"] * 3
    index = build_term_index(texts, titles)
    fit = dict(zip(index.terms, index.nameability, strict=True))
    assert fit[stem("minute")] == pytest.approx(DEFAULT_PARAMS.untitled_nameability)
    assert fit[stem("seedlings")] == 1.0
    untitled = build_term_index(texts, [""] * 6)
    assert dict(zip(untitled.terms, untitled.nameability, strict=True))[stem("minute")] == 1.0


def test_a_heading_is_shown_as_a_title_writes_it_not_as_a_file_slug() -> None:
    texts = ["Seed trays and pots."] * 4
    index = build_term_index(texts, ["", "", "Seed Trays", "Seed Trays"], ["seed-trays.md"] * 4)
    assert dict(zip(index.terms, index.display, strict=True))[f"§{stem('seed')} {stem('trays')}"] == "Seed Trays"


# ----------------------------------------------------------------------------- the naming method


def _namer(items: list[ClusterItem], params: TreeParams = DEFAULT_PARAMS) -> Namer:
    index = build_term_index([it.text for it in items], [it.title for it in items], [it.file_name for it in items],
                             params)
    codes = {d: k for k, d in enumerate(dict.fromkeys(it.doc_id or it.chunk_id for it in items))}
    doc_of = np.asarray([codes[it.doc_id or it.chunk_id] for it in items], dtype=np.int64)
    return Namer(index, items, _embed(items), doc_of, params)


def _name_fixed_tree(items: list[ClusterItem], groups: list, params: TreeParams = DEFAULT_PARAMS) -> dict[str, Node]:
    """Name a tree of fixed shape (nested lists of chunk-id prefixes) as the builder would; {path: node}."""
    ids = [it.chunk_id for it in items]

    def node(spec: str | list, level: int) -> Node:
        if isinstance(spec, str):
            return Node(members=np.asarray([i for i, c in enumerate(ids) if c.startswith(spec)]), level=level)
        kids = [node(s, level + 1) for s in spec]
        kids.sort(key=lambda c: (-len(c.members), int(c.members[0])))
        return Node(members=np.concatenate([k.members for k in kids]), level=level, children=kids)

    root = node(groups, 0)
    _namer(items, params).name(root)
    out: dict[str, Node] = {}

    def walk(n: Node) -> None:
        for c in n.children:
            out[c.path] = c
            walk(c)

    walk(root)
    return out


def _docs(spec: dict[str, tuple[str, int, str]], rng: random.Random) -> list[ClusterItem]:
    """Chunks of titled documents: ``{doc: (title, chunks, vocabulary)}``, 8 words of it per chunk."""
    return [ClusterItem(f"{doc}-{i}", " ".join(rng.sample(words.split(), min(8, len(words.split())))) + ".", title, doc,
                        f"docs/{doc}.md")
            for doc, (title, count, words) in spec.items() for i in range(count)]


NET = "router packet latency bandwidth firewall subnet switch ethernet protocol dns gateway routing"
SKY = "telescope galaxy nebula orbit planet comet asteroid star supernova redshift eclipse quasar"


def test_a_name_covers_most_of_its_node_not_its_highest_scoring_minority() -> None:
    # "comet" is the rarest, most distinctive word but sits in 3 of 10 chunks; "oven" is in all 10.
    items = [ClusterItem(f"a-{i}", ("Comet, oven, flour." if i < 3 else "Oven, bread, flour.") + " Stew." * (i % 2),
                         doc_id=f"a{i}") for i in range(10)]
    items += [ClusterItem(f"b-{i}", f"Router, packet, flour, {'dns' if i % 2 else 'bgp'}.", doc_id=f"b{i}")
              for i in range(10)]
    nodes = _name_fixed_tree(items, ["a-", "b-"])
    names = {n.members[0]: path for path, n in nodes.items()}
    assert names[0] == "Oven", names
    assert all(n.coverage >= DEFAULT_PARAMS.name_coverage for n in nodes.values())


def test_siblings_get_different_names_by_mmr_and_children_avoid_their_parents_words() -> None:
    rng = random.Random(1)
    net, sky = NET.split(), SKY.split()
    items = _docs({
        "n1": ("Routing basics", 4, "routing " + " ".join(net[:6])), "n2": ("Routing tables", 4, "routing " + " ".join(net[6:])),
        "s1": ("Moons", 4, " ".join(sky[:6])), "s2": ("Dwarfs", 4, " ".join(sky[6:])),
    }, rng)
    nodes = _name_fixed_tree(items, [["n1", "n2"], ["s1", "s2"]])
    level1 = [p for p in nodes if "/" not in p]
    level2 = [p.rsplit("/", 1)[-1] for p in nodes if "/" in p]
    assert len({n.lower() for n in level2}) == len(level2) == 4
    assert {"Moons", "Dwarfs"} <= set(level2), level2  # the titles people wrote name their documents
    # "Routing" is what both routing documents share: their own names do not say it alone again.
    (routing,) = [p for p in level1 if "Routing" in p]
    for path in nodes:
        if path.startswith(routing + "/"):
            assert _stems(path.rsplit("/", 1)[-1]) - _stems(routing), path
    # The sky documents share no word: their parent is named by what each holds, and each keeps its title.
    (sky,) = [p for p in level1 if p != routing]
    assert sky == "Dwarfs & Moons", sky


def test_a_grab_bag_is_named_by_terms_that_together_cover_it_not_by_its_largest_member() -> None:
    # A node of three unrelated documents (5, 4 and 3 chunks) beside two coherent ones: its name joins
    # what covers it, and never is the largest document's title alone.
    rng = random.Random(2)
    items = _docs({
        "bag1": ("Oven care", 5, "oven dough flour butter sugar bake yeast knead simmer"),
        "bag2": ("Router setup", 4, NET),
        "bag3": ("Comet watching", 3, SKY),
        "eng1": ("Engines", 6, "engine turbine piston fuel exhaust thrust nozzle compressor blade"),
        "bio1": ("Cells", 6, "cell protein membrane enzyme nucleus gene ribosome mitochondria"),
    }, rng)
    nodes = _name_fixed_tree(items, ["bag", "eng", "bio"])
    (bag,) = [p for p, n in nodes.items() if len(n.members) == 12]
    assert bag != "Oven care" and " & " in bag, bag
    assert nodes[bag].coverage >= DEFAULT_PARAMS.name_coverage, (bag, nodes[bag].coverage)


def test_a_name_too_long_for_max_name_chars_loses_whole_terms_never_part_of_a_word() -> None:
    rng = random.Random(2)
    items = _docs({
        "bag1": ("", 5, "configure_network_interfaces_now oven dough flour butter sugar bake yeast"),
        "bag2": ("", 4, "synchronise_database_replicas router packet latency bandwidth firewall"),
        "bag3": ("", 3, "rotate_certificate_authorities telescope galaxy nebula orbit planet comet"),
        "eng1": ("Engines", 6, "engine turbine piston fuel exhaust thrust nozzle compressor blade"),
        "bio1": ("Cells", 6, "cell protein membrane enzyme nucleus gene ribosome mitochondria"),
    }, rng)
    nodes = _name_fixed_tree(items, ["bag", "eng", "bio"])
    (bag,) = [p for p, n in nodes.items() if len(n.members) == 12]
    words = {w for text in ("configure_network_interfaces_now synchronise_database_replicas "
                            "rotate_certificate_authorities",) for w in text.split()}
    assert len(bag) <= DEFAULT_PARAMS.max_name_chars
    assert all(part in words for part in re.split(r", | & ", bag)), bag  # whole identifiers only
    assert _clean("Appendix " + "word " * 20, 30) == "Appendix word word word word…"


def test_a_word_every_part_uses_does_not_name_one_part_for_covering_it() -> None:
    """"info" is in 6 of 10 chunks of one part and in 5 and 3 of 10 of the others: it covers the
    first part but does not tell it apart (lift under ``name_lift``); that part is named by its own
    words instead, as a grab-bag."""
    words = ["Oven heat.", "Flour dough.", "Yeast knead."]  # each in under half of the part

    def info(i: int, among: int) -> str:
        return "Info here. " if i < among else ""

    items = [ClusterItem(f"a-{i}", f"{info(i, 6)}{words[i % 3]}", doc_id=f"a{i}") for i in range(10)]
    items += [ClusterItem(f"b-{i}", f"{info(i, 5)}Router packet {'dns' if i % 2 else 'bgp'}.", doc_id=f"b{i}")
              for i in range(10)]
    items += [ClusterItem(f"c-{i}", f"{info(i, 3)}Comet orbit {'star' if i % 2 else 'moon'}.", doc_id=f"c{i}")
              for i in range(10)]
    nodes = _name_fixed_tree(items, ["a-", "b-", "c-"])
    (oven,) = [p for p, n in nodes.items() if n.members[0] == 0]
    assert "info" not in oven.lower() and " & " in oven, oven
    lifted = _name_fixed_tree(items, ["a-", "b-", "c-"], TreeParams(name_lift=0.0))
    assert [p for p, n in lifted.items() if n.members[0] == 0][0].startswith("Info")  # the rule decides


def test_a_description_quotes_a_passage_of_words_once() -> None:
    """The most typical chunk opening with a rule of slashes is passed over for a passage of words,
    and two documents holding the same passage quote it once."""
    rule = "// " + "/" * 60
    items = [ClusterItem(f"a-{i}", f"{rule}\n\nThe oven bakes bread with flour and yeast every morning.", doc_id=f"a{i}")
             for i in range(2)]
    items += [ClusterItem(f"a-{i}", "The oven bakes bread with flour and yeast every morning.", doc_id=f"a{i}")
              for i in range(2, 6)]
    items += [ClusterItem(f"b-{i}", f"Router packet {'dns' if i % 2 else 'bgp'} latency.", doc_id=f"b{i}") for i in range(6)]
    nodes = _name_fixed_tree(items, ["a-", "b-"], TreeParams(description_passages=2))
    (oven,) = [n for n in nodes.values() if n.members[0] == 0]
    example = oven.description.split("For example: ", 1)[1]
    assert "///" not in example and example.count("The oven bakes bread") == 1, example


def test_a_longer_term_with_the_same_words_replaces_a_single_word() -> None:
    rng = random.Random(3)
    items = [ClusterItem(f"c-{i}", f"Cold chain. The cold chain keeps food safe. {' '.join(rng.sample(SKY.split(), 3))}.",
                         doc_id=f"c{i}") for i in range(8)]
    items += [ClusterItem(f"r-{i}", f"The router drops packets. {' '.join(rng.sample(NET.split(), 3))}.",
                          doc_id=f"r{i}") for i in range(8)]
    nodes = _name_fixed_tree(items, ["c-", "r-"])
    assert "Cold chain" in nodes, list(nodes)


def test_a_description_quotes_prose_not_data_or_an_encoded_key() -> None:
    """A policy's JSON and a certificate's base64 are mostly letters but no words: the passage a
    description quotes comes from the chunks that say something."""
    from knowtology_cli.builders.naming import _in_words

    data = ['"Version": "2012-10-17",; "Statement…', "get-server-certificate: AldBMRAwDgYDVQQHEwdTZWF0drGxlMQ8wDQYDVQ."]
    prose = ["The ChaCha key stream, starting with counter value 1, is then used to encrypt the message.",
             'Open Grafana "Payment gateway" and check the error rate.']
    assert all(_in_words(t, 20) < 0.5 * len("".join(t.split())) for t in data)
    assert all(_in_words(t, 20) >= 0.8 * len("".join(t.split())) for t in prose)
    policy = '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject"}]}'
    items = [ClusterItem(f"p-{i}", f"```json\n{policy}\n```", title="get-bucket-policy", doc_id=f"p{i}")
             for i in range(6)]
    items += [ClusterItem(f"p-x{i}", "A bucket policy grants other accounts access to the bucket's objects.",
                          title="get-bucket-policy", doc_id=f"px{i}") for i in range(2)]
    items += [ClusterItem(f"o-{i}", "Knead the dough until smooth. Bread is good warm.", doc_id=f"o{i}")
              for i in range(8)]
    nodes = _name_fixed_tree(items, ["p-", "o-"])
    quoted = [n.description.split("For example: ", 1)[1] for n in nodes.values() if "For example: " in n.description]
    assert quoted and not any('"Version"' in q or "{" in q for q in quoted), quoted


def test_names_never_recase_identifiers() -> None:
    rng = random.Random(4)
    verbs = ["Run", "Check", "Call", "Try"]
    items = [ClusterItem(f"k-{i}", f"{verbs[i % 4]} pantryctl to restart. Then pantryctl {rng.choice(['status', 'logs'])}.",
                         doc_id=f"k{i}") for i in range(8)]
    items += [ClusterItem(f"o-{i}", "Knead the dough. Bread is good.", doc_id=f"o{i}") for i in range(8)]
    nodes = _name_fixed_tree(items, ["k-", "o-"])
    assert "pantryctl" in nodes, list(nodes)
    assert any(p.startswith("Dough") or p.startswith("Bread") or p.startswith("Knead") for p in nodes), list(nodes)


def test_examples_name_titled_documents_not_the_file_of_untitled_records() -> None:
    """Most chunks untitled and piped from one source ("stdin"): examples show real titles only."""
    items, _ = _corpus(per_topic=12)
    items = [ClusterItem(chunk_id=it.chunk_id, text=it.text, title=it.title if n % 4 == 0 else "",
                         doc_id=f"rec-{n}", file_name="stdin") for n, it in enumerate(items)]
    reply = build_cluster_tree(items, _embed(items))
    titled = {it.title for it in items if it.title}
    with_examples = 0
    for category in reply.categories:
        assert "stdin" not in category.description, category.description
        if " Includes " in category.description:
            with_examples += 1
            listed = category.description.split(" Includes ", 1)[1].split(". For example: ", 1)[0]
            examples = listed.rstrip(".").replace(" and ", ", ").split(", ")
            assert all(any(t.startswith(e.rstrip("…")) for t in titled) for e in examples), category.description
    assert with_examples >= 1


def test_name_tree_names_a_given_shape_as_the_full_build_does(corpus) -> None:
    from knowtology_cli.builders.cluster import name_tree

    items, _, vectors, reply = corpus
    leaf_of = [a.path for a in reply.assignments]
    named = name_tree(items, vectors, leaf_of)
    assert set(named) == {c.path for c in reply.categories}
    for category in reply.categories:
        name, description = named[category.path]
        assert name == category.path.rsplit("/", 1)[-1] and description == category.description


def test_the_parameters_object_is_the_only_home_of_thresholds() -> None:
    """No bare numeric literal other than 0, 1 or 2 in the naming code: thresholds live in TreeParams."""
    import re
    from pathlib import Path

    import knowtology_cli.builders.naming as naming

    code = Path(naming.__file__).read_text()
    code = re.sub(r'"""[\s\S]*?"""|#.*', "", code)
    numbers = {float(m) for m in re.findall(r"(?<![\w.])(\d+\.?\d*(?:e-?\d+)?)(?![\w.])", code)}
    assert numbers <= {0.0, 1.0, 2.0, 1e-12}, numbers


def test_the_root_split_prefers_balance_only_when_the_data_allows_it() -> None:
    from knowtology_cli.builders.cluster import _cluster_node

    rng = np.random.default_rng(0)
    # Three tight, far-apart groups of a third each: the data forces a child above 25%.
    centres = np.eye(3, 12, dtype=np.float32)
    x = np.concatenate([c + 0.05 * rng.standard_normal((40, 12)).astype(np.float32) for c in centres])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    why: list[str] = []
    labels = _cluster_node(x, 2, 6, seed=0, params=DEFAULT_PARAMS, max_share=0.25, why=why)
    assert len(set(labels.tolist())) == 3
    # ... and says why (a tight group stays whole whatever k is tried)
    assert why == ["no split into 2-6 parts kept every part under 25%"]
    # Looser groups can be cut in halves that are small enough, but those halves are no topics.
    loose = np.random.default_rng(0)
    x = np.concatenate([c + 0.1 * loose.standard_normal((40, 12)).astype(np.float32) for c in centres])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    why = []
    labels = _cluster_node(x, 2, 6, seed=0, params=DEFAULT_PARAMS, max_share=0.25, why=why)
    assert sorted(np.bincount(labels).tolist()) == [40, 40, 40]
    assert len(why) == 1 and why[0].startswith("the best split keeping every part under 25% (6 parts) tells"), why
    # Six groups, two of them closer to each other: the best silhouette (k=5) merges those two into
    # a third of the rows, while the six-way split scores nearly as well and keeps every child under 25%.
    centres = np.eye(6, 16, dtype=np.float32)
    centres[1] = centres[0] + 0.6 * centres[1]
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = np.concatenate([c + 0.05 * rng.standard_normal((40, 16)).astype(np.float32) for c in centres])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    free = _cluster_node(x, 3, 6, seed=0, params=DEFAULT_PARAMS)
    why = []
    balanced = _cluster_node(x, 3, 6, seed=0, params=DEFAULT_PARAMS, max_share=0.25, why=why)
    assert np.bincount(free).max() == 80 and np.bincount(balanced).max() <= 0.25 * len(x)
    assert why == []


def test_descriptions_chosen_with_the_embedder_route_chunks_at_least_as_well_and_keep_the_shape(corpus) -> None:
    from types import SimpleNamespace

    from knowtology_cli.bench.tree import name_routing

    items, _, vectors, plain = corpus
    embedder = get_embedder("hash")

    def embed(texts: list[str]) -> np.ndarray:
        return np.stack([embedder.embed_query(t) for t in texts])

    chosen = build_cluster_tree(items, vectors, embed_names=embed)
    assert [c.path for c in chosen.categories] == [c.path for c in plain.categories]
    assert [a.path for a in chosen.assignments] == [a.path for a in plain.assignments]
    assert any(c.description != p.description for c, p in zip(chosen.categories, plain.categories, strict=True))

    def routing(reply: TreeReply) -> list[float]:
        nodes = [SimpleNamespace(path=c.path, name=c.path.rsplit("/", 1)[-1], description=c.description)
                 for c in reply.categories]
        leaves = {a.chunk_id: a.path for a in reply.assignments}
        chunk_vectors = {it.chunk_id: vectors[i] for i, it in enumerate(items)}
        return [row["routing"] for row in name_routing(nodes, leaves, chunk_vectors, embed)]

    for got, before in zip(routing(chosen), routing(plain), strict=True):
        assert got >= before
    for category in chosen.categories:  # still plain sentences of the same kinds
        assert category.description.endswith((".", "…")) and "\n" not in category.description
        assert category.description.split(" ", 1)[0] in {"About", "Covers", "Includes", "For"}


def test_descriptions_are_chosen_only_in_sibling_groups_with_enough_chunks(corpus) -> None:
    """`routed_min_chunks` per child: below it a group keeps the full descriptions (a choice fitted to
    a handful of chunks does not carry); at or above it, deeper levels are chosen too."""
    from dataclasses import replace

    items, _, vectors, plain = corpus
    embedder = get_embedder("hash")

    def embed(texts: list[str]) -> np.ndarray:
        return np.stack([embedder.embed_query(t) for t in texts])

    none = build_cluster_tree(items, vectors, embed_names=embed,
                              params=replace(DEFAULT_PARAMS, routed_min_chunks=len(items) + 1))
    assert [(c.path, c.description) for c in none.categories] == [(c.path, c.description) for c in plain.categories]
    every = build_cluster_tree(items, vectors, embed_names=embed, params=replace(DEFAULT_PARAMS, routed_min_chunks=1))
    changed = {c.path.count("/") + 1 for c, p in zip(every.categories, plain.categories, strict=True)
               if c.description != p.description}
    assert changed - {1}, "no description below level 1 was chosen by routing"


def test_an_unavailable_embedder_leaves_the_full_descriptions(corpus) -> None:
    from knowtology_cli.errors import EmbeddingError

    items, _, vectors, plain = corpus

    def down(texts: list[str]) -> np.ndarray:
        raise EmbeddingError("provider unreachable")

    reply = build_cluster_tree(items, vectors, embed_names=down)
    assert [(c.path, c.description) for c in reply.categories] == [(c.path, c.description) for c in plain.categories]


def test_a_bigram_only_across_a_title_trail_counts_but_never_names() -> None:
    """"Commands and Groups › Multi Command Chaining" joins "Groups" and "Multi" only through the
    trail's separator: that pair stays a clustering feature but is no name; "multi command" is one."""
    from knowtology_cli.builders.terms import build_term_index, stem

    titles = ["Commands and Groups › Multi Command Chaining"] * 4 + ["Options › Option Names"] * 4
    texts = [f"Chained multi command number {i} runs after the group callback." for i in range(8)]
    index = build_term_index(texts, titles)
    key = {t: j for j, t in enumerate(index.terms)}
    across, within = f"{stem('groups')} {stem('multi')}", f"{stem('multi')} {stem('command')}"
    assert across in key and within in key  # both are features
    assert index.nameability[key[across]] == 0.0 and index.nameability[key[within]] > 0.0


def test_a_heading_shared_by_numbered_versions_is_shown_without_the_number() -> None:
    """Headings that differ only in a number ("2.6", "3.0") are one term; shown with one of the
    numbers it would read as one document, so it is shown without it. A single numbered heading keeps it."""
    from knowtology_cli.builders.terms import build_term_index

    titles = (["Acme 2.6 Release Notes"] * 3 + ["Acme 3.0 Release Notes"] * 3
              + ["Guide for Windows 11"] * 3)
    index = build_term_index([f"Notes on change number {i} of the tool." for i in range(9)], titles)
    shown = {d for t, d in zip(index.terms, index.display, strict=True) if t.startswith(PHRASE)}
    assert "Acme Release Notes" in shown and "Guide for Windows 11" in shown
    assert not any(d.startswith(("Acme 2.6", "Acme 3.0")) for d in shown)
    # a manual page's section number in brackets goes with its brackets
    index = build_term_index([f"Prints the dependency graph, part {i}." for i in range(6)],
                             ["tool-tree(1) › OPTIONS"] * 3 + ["tool-tree(5) › FILES"] * 3)
    assert "tool-tree" in set(index.display) and not any("(" in d for d in index.display)
    # a release's date in brackets and a version after a hyphen leave no punctuation behind
    index = build_term_index([f"Fixes a crash in the runner, entry {i}." for i in range(6)],
                             ["Acme 9.1.1 (2026-06-19)"] * 3 + ["Acme 9.2.0 (2026-07-01)"] * 3)
    assert "Acme" in set(index.display) and not any("(" in d or d.endswith("-") for d in index.display)


def test_dated_release_headings_and_numbered_parts_leave_no_husk() -> None:
    """Release notes titled "0.24.0 (January 5, 2023)" share no topic but a month: the dated bracket is
    no part of a heading's key, so no "(January , )" term is left; "…, part 3" headings are shown
    without the dangling "part"."""
    from knowtology_cli.builders.terms import build_term_index

    titles = [f"0.{20 + i}.0 (January {i + 3}, 2023)" for i in range(3)] + [f"0.{30 + i}.0 (March {i + 3}, 2024)"
                                                                          for i in range(3)]
    titles += [f"Writing your first app, part {i}" for i in range(1, 7)]
    index = build_term_index([f"Fixed a crash in the router, entry {i}." for i in range(12)], titles)
    shown = {d for t, d in zip(index.terms, index.display, strict=True) if t.startswith(PHRASE)}
    assert not any("(" in d or "January" in d for d in shown), shown
    assert "Writing your first app" in shown and not any(d.endswith(("part", ",")) for d in shown)


def test_a_term_found_only_in_web_addresses_names_nothing() -> None:
    from knowtology_cli.builders.terms import build_term_index

    texts = [f"Release {i}: see https://docs.example.org/en/stable/changelog.html for the full changelog."
             for i in range(6)]
    index = build_term_index(texts, [""] * 6)
    nameable = {t for t, v in zip(index.terms, index.nameability, strict=True) if v > 0}
    assert "changelog" in nameable and not any("." in t or "stabl" in t or "org" in t for t in nameable), nameable


def test_dunder_names_and_snake_case_file_slugs_are_written_as_the_text_writes_them() -> None:
    from knowtology_cli.builders.terms import build_term_index, phrases

    assert [t.surface for t in phrases("Put __init__.py in each package")[0] if t.ident] == ["__init__.py"]
    texts = ["Use the tmp_path fixture for a temporary directory."] * 3 + ["Other words about refunds here."] * 3
    index = build_term_index(texts, [""] * 6, ["how-to/tmp_path.rst"] * 3 + ["docs/refund-policy.md"] * 3)
    shown = dict(zip(index.terms, index.display, strict=True))
    assert shown[PHRASE + "tmp path"] == "tmp_path"  # the slug "tmp path" is the identifier the text writes


def test_a_word_repeated_or_split_by_an_option_flag_makes_no_bigram() -> None:
    """"Configuration Configuration keys" repeats a word and "Options --locked" runs a heading into a
    command-line flag: neither pair is a phrase a writer wrote."""
    from knowtology_cli.builders.terms import build_term_index, stem

    texts = [f"Configuration Configuration keys, item {i}.\nManifest Options --locked forbids changes." for i in range(6)]
    index = build_term_index(texts, [""] * 6)
    assert f"{stem('configuration')} {stem('configuration')}" not in index.terms
    assert f"{stem('options')} {stem('locked')}" not in index.terms
    assert f"{stem('manifest')} {stem('options')}" in index.terms  # the heading itself stays one


def test_a_file_name_slug_is_shown_as_the_text_writes_it() -> None:
    from knowtology_cli.builders.terms import build_term_index

    texts = ["The API takes a token. Call the API twice."] * 3 + ["Other words about refunds here."] * 3
    index = build_term_index(texts, [""] * 6, ["docs/api.md"] * 3 + ["docs/refund-policy.md"] * 3)
    shown = dict(zip(index.terms, index.display, strict=True))
    assert shown[PHRASE + "api"] == "API"  # not the slug "api" (which a name would show as "Api")
    assert shown[PHRASE + "refund polici"] == "refund policy"  # the text never writes it: the slug stays


def test_a_file_name_keeps_its_version_number_and_loses_its_extensions() -> None:
    from knowtology_cli.builders.terms import heading_segments

    assert heading_segments("", "docs/release-2.6.md") == ["release 2.6"]  # ".6" is no extension
    assert heading_segments("", "docs/guide.rst.txt") == ["guide"]
    assert heading_segments("", "notes/2024-01-05-standup.md") == ["standup"]


def test_a_term_found_only_in_code_blocks_is_a_feature_but_no_name() -> None:
    """An example's placeholder (``some_text`` in every page's code sample) named a node of
    Python-Markdown's docs; a name comes from what the prose or a heading says."""
    from knowtology_cli.builders.terms import build_term_index

    text = "Call `render_page` to render.\n\n```python\nrender_page(some_text, extensions=['toc'])\n```\n"
    index = build_term_index([text] * 4, ["Rendering"] * 4)
    key = {t: j for j, t in enumerate(index.terms)}
    assert "some_text" in key and "render_page" in key  # both cluster
    assert index.nameability[key["some_text"]] == 0.0 and index.nameability[key["render_page"]] > 0.0


def test_conventional_page_names_are_no_heading_phrases() -> None:
    """index.rst, README.md, an "Overview" section: names every manual has say nothing of a topic."""
    from knowtology_cli.builders.terms import heading_segments

    assert heading_segments("Welcome to Click", "docs/index.rst") == ["Welcome to Click"]
    assert heading_segments("Setup › Overview", "guide/README.md") == ["Setup"]
    assert heading_segments("Refunds › Partial refunds", "policies/refunds.md") == [
        "Refunds", "Partial refunds", "refunds"]
    # a separator inside brackets is the bracket's: no "Release 3.22 (release-date" segment
    assert heading_segments("Release 3.22 (release-date: 2013-02-15) › New Features", "CHANGES.md") == [
        "Release 3.22 (release-date: 2013-02-15)", "New Features", "CHANGES"]


def test_titles_that_read_the_same_once_cut_are_one_example() -> None:
    """Parts of one series ("… part 1", "… part 2") cut to the same shown title are listed once."""
    items, _ = _corpus(per_topic=12)
    series = "A long series title about {} that runs well past the cut, part {}"
    items = [ClusterItem(chunk_id=it.chunk_id, text=it.text, title=series.format(it.chunk_id.split("-")[0], n),
                         doc_id=f"doc-{n}", file_name=f"doc-{n}.md") for n, it in enumerate(items)]
    assert all(len(it.title) > DEFAULT_PARAMS.max_title_chars for it in items)
    reply = build_cluster_tree(items, _embed(items))
    listed = 0
    for category in reply.categories:
        if " Includes " not in category.description:
            continue
        text = category.description.split(" Includes ", 1)[1].split(". For example: ", 1)[0]
        examples = text.rstrip(".").replace(" and ", ", ").split(", ")
        listed += len(examples)
        assert len(examples) == len(set(examples)), category.description
    assert listed >= 1


def test_a_list_of_lists_is_kept_apart_by_semicolons() -> None:
    from knowtology_cli.builders.naming import _and

    assert _and(["Seeds"]) == "Seeds"
    assert _and(["Seeds", "Soil & compost"]) == "Seeds and Soil & compost"
    assert _and(["Seeds", "Soil", "Tools"]) == "Seeds, Soil and Tools"
    assert _and(["Seeds", "Soil & compost", "Tools, sheds & paths", "2 more"]) == (
        "Seeds; Soil & compost; Tools, sheds & paths; and 2 more")


def test_a_file_name_of_joined_words_the_text_never_writes_is_no_name() -> None:
    """Sphinx-style page names ("errorhandling.rst") joined words a reader never sees; a link to the
    page ("see /patterns/errorhandling") writes the path, not a word. "api.md" is named: the text
    writes "API"."""
    from knowtology_cli.builders.terms import build_term_index

    texts = (["Handling errors: see /patterns/errorhandling for more. Errors are logged."] * 3
             + ["The API takes a token. Call the API twice."] * 3)
    index = build_term_index(texts, [""] * 6, ["docs/errorhandling.rst"] * 3 + ["docs/api.rst"] * 3)
    fit = dict(zip(index.terms, index.nameability, strict=True))
    assert fit[PHRASE + "errorhandl"] == 0.0
    assert fit[PHRASE + "api"] > 0.0
    written = build_term_index(["Use errorhandling hooks to log errors."] * 3, [""] * 3, ["errorhandling.rst"] * 3)
    assert dict(zip(written.terms, written.nameability, strict=True))[PHRASE + "errorhandl"] > 0.0


def test_an_abbreviation_with_stops_is_no_name() -> None:
    """"e.g." reads as a dotted identifier to the tokenizer ("e.g" beside "app.route"); only the
    identifier can name a node."""
    from knowtology_cli.builders.terms import build_term_index

    texts = ["Register a view, e.g. with app.route, then call it."] * 4
    index = build_term_index(texts, ["Views"] * 4)
    fit = dict(zip(index.terms, index.nameability, strict=True))
    assert fit["e.g"] == 0.0 and fit["app.route"] > 0.0


def test_the_collections_subject_names_no_level_1_node() -> None:
    """A framework's docs say its name on most pages; the part that says it most was named after it
    (the issue's "named after the subject of the whole corpus"). A word in at least half of the
    documents is the collection's subject and names no level-1 node (`subject_share`)."""
    from dataclasses import replace

    rng = random.Random(7)
    ovens = "oven dough flour butter sugar bake yeast knead simmer crust pastry loaf".split()
    items = []
    for group, words, with_name in (("a", NET.split(), 6), ("b", SKY.split(), 3), ("c", ovens, 1)):
        for d in range(6):
            text = " ".join(rng.sample(words, 2)) + (" Zephyrflow" if d < with_name else "") + "."
            items.append(ClusterItem(f"{group}-{d}", text, doc_id=f"{group}{d}"))
    shipped = _name_fixed_tree(items, ["a-", "b-", "c-"])
    assert not any("Zephyrflow" in path for path in shipped), list(shipped)
    unguarded = _name_fixed_tree(items, ["a-", "b-", "c-"], replace(DEFAULT_PARAMS, subject_share=1.0))
    assert any("Zephyrflow" in path for path in unguarded), list(unguarded)  # 10 of 18 documents
