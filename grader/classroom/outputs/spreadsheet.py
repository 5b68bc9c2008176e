"""CSV cells a spreadsheet cannot run: the defence OWASP's "CSV Injection" page advises.

A spreadsheet that opens a CSV reads a cell starting with ``=``, ``+``, ``-`` or ``@`` (and, in some, a tab
or a carriage return before one) as a formula: ``=HYPERLINK(...)`` in a student's id or a roster's name
would run. Prefixing ``'`` makes it text (https://owasp.org/www-community/attacks/CSV_Injection).
"""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def text_cell(cell: str) -> str:
    """``cell`` with ``'`` in front when it starts with one of ``FORMULA_STARTS``, else unchanged. For cells
    of text only: a number such as ``-1``, or Moodle's ``-`` for no grade, must not go through it."""
    return f"'{cell}" if cell.startswith(FORMULA_STARTS) else cell
