"""The self-contained HTML map page: native ``<details>`` tree, inline CSS and JS, no network."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from html import escape
from typing import TYPE_CHECKING

from .export_common import children_index, display_title, source_href, source_label, summary_line

if TYPE_CHECKING:
    from .export import ChunkEntry, NodeEntry, TreeDocument

_CSS = """
:root { color-scheme: light dark; --fg: #1d232b; --muted: #5b6673; --bg: #fff; --accent: #2458b3;
        --line: #dfe3e8; --chip: #eef2f7; --hit: #fff3bf; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6e9ee; --muted: #9aa5b1; --bg: #15191e; --accent: #7fb0ff; --line: #2c333b;
          --chip: #232a33; --hit: #4a4217; }
}
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
       color: var(--fg); background: var(--bg); }
header { position: sticky; top: 0; z-index: 1; background: var(--bg); border-bottom: 1px solid var(--line);
         padding: 12px 20px; }
h1 { font-size: 1.25rem; margin: 0 0 2px; }
.meta { color: var(--muted); margin: 0 0 8px; font-size: .9rem; }
.controls { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
#filter { flex: 1 1 320px; max-width: 560px; padding: 6px 10px; font: inherit; color: var(--fg);
          background: var(--bg); border: 1px solid var(--line); border-radius: 6px; }
button { font: inherit; padding: 5px 10px; color: var(--fg); background: var(--chip);
         border: 1px solid var(--line); border-radius: 6px; cursor: pointer; }
#filter-status { color: var(--muted); font-size: .9rem; }
main { padding: 12px 20px 40px; }
ul.tree, ul.tree ul { list-style: none; margin: 0; padding: 0; }
ul.tree ul { margin-left: 1.1rem; padding-left: .6rem; border-left: 1px solid var(--line); }
summary { cursor: pointer; padding: 3px 0; }
summary .name { font-weight: 600; }
.count { display: inline-block; margin-left: .5rem; padding: 0 .45rem; border-radius: 999px;
         background: var(--chip); color: var(--muted); font-size: .8rem; font-variant-numeric: tabular-nums; }
