"""Write the PDF documents of sample_corpus/ reproducibly (fpdf2; fixed dates, no randomness).

``.venv/bin/python scripts/make_sample_pdfs.py`` rewrites ``sample_corpus/**/*.pdf`` byte for byte.
Each PDF has an outline (bookmarks), a running header and page numbers, as exported manuals do.
"""

from __future__ import annotations

import sys
import warnings
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SUPPLIER_MANUAL = {
    "path": "warehouse/supplier-quality-manual.pdf",
    "title": "Northwind Pantry Supplier Quality Manual",
    "header": "Northwind Pantry - Supplier Quality Manual - Rev. 4 (January 2026)",
    "sections": [
        (0, "Supplier Quality Manual", [
            "This manual sets out what Northwind Pantry expects from every supplier of fresh, chilled, "
            "frozen and ambient groceries delivered to our fulfilment centres. It applies to growers, "
            "manufacturers, importers and wholesalers alike. Buyers share it with a supplier before the "
            "first purchase order; the supplier confirms in writing that it has read it.",
            "Questions about this manual go to the Supplier Quality team at quality@northwindpantry.com. "
            "Urgent food safety matters go to the 24/7 quality hotline on +1 555 0142.",
        ]),
        (1, "1. Approval of new suppliers", [
            "A new supplier is approved in three steps: a self-assessment questionnaire, a review of its "
            "certificates, and for high-risk categories a site audit by our Supplier Quality team. High-risk "
            "categories are ready-to-eat chilled food, raw meat and fish, infant food, and any product "
            "carrying an allergen-free claim.",
            "We accept GFSI-benchmarked certificates (BRCGS, SQF, IFS, FSSC 22000) at grade B or better. "
            "A certificate must be valid on the day the first order ships; the supplier uploads each "
            "renewal to the supplier portal within 10 days of the audit.",
            "Until approval is complete a buyer may place one trial order of at most 200 units, which the "
            "receiving team inspects in full.",
        ]),
        (1, "2. Product specifications", [
            "Every product has a specification agreed before listing: ingredients in descending order, "
            "the 14 major allergens and may-contain statements, nutrition per 100 g, shelf life from "
            "production, storage temperature, case size and the GTIN of each unit and case.",
            "A change to a recipe, an ingredient supplier or the production site is notified at least "
            "8 weeks before the first delivery of the changed product. Allergen changes are notified "
            "before any change is made, and the product is re-labelled before it ships.",
        ]),
        (2, "2.1 Minimum remaining shelf life", [
            "Deliveries must arrive with at least the following share of the total shelf life left: "
            "chilled products 75 percent, frozen products 80 percent, ambient products 66 percent. "
            "Products with a total shelf life of 5 days or less (fresh fish, some bakery) must arrive "
            "with at least 3 full days left.",
            "The receiving team rejects a pallet that misses the minimum. The supplier pays the return "
            "freight, and repeated misses count against its scorecard (section 4).",
        ]),
        (1, "3. Delivery and temperature control", [
            "Chilled goods travel at 0 to 5 degrees C and frozen goods at -18 degrees C or colder. The "
            "driver hands the receiving team a temperature record for the whole journey; our team probes "
            "one case per pallet. A chilled core temperature above 8 degrees C, or a frozen one above "
            "-15 degrees C, means the pallet is rejected.",
            "Delivery slots are booked in the carrier portal at least 24 hours ahead. A vehicle more than "
            "30 minutes late for its slot may be turned away when the dock is full.",
            "Pallets are wrapped, labelled with an SSCC barcode on two sides, and no higher than 1.8 m. "
            "Mixed pallets carry a content list on top.",
        ]),
        (1, "4. Supplier scorecard", [
            "Each supplier is scored monthly on four measures: on-time delivery (target 98 percent of "
            "slots), order fill rate (target 97 percent of units), quality rejections (target below "
            "0.5 percent of cases) and shelf-life compliance (target 100 percent of deliveries).",
            "A supplier scoring below target on two measures for three months in a row is put on an "
            "improvement plan with a named contact on both sides. A supplier on an improvement plan for "
            "six months is reviewed for delisting by the category director.",
        ]),
        (1, "5. Product withdrawals and recalls", [
            "A supplier that finds a food safety problem in a product it has delivered to us calls the "
            "quality hotline at once, day or night, and follows up in writing within 2 hours. The call "
            "gives the product, GTIN, batch or lot codes, best-before dates, the hazard and the quantity "
            "shipped to each fulfilment centre.",
            "We block affected stock in the warehouse system within 1 hour of the call, pull it from "
            "customer orders that have not yet been picked, and notify customers who received it by email "
            "and push. The supplier pays the cost of the withdrawal, including refunds to customers.",
            "Every supplier runs a traceability test at least once a year: given a finished product batch, "
            "it must account for all raw materials and all deliveries to us within 4 hours.",
        ]),
    ],
}

