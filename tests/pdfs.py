"""PDFs written by hand for tests: a real text layer with every line placed where a test
needs it (a letter alone on page 2, a paragraph cut by a page break), a few hundred bytes
instead of a stored file."""

from __future__ import annotations

Line = tuple[float, float, float, str]  # x, y (points from the bottom), size, text


A4 = (595, 842)
LETTER = (612, 792)


def pdf_of(pages: list[list[Line]], paper: tuple[int, int] = A4) -> bytes:
    """A PDF of text lines placed by hand, one list per page, in Helvetica on ``paper``
    (width, height in points): a real text layer pdfminer lays out, small enough to
    write here instead of storing a file."""
    count = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, placed in enumerate(pages):
        shown = (
            t.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for *_, t in placed
        )
        stream = "".join(
            f"BT /F1 {size:g} Tf {x:g} {y:g} Td ({text}) Tj ET\n"
            for (x, y, size, _), text in zip(placed, shown, strict=True)
        ).encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {paper[0]} {paper[1]}] /Resources "
            f"<< /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n%bendstream" % (len(stream), stream))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%b\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def lines(texts: list[str], top: float, size: float = 11) -> list[Line]:
    """A paragraph's lines, from ``top`` down."""
    return [(72, top - 14 * i, size, text) for i, text in enumerate(texts)]


# a company's report: page 1 an overview, page 2 a letter, page 3 a small table
OVERVIEW = lines(
    [
        "Harbour Supplies sells fasteners, fittings and hand tools to shipyards and",
        "marine workshops along the North Sea coast. The company was founded in 1987",
        "and employs about one hundred and forty people in three countries.",
    ],
    730,
) + lines(
    [
        "Customers order through the web shop or by telephone. Most orders are packed",
        "the same day and reach the customer within two working days.",
    ],
    676,
)
LETTER = [
    *lines(["Dear Ms. Patel,"], 770),
    *lines(
        [
            "I am writing to let you know that our Tilburg warehouse will close for good",
            "on 14 March. Orders placed after that date will ship from Rotterdam instead.",
        ],
        744,
    ),
    *lines(["Kind regards,", "Jan de Vries"], 704),
]
STOCK = [
    (72 + 150 * column, 770 - 20 * row, 11, cell)
    for row, cells in enumerate(
        [("Product", "Stock", "Price"), ("Bolts", "1200", "0.10"), ("Washers", "800", "0.02")]
    )
    for column, cell in enumerate(cells)
]
TITLE = [(72, 770, 18, "Harbour Supplies: Company Overview")]
# a paragraph the page break cuts in two, after a sentence wholly on page 1
COLD_STORE = [
    TITLE
    + lines(
        [
            "Harbour Supplies opens a cold store in Delfzijl next spring. It is built on",
            "the quay where the old fish auction stood, for the frozen goods that the",
        ],
        730,
    ),
    lines(
        [
            "yards order for their crews. The loading dock of the cold store takes four",
            "refrigerated lorries at a time, on both sides of the building.",
        ],
        770,
    ),
    LETTER,
]