.filtering .count.matched { background: var(--hit); color: var(--fg); }
.desc { display: block; margin-left: 1.1rem; color: var(--muted); font-size: .88rem; }
li.chunk { padding: 4px 0; font-size: .92rem; }
li.chunk .about { display: block; color: var(--muted); font-size: .8rem; }
.cid { font-size: .8rem; }
a.src { color: var(--accent); white-space: nowrap; }
.empty { color: var(--muted); }
[hidden] { display: none !important; }
"""

_JS = """
(() => {
  "use strict";
  const tree = document.getElementById("tree");
  const box = document.getElementById("filter");
  const status = document.getElementById("filter-status");
  if (!tree || !box) return;
  const own = new Map();
  for (const li of tree.querySelectorAll("li.node")) {
    const summary = li.firstElementChild.firstElementChild;
    own.set(li, summary.textContent.toLowerCase());
  }
  for (const li of tree.querySelectorAll("li.chunk")) own.set(li, li.textContent.toLowerCase());
  const kids = (li) => li.firstElementChild.querySelectorAll(":scope > ul > li");
  const countOf = (li) => li.firstElementChild.firstElementChild.querySelector(".count");
  let saved = null;
  let leaves = 0;

  // A chunk matches when every term occurs in its own text or its categories' names and descriptions,
  // so "refund spoiled" finds a spoiled-item chunk under Refunds. Returns the matching chunks under li.
  function visit(li, inherited, terms) {
    const text = inherited + " " + own.get(li);
    if (li.classList.contains("chunk")) {
      const hit = terms.every((t) => text.includes(t));
      li.hidden = !hit;
      return hit ? 1 : 0;
    }
    let n = 0;
    const children = kids(li);
    for (const child of children) n += visit(child, text, terms);
    const self = terms.every((t) => text.includes(t));
    li.hidden = !(self || n > 0);
    if (n > 0) li.firstElementChild.open = true;
    if (n > 0 && !li.querySelector(":scope > details > ul > li.node")) leaves += 1;
    const count = countOf(li);
    count.textContent = n + " / " + count.dataset.total;
    count.classList.toggle("matched", n > 0);
    return n;
  }

  function clear() {
    document.body.classList.remove("filtering");
    for (const li of own.keys()) li.hidden = false;
    for (const li of tree.querySelectorAll("li.node")) {
      const count = countOf(li);
      count.textContent = count.dataset.total;
      count.classList.remove("matched");
    }
    if (saved) for (const [details, open] of saved) details.open = open;
    saved = null;
    status.textContent = "";
  }

  function apply() {
    const terms = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
    if (!terms.length) { clear(); return; }
    if (!saved) saved = Array.from(tree.querySelectorAll("details"), (d) => [d, d.open]);
    document.body.classList.add("filtering");
    leaves = 0;
    let total = 0;
    for (const li of tree.querySelectorAll(":scope > li.node")) total += visit(li, "", terms);
    status.textContent = total ? total + (total === 1 ? " chunk" : " chunks") + " in " + leaves
      + (leaves === 1 ? " category" : " categories") : "no chunk matches";
  }

  let pending = false;  // one filter pass per frame, however fast the typing
  box.addEventListener("input", () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; apply(); });
  });
  box.addEventListener("keydown", (e) => { if (e.key === "Escape") { box.value = ""; apply(); } });
  const setAll = (open) => { for (const d of tree.querySelectorAll("li:not([hidden]) > details")) d.open = open; };
  document.getElementById("expand-all").addEventListener("click", () => setAll(true));
  document.getElementById("collapse-all").addEventListener("click", () => setAll(false));
  if (box.value) apply();
})();
"""


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


# nothing may be fetched; only this page's own style and script (by hash) run
CONTENT_SECURITY_POLICY = (f"default-src 'none'; style-src {_csp_hash(_CSS)}; script-src {_csp_hash(_JS)}; "
                           "img-src 'none'; form-action 'none'; base-uri 'none'")


def _chunk_html(chunk: ChunkEntry, link_base: str, roots: Mapping[str, str] | None) -> str:
    href = source_href(chunk, link_base, roots)
    about = [f'<code class="cid">{escape(chunk.chunk_id)}</code>']
    if chunk.title:
        about.append(f'<span class="ttl">{escape(chunk.title)}</span>')
    if href:
        about.append(f'<a class="src" href="{escape(href, quote=True)}">{escape(source_label(chunk))}</a>')
    return (f'<li class="chunk" data-id="{escape(chunk.chunk_id, quote=True)}">'
            f'<span class="snip">{escape(chunk.snippet)}</span> <span class="about">{" · ".join(about)}</span></li>')


def _node_html(node: NodeEntry, kids: dict[str, list[NodeEntry]], leaves: dict[str, list[ChunkEntry]],
               link_base: str, roots: Mapping[str, str] | None, out: list[str]) -> None:
    desc = f'<span class="desc">{escape(node.description)}</span>' if node.description else ""
    out.append(f'<li class="node" data-path="{escape(node.path, quote=True)}" data-level="{node.level}"><details>'
               f'<summary><span class="name">{escape(node.name)}</span> '
               f'<span class="count" data-total="{node.chunk_count}">{node.chunk_count}</span> {desc}</summary>')
    children = kids.get(node.path, [])
    if children:
        out.append("<ul>")
        for child in children:
            _node_html(child, kids, leaves, link_base, roots, out)
        out.append("</ul>")
    chunks = leaves.get(node.path, [])
    if chunks:
        out.append('<ul class="chunks">' + "".join(_chunk_html(c, link_base, roots) for c in chunks) + "</ul>")
    out.append("</details></li>")


def render(doc: TreeDocument, *, link_base: str = "", roots: Mapping[str, str] | None = None) -> str:
    """The page for ``doc``; chunk links are ``link_base`` + the chunk's file (relative when empty,
    from where the page is written when ``roots`` says where each source's folder is).

    The tree is plain HTML, so it reads (and collapses) without JavaScript; the inline script adds the
    filter box and expand/collapse-all. A Content-Security-Policy with the hashes of the one inline
    style and script forbids every fetch, so the page cannot load anything even if a snippet tried to.
    Every text from the store (names, descriptions, snippets, ids — LLM output among them) is escaped.
    """
    kids, leaves = children_index(doc)
    title = display_title(doc)
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta name="generator" content="{escape(doc.generator, quote=True)}">',
        f"<title>Knowledge map — {escape(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f'<header><h1>{escape(title)}</h1><p class="meta">{escape(summary_line(doc))}</p>',
        '<div class="controls"><input id="filter" type="search" autocomplete="off" '
        'placeholder="Filter categories and snippets…" aria-label="Filter categories and snippets">',
        '<button id="expand-all" type="button">Expand all</button>'
        '<button id="collapse-all" type="button">Collapse all</button>',
        '<span id="filter-status" role="status" aria-live="polite"></span></div>',
        "<noscript><p class=\"meta\">The filter needs JavaScript; the tree works without it.</p></noscript>",
        '</header><main><ul class="tree" id="tree">',
    ]
    for node in kids.get("root", []):
        _node_html(node, kids, leaves, link_base, roots, out)
    out.append("</ul>")
    if not doc.nodes:
        out.append('<p class="empty">No tree yet: run <code>kt build</code>.</p>')
    out.append(f"</main><script>{_JS}</script></body></html>")
    return "\n".join(out) + "\n"
