"""Experiment: o200k tokens per hit of the agent text: the old one-line format, hits grouped by
path with groups in order of their best hit (before), and runs of neighbours in rank order (now).

``python -m benchmarks.hit_line_tokens scifact cranfield cacm medline adi`` — default search, k=10,
the first 60 judged queries, on each store with its offline tree; tokens of ``render.search_text``
divided by the number of hits (group headings included). ``kt bench tokens`` reports the same figure as ``snippet_line_tokens``.
"""

from __future__ import annotations

import sys

from knowtology_cli.bench.data import COLLECTION, load_dataset, open_store
from knowtology_cli.render import hit_group, hit_line, search_text
from knowtology_cli.tokens import count_tokens


def old_format(result) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(f"[{h.chunk_id}] {h.path or '(unmapped)'} — {h.snippet} ({h.score:.3f})" for h in result.hits)


def by_best_hit(result) -> str:  # type: ignore[no-untyped-def]
    groups: dict[str, list[str]] = {}
    for h in result.hits:
        groups.setdefault(hit_group(h), []).append(hit_line(h))
    return "\n".join(line for group, lines in groups.items() for line in (group, *lines))


if __name__ == "__main__":
    print("| collection | one line per hit | grouped by best hit | runs in rank order (now) |\n"
          "| --- | ---: | ---: | ---: |")
    for name in sys.argv[1:]:
        ds = load_dataset(name)
        kb, _, _ = open_store(ds, "local")
        kb.build(collection=COLLECTION, builder="cluster")  # the offline tree `kt build` gives a user
        new, old, best = [], [], []
        for query in list(ds.judged().values())[:60]:
            result = kb.search(query, collection=COLLECTION, k=10)
            new.append(count_tokens(search_text(result), "o200k_base") / len(result.hits))
            old.append(count_tokens(old_format(result), "o200k_base") / len(result.hits))
            best.append(count_tokens(by_best_hit(result), "o200k_base") / len(result.hits))
        print(f"| {name} | {sum(old) / len(old):.1f} | {sum(best) / len(best):.1f} | {sum(new) / len(new):.1f} |")
        kb.close()
