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
