"""Why pypdfium2 for PDF and lxml for HTML: speed and fidelity of the candidates on the same input.

``python -m benchmarks.parser_choice [CORPUS.jsonl] [N]`` writes a PDF of N abstracts (fpdf2, one
bookmarked section each, running header and page numbers) and an HTML page of the same abstracts,
then times each installed candidate and scores its text against the source: the share of source
words it returns in order (longest common subsequence over words). Candidates that are not
installed are skipped (``pip install pypdf pdfminer.six selectolax beautifulsoup4`` to compare all).

PDF: pypdfium2 (our parser, through `knowtology_cli.parsers.pdf`, and its raw page text), pypdf,
pdfminer.six. HTML: lxml (our parser), selectolax (lexbor), BeautifulSoup with html.parser. Only
lxml among the HTML candidates gives every element its source line, which provenance needs.
"""

from __future__ import annotations

import html
import json
import sys
import tempfile
import time
from collections.abc import Callable
from difflib import SequenceMatcher
from pathlib import Path

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "bench-data" / "scifact" / "corpus.jsonl"


def rows(corpus: Path, limit: int) -> list[tuple[str, str]]:
    out = []
    for line in corpus.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("text", "").strip():
            out.append((row.get("title") or row["_id"], row["text"]))
        if len(out) == limit:
            break
    return out


def latin(text: str) -> str:
    """fpdf2's core fonts are Latin-1: anything else becomes '?' (the same in source and PDF)."""
    return text.encode("latin-1", "replace").decode("latin-1")


def write_pdf(docs: list[tuple[str, str]], path: Path) -> int:
    from fpdf import FPDF

    class Paper(FPDF):
        def header(self) -> None:
            self.set_font("Helvetica", "I", 8)
            self.cell(0, 8, "Benchmark abstracts", align="C", new_x="LMARGIN", new_y="NEXT")

        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("Helvetica", "I", 8)
            self.cell(0, 10, f"Page {self.page_no()}", align="C")

    pdf = Paper()
    pdf.add_page()
    for title, text in docs:
        pdf.start_section(latin(title)[:120], level=0)
        pdf.set_font("Helvetica", "B", 11)
        pdf.multi_cell(0, 6, latin(title), new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", 10)
        pdf.multi_cell(0, 5, latin(text), new_x="LMARGIN", new_y="NEXT")
        pdf.ln(4)
    pdf.output(str(path))
    return pdf.page_no()


def write_html(docs: list[tuple[str, str]], path: Path) -> None:
    body = "\n".join(f"<h2>{html.escape(t)}</h2>\n<p>{html.escape(x)}</p>" for t, x in docs)
    nav = "<nav><ul>" + "".join(f"<li><a href='#{i}'>{html.escape(t)}</a></li>" for i, (t, _) in enumerate(docs)) + "</ul></nav>"
    path.write_text(f"<!DOCTYPE html><html><head><title>Abstracts</title><script>var a=1;</script></head>"
                    f"<body>{nav}<main><h1>Abstracts</h1>\n{body}\n</main><footer>Footer</footer></body></html>",
                    encoding="utf-8")


def fidelity(source: str, extracted: str) -> float:
    a, b = source.split(), extracted.split()
    matched = sum(block.size for block in SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
    return matched / max(1, len(a))


def timed(fn: Callable[[], str], runs: int = 3) -> tuple[float, str]:
    best, out = float("inf"), ""
    for _ in range(runs):
        started = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - started)
    return best, out


def pdf_candidates(path: Path) -> dict[str, Callable[[], str]]:
    data = path.read_bytes()
    found: dict[str, Callable[[], str]] = {}
    try:
        from knowtology_cli.parsers import parse

        found["knowtology (pypdfium2 + outline, paragraphs)"] = lambda: "\n".join(
            b.text for s in parse(data, name="x.pdf").sections for b in s.blocks if b.kind != "heading")

        import pypdfium2 as pdfium

        def raw() -> str:
            pdf = pdfium.PdfDocument(data)
            return "\n".join(pdf[i].get_textpage().get_text_range() for i in range(len(pdf)))

        found["pypdfium2 get_text_range"] = raw
    except ImportError:
        pass
    try:
        import io

        import pypdf

        found["pypdf extract_text"] = lambda: "\n".join(p.extract_text() or "" for p in pypdf.PdfReader(io.BytesIO(data)).pages)
    except ImportError:
        pass
    try:
        from pdfminer.high_level import extract_text

        found["pdfminer.six extract_text"] = lambda: extract_text(str(path))
    except ImportError:
        pass
    return found


def html_candidates(path: Path) -> dict[str, Callable[[], str]]:
    data = path.read_bytes()
    found: dict[str, Callable[[], str]] = {}
    try:
        from knowtology_cli.parsers import parse

        found["knowtology (lxml, sections, lines)"] = lambda: "\n".join(
            b.text for s in parse(data, name="x.html").sections for b in s.blocks if b.kind != "heading")
        import lxml.html

        found["lxml text_content (no cleaning)"] = lambda: lxml.html.document_fromstring(data).text_content()
    except ImportError:
        pass
    try:
        from selectolax.lexbor import LexborHTMLParser

        found["selectolax lexbor (no cleaning)"] = lambda: LexborHTMLParser(data).body.text(separator=" ")
    except ImportError:
        pass
    try:
        from bs4 import BeautifulSoup

        found["BeautifulSoup html.parser (no cleaning)"] = lambda: BeautifulSoup(data, "html.parser").get_text(" ")
    except ImportError:
        pass
    return found


def main(argv: list[str]) -> None:
    corpus = Path(argv[0]) if argv else DEFAULT_CORPUS
    limit = int(argv[1]) if len(argv) > 1 else 200
    docs = rows(corpus, limit)
    source = " ".join(latin(x) for _, x in docs)
    with tempfile.TemporaryDirectory() as tmp:
        pdf_path, html_path = Path(tmp, "bench.pdf"), Path(tmp, "bench.html")
        pages = write_pdf(docs, pdf_path)
        write_html(docs, html_path)
        print(f"PDF: {len(docs)} abstracts of {corpus.parent.name}, {pages} pages, {pdf_path.stat().st_size // 1024} KiB\n")
        print("| PDF library | pages/s | s | words in order |")
        print("| --- | ---: | ---: | ---: |")
        for name, fn in pdf_candidates(pdf_path).items():
            seconds, text = timed(fn)
            print(f"| {name} | {pages / seconds:.0f} | {seconds:.2f} | {fidelity(source, text):.3f} |")
        html_source = " ".join(x for _, x in docs)
        print(f"\nHTML: the same abstracts as one page with nav, script and footer, {html_path.stat().st_size // 1024} KiB\n")
        print("| HTML library | MB/s | s | words in order | extra words |")
        print("| --- | ---: | ---: | ---: | ---: |")
        size = html_path.stat().st_size / 1e6
        for name, fn in html_candidates(html_path).items():
            seconds, text = timed(fn)
            extra = len(text.split()) - len(html_source.split())
            print(f"| {name} | {size / seconds:.1f} | {seconds:.3f} | {fidelity(html_source, text):.3f} | {extra:+d} |")


if __name__ == "__main__":
    main(sys.argv[1:])
