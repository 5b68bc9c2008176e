"""CSV that survives every spreadsheet and every LMS importer: how cells are written, read and saved.

Text cells a spreadsheet cannot run, the defence OWASP's "CSV Injection" page advises: a spreadsheet that
opens a CSV reads a cell starting with ``=``, ``+``, ``-`` or ``@`` (and, in some, a tab or a carriage return
before one) as a formula: ``=HYPERLINK(...)`` in a student's id or a roster's name would run. Prefixing
``'`` makes it text (https://owasp.org/www-community/attacks/CSV_Injection).

Quoting: a cell holding a comma, a double quote, a carriage return, a line feed or a semicolon is quoted
(RFC 4180, section 2, rules 6 and 7: quotes doubled inside). Python's ``csv`` quotes a carriage return only
when it is part of the line terminator, and never a semicolon; a spreadsheet in a locale whose list
separator is ``;`` (LibreOffice, Excel in most of Europe) splits an unquoted ``Doe; Jane`` in two. Lines end
with CRLF (RFC 4180 rule 1); both importers read it: Canvas parses with Ruby's CSV, whose row separator is
detected from the file (``gradebook_importer.rb``, ``csv_stream``), and Moodle's ``csv_import_reader`` turns
every CRLF or CR into LF before it parses (``lib/csvlib.class.php``, ``load_csv_content``).

Numbers: plain decimals with two places (``12345.67``, ``1000000.00``), never exponents, the precision both
gradebooks show (Canvas exports ``I18n.n(score, precision: 2)``, ``lib/gradebook_exporter.rb``
``format_numbers``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path

from grader.core.atomic import write_atomic
from grader.core.errors import UsageError

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
QUOTED_WHEN_HOLDING = (",", '"', "\r", "\n", ";")
LINE_END = "\r\n"
DELIMITERS = (",", ";")
"""What a platform's export may be separated by: Canvas writes ``;`` for a user whose locale writes decimals
with a comma (``lib/csv_with_i18n.rb``, ``determine_column_separator``)."""


def text_cell(cell: str) -> str:
    """``cell`` with ``'`` in front when it starts with one of ``FORMULA_STARTS``, else unchanged. For cells
    of text only: a number such as ``-1`` must not go through it."""
    return f"'{cell}" if cell.startswith(FORMULA_STARTS) else cell


def decimal_cell(value: float) -> str:
    """``value`` with two decimal places and no exponent: ``12345.67``, ``0.75``, ``1000000.00``."""
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def parse_decimal(text: str) -> float | None:
    """A number as a platform's export writes it, with a decimal point or comma (``10.00``, ``10,00``);
    None for anything else (an empty cell, ``-``, ``N/A``)."""
    cleaned = text.strip().replace(" ", "").replace("\u00a0", "")
    if "," in cleaned and "." not in cleaned:
        cleaned = cleaned.replace(",", ".")
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None  # no NaN, no infinity


def csv_line(cells: Iterable[str]) -> str:
    """One CSV line, each cell quoted when it holds one of ``QUOTED_WHEN_HOLDING``."""
    return ",".join(_quoted(c) for c in cells) + LINE_END


def _quoted(cell: str) -> str:
    if any(mark in cell for mark in QUOTED_WHEN_HOLDING):
        return '"' + cell.replace('"', '""') + '"'
    return cell


def csv_text(rows: Iterable[Sequence[str]]) -> str:
    return "".join(csv_line(row) for row in rows)


def write_csv(path: Path, rows: Iterable[Sequence[str]]) -> None:
    """Write ``rows`` to ``path`` atomically (``grader.core.atomic``): a crash or a full disk leaves the old
    file or the new one; ``EnvironmentFailure`` naming ``path`` when the machine refuses the write."""
    write_atomic(path, csv_text(rows))


def read_csv(path: Path) -> list[list[str]]:
    """The rows of a platform's CSV export: a byte-order mark dropped (Canvas and Excel may write one), the
    separator found (``,`` or ``;``: the one that gives every row the header's width, the wider if both do),
    blank lines skipped. ``UsageError`` naming the file when it is neither."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:  # newline="": a CR in a cell stays
            text = handle.read()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    best: list[list[str]] = []
    for delimiter in DELIMITERS:
        rows = [row for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter) if any(row)]
        if rows and len(rows[0]) > 1 and all(len(r) == len(rows[0]) for r in rows):
            best = rows if len(rows[0]) > len(best[0] if best else []) else best
    if not best:
        raise UsageError(f"{path}: not a CSV file whose rows all have the header's columns")
    return best
