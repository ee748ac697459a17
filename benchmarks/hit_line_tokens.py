"""Experiment: o200k tokens per hit of the agent text, the grouped format vs the old one-line format.

``python -m benchmarks.hit_line_tokens scifact cranfield cacm medline adi`` — default search, k=10,
the first 60 judged queries, on each store with its offline tree; tokens of ``render.search_text``
divided by the number of hits (group headings included). ``kt bench tokens`` reports the same figure as ``snippet_line_tokens``.
"""

from __future__ import annotations

import sys

from knowtology_cli.bench.data import COLLECTION, load_dataset, open_store
from knowtology_cli.render import search_text
from knowtology_cli.tokens import count_tokens


def old_format(result) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(f"[{h.chunk_id}] {h.path or '(unmapped)'} — {h.snippet} ({h.score:.3f})" for h in result.hits)


if __name__ == "__main__":
    print("| collection | one line per hit (before) | grouped (now) |\n| --- | ---: | ---: |")
    for name in sys.argv[1:]:
        ds = load_dataset(name)
        kb, _, _ = open_store(ds, "local")
        kb.build(collection=COLLECTION, builder="cluster")  # the offline tree `kt build` gives a user
        new, old = [], []
        for query in list(ds.judged().values())[:60]:
            result = kb.search(query, collection=COLLECTION, k=10)
            new.append(count_tokens(search_text(result), "o200k_base") / len(result.hits))
            old.append(count_tokens(old_format(result), "o200k_base") / len(result.hits))
        print(f"| {name} | {sum(old) / len(old):.1f} | {sum(new) / len(new):.1f} |")
        kb.close()