DRIVER_HANDBOOK = {
    "path": "product/driver-app/driver-safety-handbook.pdf",
    "title": "Driver Safety Handbook",
    "header": "Northwind Pantry Driver Safety Handbook",
    "sections": [
        (0, "Driver Safety Handbook", [
            "This handbook is for every driver who delivers Northwind Pantry orders, employed or "
            "contracted. It covers the van, the road and the doorstep. Read it before your first shift; "
            "your shift lead goes through it with you on the ride-along.",
        ]),
        (1, "Before the shift", [
            "Walk around the van before you load it: tyres, lights, mirrors, the tail lift and the "
            "chiller unit. Record the check in the Driver app under Shift > Vehicle check. A van with a "
            "defect on the red list (brakes, tyres below 2 mm, a chiller that does not reach 5 degrees C "
            "within 20 minutes) does not leave the depot; call the fleet desk on extension 4410.",
            "Wear the high-visibility vest and safety shoes at the depot and at every stop. Gloves are "
            "in the door pocket; use them for crates and frozen totes.",
        ]),
        (1, "On the road", [
            "Never use the phone while the van is moving. The Driver app locks route changes above "
            "8 km/h; if a customer calls, pull over safely before you answer.",
            "Plan for the load. A full van needs longer to stop, and crates shift on sharp turns even "
            "when strapped. Keep to speed limits and to 20 km/h in depot yards.",
            "If you are in a collision, stop, make the scene safe and call emergency services if anyone "
            "is hurt. Then report it in the Driver app under Help > Incident within 1 hour, with photos.",
        ]),
        (1, "At the door", [
            "Lift with your legs, and never carry more than 2 crates (about 25 kg) at a time. Use the "
            "sack truck for stairs with more than one flight; the app marks addresses with no lift.",
            "If a dog is loose, do not enter the property; ring the customer from the van and wait. If "
            "you feel unsafe at any stop, leave, mark the stop as 'Unsafe to deliver' and tell your shift "
            "lead. You will never be penalised for putting your safety first.",
            "Frozen and chilled items go into the customer's hands, not onto the doorstep, unless the "
            "customer chose a Leave-at-door delivery with an insulated liner.",
        ]),
        (1, "Fatigue and breaks", [
            "Take a break of at least 30 minutes after 5 hours on the road, and do not drive more than "
            "9 hours in a day. The Driver app reminds you when a break is due and schedules it between "
            "stops so the route stays on time.",
        ]),
    ],
}


def write_pdf(spec: dict, out: Path) -> None:
    """One PDF with bookmarks for every section, a running header and 'Page N of M' footers."""
    from fpdf import FPDF

    class Manual(FPDF):
        def header(self) -> None:
            self.set_font("Helvetica", "I", 8)
            self.cell(0, 8, spec["header"], align="C", new_x="LMARGIN", new_y="NEXT")
            self.ln(2)

        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("Helvetica", "I", 8)
            self.cell(0, 10, f"Page {self.page_no()} of {{nb}}", align="C")

    with warnings.catch_warnings():  # fpdf2 notes that it corrected A5's size in 2.8.5; we want the corrected one
        warnings.simplefilter("ignore", UserWarning)
        pdf = Manual(format="A5")
    pdf.set_creation_date(datetime(2026, 1, 15, tzinfo=timezone.utc))
    pdf.set_title(spec["title"])
    pdf.set_author("Northwind Pantry")
    pdf.set_producer("fpdf2")
    pdf.set_auto_page_break(auto=True, margin=18)
    pdf.add_page()
    for level, heading, paragraphs in spec["sections"]:
        if pdf.get_y() > 150:
            pdf.add_page()
        pdf.start_section(heading, level=level)
        pdf.set_font("Helvetica", "B", 14 if level == 0 else 12 if level == 1 else 11)
        pdf.multi_cell(0, 7, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(1)
        pdf.set_font("Helvetica", "", 10)
        for paragraph in paragraphs:
            pdf.multi_cell(0, 5, paragraph, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    out.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(out))


def main(argv: list[str]) -> None:
    base = Path(argv[0]) if argv else ROOT / "sample_corpus"
    for spec in (SUPPLIER_MANUAL, DRIVER_HANDBOOK):
        out = base / spec["path"]
        write_pdf(spec, out)
        print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
