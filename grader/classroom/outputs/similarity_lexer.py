"""A file's tokens, by unit, and the fallback for a file that does not parse: the lexer's tokens.

The fallback is the lexer the report used before it read the syntax tree: Pygments, normalized as
copydetect (https://github.com/blingenf/copydetect, ``utils.filter_code``) does it: every name ``V``, every
function or class name ``F``, every string ``S``, comments and layout gone.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    """One function, or the rest of a module: its tokens, and the source line each comes from."""

    tokens: tuple[str, ...]
    lines: tuple[int, ...]


@dataclass(frozen=True)
class Tokens:
    units: tuple[Unit, ...]
    parsed: bool
    """False when the file does not parse: one unit of the lexer's tokens."""


def lexed(text: str, filename: str) -> Tokens:
    """Pygments' tokens of ``text``, normalized as copydetect did; one unit. Unknown kinds of file: words."""
    from pygments import token as kinds
    from pygments.lexers import get_lexer_for_filename
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_for_filename(filename, stripnl=False)
    except ClassNotFound:
        words = [(n + 1, word) for n, line in enumerate(text.splitlines()) for word in line.split()]
        return Tokens((Unit(tuple(w for _, w in words), tuple(n for n, _ in words)),), parsed=False)
    names = {kinds.Name, kinds.Name.Variable, kinds.Name.Attribute}
    tokens: list[str] = []
    lines: list[int] = []
    line = 1
    for kind, value in lexer.get_tokens(text):
        if kind in names:
            token = "V"
        elif kind in kinds.Name.Function or kind in kinds.Name.Class:
            token = "F"
        elif kind in kinds.Literal.String:
            token = "" if tokens and tokens[-1] == "S" else "S"  # a string lexes as several pieces
        elif kind in kinds.Comment or not value.strip():
            token = ""
        else:
            token = value.strip()
        if token:
            tokens.append(token)
            lines.append(line)
        line += value.count("\n")
    return Tokens((Unit(tuple(tokens), tuple(lines)),), parsed=False)
