"""Documents the parser and ingest tests generate: a two-page PDF with an outline (fpdf2)."""

from __future__ import annotations

from pathlib import Path


def write_two_page_pdf(path: Path) -> None:
    """A two-page PDF with bookmarks, a running header and page numbers (fpdf2)."""
    from fpdf import FPDF

    class Report(FPDF):
        def header(self) -> None:
            self.set_font("Helvetica", "I", 8)
            self.cell(0, 8, "Northwind Pantry - Cold Chain Manual", align="C", new_x="LMARGIN", new_y="NEXT")

        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("Helvetica", "I", 8)
            self.cell(0, 10, f"Page {self.page_no()}", align="C")

    pdf = Report()
    pdf.set_title("Cold Chain Manual")
    pdf.add_page()
    pdf.start_section("Cold Chain Manual", level=0)
    pdf.set_font("Helvetica", "B", 14)
    pdf.cell(0, 10, "Cold Chain Manual", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 11)
    pdf.multi_cell(0, 6, "Chilled goods stay between 0 and 5 degrees C from the dock to the door.")
    pdf.ln(6)
    pdf.start_section("Loading the van", level=1)
    pdf.set_font("Helvetica", "B", 12)
    pdf.cell(0, 10, "Loading the van", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 11)
    pdf.multi_cell(0, 6, "Frozen totes go in the rear compartment, which holds -18 degrees C.")
    pdf.add_page()
    pdf.start_section("Temperature checks", level=1)
    pdf.set_font("Helvetica", "B", 12)
    pdf.cell(0, 10, "Temperature checks", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 11)
    pdf.multi_cell(0, 6, "Drivers record the chiller reading at every fifth stop.")
    pdf.ln(6)
    pdf.multi_cell(0, 6, "A reading above 8 degrees C means the order is replaced, not delivered.")
    pdf.output(str(path))


def write_lines_pdf(path: Path, pages: list[list[str]], headers: list[str] | None = None,
                    numbered: bool = False) -> None:
    """A PDF of the given text lines, one list per page, each page under its running header (fpdf2),
    with the bare page number at its foot when ``numbered``.

    Each line is its own text line, so a line ending in ``-`` is a hyphen at a line end to PDFium.
    """
    from fpdf import FPDF

    class Numbered(FPDF):
        def footer(self) -> None:
            if numbered:
                self.set_y(-15)
                self.cell(0, 10, str(self.page_no()), align="C")

    pdf = Numbered()
    pdf.set_font("Helvetica", "", 11)
    for number, lines in enumerate(pages):
        pdf.add_page()
        if headers and headers[number]:
            pdf.set_font("Helvetica", "I", 8)
            pdf.cell(0, 8, headers[number], align="C", new_x="LMARGIN", new_y="NEXT")
            pdf.set_font("Helvetica", "", 11)
        for line in lines:
            pdf.cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))


PAPER_BODY = ("Drivers record the chiller reading at every fifth stop and again at the depot, and a reading "
              "above eight degrees means the order is replaced rather than delivered to the customer.")


def write_paper_pdf(path: Path, *, bold_body: bool = False) -> None:
    """A paper without bookmarks, as LaTeX sets one (fpdf2, Times): a 17 pt title, the authors in 12 pt
    and their affiliation in italics, a bold "Abstract", 12 pt bold sections and bold body-size
    subsections; a paragraph led by a bold "Note:". With ``bold_body`` all body text is bold too."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    body = "B" if bold_body else ""

    def para(text: str, size: float = 10, style: str = body, gap: float = 2) -> None:
        pdf.set_font("Times", style, size)
        pdf.multi_cell(0, size * 0.5, text, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(gap)

    para("Cold Chain Deliveries in Small Vans", 17, "B", 4)
    para("Alice Example and Bob Sample", 12, "")
    para("Department of Logistics, Example University", 10, "I", 6)
    para("Abstract", style="B", gap=0)
    para(PAPER_BODY)
    para("1 Loading the van", 12, "B", 0)
    para(PAPER_BODY)
    para("1.1 Frozen totes", style="B", gap=0)
    para(PAPER_BODY)
    pdf.set_font("Times", "B", 10)
    pdf.write(5, "Note:")
    pdf.set_font("Times", body, 10)
    pdf.write(5, " totes wait in the shade.")
    pdf.ln(7)
    para("2 Returns", 12, "B", 0)
    para(PAPER_BODY)
    pdf.output(str(path))
