"""Every threshold and weight of the offline tree builder, in one object, each with the reason for its value.

Experiment with ``dataclasses.replace(DEFAULT_PARAMS, ...)``; golden snapshots show the effect.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TreeParams:
    """Thresholds of the offline builder: clustering, the term index, naming and descriptions."""

    # ---- clustering -------------------------------------------------------------------------
    #: Share of the LSA text features in the clustering space beside the embedding (0 disables
    #: them): enough for shared vocabulary to separate topics the embedding blurs, small enough that
    #: the embedding decides.
    text_weight: float = 0.2
    #: Pull of a chunk towards its document's mean (0 disables it): chunks of one document should
    #: usually share a branch, scaled by how coherent the document is.
    doc_weight: float = 1.0
    #: Most children of a node: 8 is about what a reader scans at a glance in a menu.
    max_children: int = 8
    #: The last split may fan out further so leaves stay under ``max_leaf`` (a long flat list beats
    #: an extra level that would exceed three).
    max_last_children: int = 12
    #: Children tried per node: from ``k_max * k_low_ratio`` up to ``k_max``, best simplified
    #: silhouette wins; half the range keeps the choice cheap and avoids degenerate tiny k.
    k_low_ratio: float = 0.5
    #: ``k_max = sqrt(n / k_sqrt_divisor)``: the classic sqrt(n/2) rule of thumb for the number of clusters.
    k_sqrt_divisor: float = 2.0
    #: k-means restarts (k-means++ seeds); the lowest inertia wins. 4 gives stable trees at low cost.
    kmeans_restarts: int = 4
    #: Lloyd iterations at most; spherical k-means on unit vectors converges well before this.
    kmeans_max_iter: int = 60
    #: Lloyd stops when at most this share of the rows still change cluster.
    kmeans_settled_share: float = 0.001
    #: Above this many rows k-means is fitted on a random sample, then refined on all rows.
    kmeans_fit_sample: int = 20000
    #: Refinement passes over all rows after a sampled fit.
    kmeans_refine_iter: int = 3
    #: Above this many rows k is chosen on a random sample (the silhouette is quadratic-free but
    #: still scans every row per k).
    select_sample: int = 4000
    #: A cluster smaller than ``n / (merge_divisor * k)`` (or ``min_leaf``) joins its nearest
    #: sibling: a quarter of an even share is too small to stand as a category.
    merge_divisor: float = 4.0
    #: A node of one document with fewer than ``one_document_leaves * min_leaf`` chunks is a leaf:
    #: the sections of one short document read best together.
    one_document_leaves: int = 4
    #: Largest share of all chunks a level-1 category should hold. Among the k the silhouette
    #: allows, a split that keeps every child under it is preferred (a map whose largest region
    #: is a quarter of everything still tells the reader something).
    max_top_share: float = 0.25
    #: ... but only when its silhouette is within this share of the best k's: a split of a few
    #: clearly separate topics is not cut further just to even out their sizes (the data forces it).
    balance_slack: float = 0.1
    #: Dimensions of the LSA text features blended into the embeddings.
    lsa_dim: int = 100
    #: Extra random directions of the randomized SVD beyond its rank (Halko et al. suggest 5-10).
    lsa_oversample: int = 10
    #: Power iterations of the randomized SVD (Halko et al.: 1-2 suffice for text).
    lsa_power_iter: int = 2

    # ---- term index --------------------------------------------------------------------------
    #: A term must occur in this many chunks to be indexed (a word seen once names nothing);
    #: collections under ``small_collection`` chunks index single-chunk unigrams too, and keep
    #: terms found in every chunk (elsewhere they tell no chunk apart).
    min_chunks: int = 2
    small_collection: int = 20
    #: Most terms kept (the most frequent first): bounds memory on large collections.
    max_terms: int = 40000
    #: Presence weight of a term found only in a chunk's body; a title occurrence weighs 1.0.
    #: Titles are names people wrote for the chunk, so they count more.
    body_weight: float = 0.6
    #: Heading phrases at most this many content words / tokens / characters long can name a node.
    max_phrase_words: int = 4
    max_phrase_tokens: int = 6
    max_phrase_chars: int = 50
    #: Shorter words are not terms (``of``, ``id``) unless written in capitals (``UI``, ``QA``).
    min_word_chars: int = 3
    #: A title occurrence counts this many times in the LSA term frequencies (a title says what the
    #: chunk is about more densely than its body).
    title_tf: float = 2.0

    # ---- naming (class-based TF-IDF + coverage + MMR) ------------------------------------------
    #: A chunk of a document with m chunks among a node's members weighs ``m ** -document_decay``,
    #: so a document counts ``m ** (1 - decay)``: one long document cannot outvote many short ones.
    document_decay: float = 0.75
    #: Smoothing of the shares in the distinctiveness log-ratio: a term absent from the siblings is
    #: not infinitely distinctive.
    share_smoothing: float = 0.02
    #: A candidate must be found in this share of the node (by document weight) to be scored at all.
    min_candidate_share: float = 0.1
    #: Candidates per node considered for the name (the best by score).
    candidate_pool: int = 40
    #: A name must cover at least half the node: then most of what a reader finds there fits it.
    name_coverage: float = 0.5
    #: ... and be found at least twice as often in the node as in its siblings (share over share):
    #: a word every part uses ("information", "working") covers a node without telling it apart, so
    #: such a node is named as a grab-bag, by the distinctive terms that together cover it.
    name_lift: float = 2.0
    #: When the first term covers less than this, a second, different term may join it (``A & B``).
    second_term_below: float = 0.75
    #: ... when it adds at least this much coverage ...
    second_term_gain: float = 0.15
    #: ... and scores at least this share of the first.
    second_term_score: float = 0.5
    #: A longer term (a bigram or heading) containing the chosen term's words replaces it when it
    #: scores at least this share of it and covers at least ``longer_coverage`` of what it covers.
    longer_score: float = 0.6
    longer_coverage: float = 0.8
    #: A grab-bag (no term covers ``name_coverage``) is named by up to this many terms that together
    #: cover it (until they cover ``second_term_below``), each adding at least ``cover_gain`` of the node.
    grab_bag_terms: int = 3
    cover_gain: float = 0.1
    #: A term of a parent's name found this much in one of its children names that part; the part
    #: may repeat it (``Lenses & optics`` over ``Lens grinding``).
    owned_share: float = 0.9
    #: Maximal marginal relevance: ``lambda * relevance - (1 - lambda) * similarity`` to the names
    #: siblings already have. 0.7 is the usual weight that keeps relevance first.
    mmr_lambda: float = 0.7
    #: Terms whose chunk centroids are this similar (cosine) to a sibling's name term say the same
    #: thing and are skipped.
    mmr_max_similarity: float = 0.9
    #: Most content words in a name, so names stay labels, not sentences.
    max_name_words: int = 5
    #: Terms found in at least this share of the documents (five or more) say where the
    #: collection comes from, not what a category is about; they never name one.
    corpus_wide_share: float = 0.8
    #: Level-1 nodes part the whole collection: a term in at least half of its documents (five or
    #: more) and in every level-1 node is the collection's subject, common to all parts, and names
    #: none of them; a term of half the documents found in one part only is that part's. Below
    #: level 1 such a term may still tell siblings apart ("Options" beside "Arguments"), so only
    #: ``corpus_wide_share`` applies there.
    subject_share: float = 0.5
    corpus_wide_min_docs: int = 5
    #: Heading phrases (section titles, file names) are names people wrote: their score is raised.
    heading_bonus: float = 1.15
    #: A word mostly seen right before a determiner (``planting the seeds``) acts as a verb; its
    #: nameability falls by this factor times that share, down to ``verb_floor``.
    verb_penalty: float = 2.0
    verb_floor: float = 0.15
    #: Words English mostly uses as verbs, adjectives or adverbs (``forgot``, ``warm``, ``quickly``:
    #: Brill's part-of-speech lexicon; for words it lacks, past-participle and adverb endings) describe
    #: an action, a quality or a manner; they name a topic less well than a noun.
    non_noun_nameability: float = 0.5
    #: Where at least ``titled_share`` of the chunks have titles, a word that no title uses reads
    #: less well as a name (titles are noun phrases people chose; "minutes", "turn" never head one).
    titled_share: float = 0.5
    untitled_nameability: float = 0.6
    #: A term joined to another in a name (``A & B``, grab-bags) must read as a name on its own.
    joined_nameability: float = 0.9
    #: Below this share of capitalised words the text was case-folded (many test collections are):
    #: case then says nothing about identifiers, and names start with a capital.
    case_folded_share: float = 0.01
    #: Tokens with digits (codes, versions) name one thing, rarely a topic.
    code_nameability: float = 0.35
    #: A term found only inside code blocks (an example's placeholder such as ``some_text``) is
    #: a clustering feature but no name: names come from what the prose and the headings say.
    code_only_nameability: float = 0.0
    #: Most characters in a name.
    max_name_chars: int = 60

    # ---- descriptions -------------------------------------------------------------------------
    #: Terms a description mentions besides the name.
    description_terms: int = 4
    #: Example document titles in a description (those nearest the node's centre): typical members
    #: tell a reader (and an embedding) what the node holds better than more keywords do.
    description_titles: int = 4
    #: Snippets of the most typical chunks (nearest the centre, one per document) a description
    #: quotes, and their length: a passage says what the node holds in the text's own words.
    description_passages: int = 1
    passage_chars: int = 100
    #: Least share of letters among a quoted passage's non-space characters: below it the passage
    #: is a rule of slashes, a table of numbers or a line of code, which reads as no example.
    passage_letter_share: float = 0.5
    #: ... and least share of them in words (letters, with a hyphen or an apostrophe inside, up to
    #: ``passage_word_chars`` long, punctuation around them aside): below it the passage is data (a
    #: line of JSON, an encoded key) or a signature, which reads as no example either.
    passage_word_share: float = 0.5
    passage_word_chars: int = 20
    #: Children a parent's description lists.
    description_children: int = 4
    #: Longest example title shown before it is cut.
    max_title_chars: int = 50
    #: Rounds of choosing each sibling's description variant given the others' (coordinate ascent
    #: on routing accuracy); it stops earlier when a round changes nothing. Each round is cheap
    #: (the variants are embedded once); 2 lets a choice react to its siblings' first choices.
    description_passes: int = 2
    #: The richest description variants tried (``Namer._variants``) quote up to this many times the
    #: usual example titles and passages. Three gained level-1 routing over two on documents held
    #: out of the choice (a collection of one field, a programming book); four gained nothing over three
    #: (docs/benchmarks.md §4).
    description_richest: int = 3
    #: Levels whose descriptions are chosen by routing: all three. Measured on documents held out
    #: of the choice (docs/benchmarks.md §4) it gains at every level once the variants include
    #: the passages nearest the node's centre as the embedder sees it (``Namer._variants``) ...
    routed_description_levels: int = 3
    #: ... in sibling groups holding at least this many chunks per child: in smaller ones one chunk
    #: moves a child's accuracy by a tenth or more, and choices fitted there lost on held-out chunks.
    routed_min_chunks: int = 10


DEFAULT_PARAMS = TreeParams()


@dataclass(frozen=True)
class SnippetParams:
    """Limits of the one-line snippet of a chunk (``snippets.make_snippet``)."""

    #: A heading longer than this reads as a sentence, not a label to lead the snippet with.
    title_max_chars: int = 48
    #: Most words of a heading that leads the snippet (a label, not a clause).
    title_max_words: int = 7
    #: Stop adding sentences once the body has this many characters: one full sentence is enough
    #: for a line, a second only when the first is a fragment.
    body_enough_chars: int = 60
    #: Sentences considered for the body, best first.
    max_sentences: int = 3


SNIPPET_PARAMS = SnippetParams()
