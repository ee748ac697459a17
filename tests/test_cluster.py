"""The offline tree builder: shape, determinism, names, topical separation and nearest-leaf assignment."""

from __future__ import annotations

import random
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
from knowtology_cli.builders.terms import (
    build_term_index,
    corpus_wide_terms,
    fold_plural,
    join_names,
    label_terms,
    lsa_features,
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
        words = {fold_plural(w) for w in name.lower().replace("&", " ").split()}
        assert words & {fold_plural(w) for w in TOPICS[topic]}, f"{name!r} does not say {topic}"
    assert {c.most_common(1)[0][0] for c in topics_of.values()} == set(TOPICS)


def test_descriptions_count_chunks_and_name_terms(corpus) -> None:
    _, _, _, reply = corpus
    counts = Counter()
    for a in reply.assignments:
        parts = a.path.split("/")
        for k in range(1, len(parts) + 1):
            counts["/".join(parts[:k])] += 1
    for category in reply.categories:
        n = counts[category.path]
        assert category.description.startswith(f"{n} chunk{'s' if n != 1 else ''}")


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


def test_a_name_is_supported_by_most_of_the_cluster() -> None:
    # "comet" scores highest but sits in 3 of 10 chunks; "oven" is in 8 of them: the name says oven.
    texts = ["comet oven"] * 3 + ["oven bread"] * 5 + ["bread soup"] * 2
    index = build_term_index(texts, [""] * len(texts))
    col = {t: j for j, t in enumerate(index.terms)}
    ranked = [(col["comet"], 2.0, 0.3), (col["oven"], 1.2, 0.8), (col["bread"], 1.0, 0.7)]
    chosen = label_terms(ranked, index, banned=set(), banned_words=set(), members=np.arange(len(texts)))
    assert index.terms[chosen[0]] == "oven"
    assert "comet" not in {index.terms[j] for j in chosen}
    # No term covers half of a mixed cluster: distinctive terms are joined until they do.
    texts = ["comet star"] * 4 + ["oven bread"] * 4 + ["router packet"] * 2
    index = build_term_index(texts, [""] * len(texts))
    col = {t: j for j, t in enumerate(index.terms)}
    ranked = [(col["comet"], 2.0, 0.4), (col["star"], 1.9, 0.4), (col["oven"], 1.5, 0.4), (col["router"], 0.4, 0.2)]
    chosen = label_terms(ranked, index, banned=set(), banned_words=set(), members=np.arange(len(texts)))
    assert {index.terms[j] for j in chosen} == {"comet", "oven"}
    assert join_names(["Comets", "Ovens", "Routers"]) == "Comets, Ovens & Routers"


def test_leaf_names_in_the_sample_style_corpus_come_from_their_majority() -> None:
    # Within each leaf, the name's words appear in at least half of the leaf's chunks.
    items, _ = _corpus(per_topic=30)
    reply = build_cluster_tree(items, _embed(items))
    by_leaf: dict[str, list[str]] = defaultdict(list)
    for it, a in zip(items, reply.assignments, strict=True):
        by_leaf[a.path].append(f"{it.title} {it.text}".lower())
    for path, texts in by_leaf.items():
        name = path.rsplit("/", 1)[-1]
        if "(" in name:
            continue
        words = [fold_plural(w) for w in name.lower().replace("&", " ").replace(",", " ").split()]
        covered = sum(any(w in {fold_plural(t) for t in text.split()} for w in words) for text in texts)
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


def test_terms_fold_plurals_and_keep_acronyms() -> None:
    assert [fold_plural(w) for w in ["policies", "refunds", "boxes", "status", "analysis", "news"]] == [
        "policy", "refund", "box", "status", "analysis", "news"
    ]
    texts = ["The API rate limits apply to partner clients."] * 3 + ["Refund policies for perishable items."] * 3
    index = build_term_index(texts, [""] * 6, ["api-rate-limits.md"] * 3 + ["refunds.md"] * 3)
    shown = dict(zip(index.terms, index.display, strict=True))
    assert shown["api"] == "API"
    assert shown["§api rate limit"] == "API Rate Limits"
    assert shown["refund policy"] == "Refund Policies"
    features = lsa_features(index, dim=4)
    assert features.shape[0] == 6 and np.allclose(np.linalg.norm(features, axis=1), 1.0, atol=1e-5)


def _titled_items(docs: dict[str, tuple[str, int, list[str]]], extra: list[ClusterItem] = ()) -> list[ClusterItem]:
    items = [
        ClusterItem(f"{doc}-{i}", " ".join(words) + ".", title, doc, f"support/{doc}.md")
        for doc, (title, count, words) in docs.items() for i in range(count)
    ]
    return items + list(extra)


def test_a_node_of_few_documents_is_named_by_their_titles() -> None:
    # Two short FAQs whose common word is an adjective ("warm"): the node says what the FAQs
    # are about, in their own titles, not "Warm".
    words = "warm delivery box liner door warm warm".split()
    docs = {
        "faq-damaged-deliveries": ("FAQ: Damaged Deliveries", 4, words + ["damaged", "photo"]),
        "faq-melted-items": ("FAQ: Melted Items", 3, words + ["melted", "ice"]),
    }
    for topic in ("networking", "astronomy"):
        for d in range(3):
            docs[f"{topic}-{d}"] = (f"{topic.title()} Notes {d}", 4, TOPICS[topic][d * 5:d * 5 + 5] * 2)
    items = _titled_items(docs)
    reply = build_cluster_tree(items, _embed(items))
    top = {c.path for c in reply.categories if "/" not in c.path}
    assert "Damaged Deliveries & Melted Items" in top, top


def test_a_node_of_records_from_one_file_is_named_by_the_file_and_the_records_topic() -> None:
    # A ticket dump: one document, one title per record; "agent" is in every record and names nothing.
    rng = random.Random(3)
    items = []
    for topic, vocab in TOPICS.items():
        for i in range(12):
            text = "Agent checked the account. " + " ".join(rng.choice(vocab) for _ in range(30))
            title = f"{vocab[i % 3].title()} {rng.choice(vocab)} complaint"
            items.append(ClusterItem(f"t-{topic}-{i}", text, title, "support-tickets", "support-tickets.jsonl"))
    reply = build_cluster_tree(items, _embed(items))
    top = [c.path for c in reply.categories if "/" not in c.path]
    assert all(p.startswith("Support Tickets: ") for p in top), top
    assert not [c.path for c in reply.categories if "agent" in c.path.lower()]


def test_a_parent_whose_only_common_word_is_weak_is_named_from_its_children() -> None:
    # Three kinds of van documents: "van" is in every chunk and is all they share; the parent
    # says what its children hold ("Cold Chain & Driver App"), not "Van".
    rng = random.Random(5)
    docs: dict[str, tuple[str, int, list[str]]] = {}
    for doc, head, own in [
        ("cold-chain", "Cold Chain", "freezer chiller temperature probe ice pack".split()),
        ("damaged", "Damaged Deliveries", "crushed broken photo bruised dented claim".split()),
        ("driver-app", "Driver App", "login route scan barcode sync offline".split()),
    ]:
        for i, suffix in enumerate(("Checks", "Basics", "Questions", "Tips")):
            text = " ".join(f"van {w}" for w in [*head.lower().split(), *rng.sample(own, 4)])
            docs[f"{doc}-{i}"] = (f"{head} {suffix}", 2, text.split())
    for topic in ("networking", "astronomy"):
        for d in range(6):
            docs[f"{topic}-{d}"] = (f"{topic.title()} Notes {d}", 3, rng.sample(TOPICS[topic], 12))
    items = _titled_items(docs)
    reply = build_cluster_tree(items, _embed(items))
    _check_shape(reply, items)
    van = {a.path.split("/")[0] for a in reply.assignments if a.chunk_id.startswith(("cold", "damaged", "driver"))}
    assert len(van) == 1, van
    (name,) = van
    assert name.lower() != "van" and "Cold Chain" in name and "Driver App" in name, name
    assert len(name) <= 40 and "/" not in name


def test_examples_name_titled_documents_not_the_file_of_untitled_records() -> None:
    """Most chunks untitled and piped from one source ("stdin"): the e.g. list shows real titles."""
    items, _ = _corpus(per_topic=12)
    items = [ClusterItem(chunk_id=it.chunk_id, text=it.text, title=it.title if n % 4 == 0 else "",
                         doc_id=f"rec-{n}", file_name="stdin") for n, it in enumerate(items)]
    reply = build_cluster_tree(items, _embed(items))
    titled = {it.title for it in items if it.title}
    with_examples = 0
    for category in reply.categories:
        assert "stdin" not in category.description, category.description
        if " — e.g. " in category.description:
            with_examples += 1
            examples = category.description.split(" — e.g. ", 1)[1].split("; ")
            assert all(any(t.startswith(e.rstrip("…")) for t in titled) for e in examples), category.description
    assert with_examples >= len(reply.categories) // 2


def _name_fixed_tree(items: list[ClusterItem], groups: list) -> dict[str, int]:
    """Name a tree of fixed shape (nested lists of chunk-id prefixes) as the builder would; {path: size}."""
    from knowtology_cli.builders import cluster

    ids = [it.chunk_id for it in items]

    def node(spec: str | list, level: int) -> cluster._Node:
        if isinstance(spec, str):
            return cluster._Node(members=np.asarray([i for i, c in enumerate(ids) if c.startswith(spec)]), level=level)
        kids = [node(s, level + 1) for s in spec]
        return cluster._Node(members=np.concatenate([k.members for k in kids]), level=level, children=kids)

    root = node(groups, 0)
    index = build_term_index([it.text for it in items], [it.title for it in items], [it.file_name for it in items])
    codes = {d: k for k, d in enumerate(dict.fromkeys(it.doc_id for it in items))}
    doc_of = np.asarray([codes[it.doc_id] for it in items], dtype=np.int64)
    namer = cluster._Namer.create(index, items, _embed(items), doc_of)
    cluster._name_children(root, namer, [])
    cluster._rename_parents(root, namer, [])
    cluster._set_paths(root)
    sizes: dict[str, int] = {}

    def walk(n: cluster._Node) -> None:
        for c in n.children:
            sizes[c.path] = len(c.members)
            walk(c)

    walk(root)
    return sizes


def _notes(rng: random.Random) -> tuple[list[ClusterItem], list]:
    items = [
        ClusterItem(f"{topic}{d}-{i}", " ".join(rng.sample(TOPICS[topic], 12)) + ".", f"{topic.title()} Notes {d}",
                    f"{topic}-{d}", f"{topic}/{d}.md")
        for topic in ("networking", "astronomy") for d in range(3) for i in range(4)
    ]
    shape = [[f"{t}0", [f"{t}1", f"{t}2"]] for t in ("networking", "astronomy")]
    return items, shape


def test_a_node_of_records_with_a_quarter_of_other_documents_is_not_named_by_the_records_file() -> None:
    # 12 tickets and 5 chunks of the policy they cite: "Support Tickets" names the tickets child,
    # not the node that also holds the policy.
    rng = random.Random(4)
    items = []
    for i, subject in enumerate(["broken jar", "sour milk", "cracked eggs", "charged substitution", "chargeback",
                                 "snap refund", "catering cancel", "recall notice", "spoiled kit", "olive oil",
                                 "bruised fruit", "wrong size"]):
        words = rng.sample("card credit photo driver store van order replacement charge wallet courier bag".split(), 6)
        text = f"Agent looked at the order with the {subject}. " + " ".join(words) + (" Refund issued." if i % 2 else ".")
        items.append(ClusterItem(f"tk-{i}", text, f"Refund for {subject}", "support-tickets", "support-tickets.jsonl"))
    policy = ("Returns and refunds: a refund goes back to the original card within five days; perishable returns "
              "need a photo. Self service refund in the app.")
    items += [ClusterItem(f"pol-{i}", policy, "Returns and Refunds Policy", "returns", "policies/returns.md")
              for i in range(5)]
    notes, shape = _notes(rng)
    sizes = _name_fixed_tree(items + notes, [["tk-", "pol-"], *shape])
    (mixed,) = [p for p, n in sizes.items() if n == 17]
    assert "support" not in mixed.lower() and "ticket" not in mixed.lower(), mixed
    tickets = [p for p, n in sizes.items() if n == 12 and p.startswith(mixed + "/")]
    assert tickets and tickets[0].split("/")[-1].startswith("Support Tickets"), sizes


def test_a_parent_name_does_not_repeat_a_child_name_of_several_parts() -> None:
    rng = random.Random(4)
    items = []
    for doc, title, words in [
        ("sev", "Incident Severity", "incident severity sev1 sev2 commander postmortem outage customers impact"),
        ("esc", "Support Escalation", "support escalation tier lead manager customer ticket handoff incident"),
        ("onc", "Call Rotation", "on-call rotation paging pager engineer week handover incident schedule"),
    ]:
        items += [ClusterItem(f"{doc}-{i}", " ".join(rng.sample(words.split(), 7)) + ".", title, doc,
                              "eng/" + title.lower().replace(" ", "-") + ".md") for i in range(5)]
    notes, shape = _notes(rng)
    sizes = _name_fixed_tree(items + notes, [[["sev-", "esc-"], "onc-"], *shape])
    (parent,) = [p for p, n in sizes.items() if n == 15]
    (child,) = [p for p, n in sizes.items() if n == 10]
    child_name = child.split("/")[-1]
    assert " & " in child_name and child_name not in parent, (parent, child)
    parts = [p.strip() for p in child_name.replace(" & ", ",").split(",")]
    assert not all(p in parent for p in parts), (parent, child)
