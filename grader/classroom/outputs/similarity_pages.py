"""The similarity report's HTML: the class's page (method, clusters first, then pairs) and a page per
flagged pair with both sides' files side by side, the code they share marked.

Every id shown goes through ``name`` (the class report's pseudonyms under ``--anonymize``); a known source
is shown by its label, marked as the reference or as a known source.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable
from html import escape

from grader.classroom.outputs.class_report import SIMILARITY_PAGE, page, slug
from grader.classroom.outputs.similarity import DEFAULT_THRESHOLD, Similarity
from grader.classroom.outputs.similarity_clusters import Cluster
from grader.classroom.outputs.similarity_index import GUARANTEE, WINDOW, K
from grader.classroom.outputs.similarity_pair import MIN_SHARED, FileMatch, Pair, flags
from grader.classroom.outputs.similarity_sources import SourceKind

PAIRS_DIR = "similarity"
CLOSEST_SHOWN = 10
"""Pairs below the threshold listed for context (no page of their own)."""
CAUTION = (
    "Similarity is a reason to look at two submissions, never a verdict. Students who discuss an approach, "
    "follow the same hint or the same paper write alike, and short code has few ways to be written. Read "
    "the pair side by side, ask the students how they worked, and follow your institution's process "
    "before you conclude anything."
)
MARK_STYLE = """
.caution{border-left:4px solid #c90;background:#fff8e6;padding:.5em 1em}
.sides{display:grid;grid-template-columns:1fr 1fr;gap:1em}.sides pre{font-size:13px;overflow-x:auto}
mark{background:#ffd86b}.source{color:#a40}
"""
PAIR_HEADINGS = ["student A", "student B", "score", "A's code in B", "B's code in A", "shared tokens", ""]


def pair_page_name(pair: Pair, name: dict[str, str]) -> str:
    return f"{slug(name[pair.students[0]])}--{slug(name[pair.students[1]])}.html"


def class_page(similarity: Similarity, name: dict[str, str]) -> str:
    flagged = similarity.flagged()
    below = (p for p in similarity.pairs if not flags(p, similarity.threshold))
    closest = list(itertools.islice(below, CLOSEST_SHOWN))
    who = _who(similarity, name)
    sections = [
        '<p><a href="index.html">&larr; class report</a></p>',
        f"<h1>Exercise {escape(similarity.exercise.key)}: similarity</h1>",
        f'<p class="caution"><strong>{escape(CAUTION)}</strong></p>',
        method(similarity),
        f"<h2>Clusters ({len(similarity.clusters)})</h2>",
        _clusters(similarity.clusters, who, name)
        if similarity.clusters
        else "<p>No pair reaches the threshold.</p>",
        f"<h2>Pairs to look at ({len(flagged)})</h2>",
        _table([_row(p, who, name, link=True) for p in flagged]) if flagged else "<p>None.</p>",
        "<h2>The closest pairs below the threshold</h2>",
        _table([_row(p, who, name, link=False) for p in closest]) if closest else "<p>None.</p>",
    ]
    return page(f"Exercise {similarity.exercise.key}: similarity", sections, MARK_STYLE)


def method(similarity: Similarity) -> str:
    """What was compared and how, in one paragraph (and one more for the files that do not parse)."""
    code = ", ".join(f"<code>{escape(b)}</code>" for b in similarity.boilerplate)
    sources = _sources(similarity)
    common = (
        f"<strong>Common code is on</strong> (<code>--common-min {similarity.common_min}</code>): a "
        f"passage more than {similarity.common_min} students have was ignored, as Moss's <code>-m</code>, "
        "unless the reference has it too"
        if similarity.common_min is not None
        else "Nothing is ignored for being popular (a group of students who hand in one file is a cluster)"
    )
    text = (
        f"<p>{len(similarity.students)} students' editable files "
        f"({escape(', '.join(similarity.exercise.files))}) were compared with each other and with the "
        f"known sources ({sources}), file by file, through an index of fingerprints. Code is read as its "
        "syntax tree: names become their role; docstrings, comments and layout do not count; each "
        "function is compared on its own, so their order does not matter. Fingerprints are chosen by "
        f"winnowing over runs of {K} tokens, {WINDOW} runs to a window: a match of {GUARANTEE} tokens or "
        f"more is always found, one under {K} never. What the course hands out never counts ({code}). "
        f"{common}. A pair's score is the share of the two sides' own code, taken together, that the other "
        "also has; each side's share is beside it. A pair is listed when its score is at least "
        f"{similarity.threshold:g} (<code>--threshold</code>; default {DEFAULT_THRESHOLD:g}) and it shares "
        f"at least {MIN_SHARED} tokens, about eight lines. Clusters group the listed pairs: who shares code "
        "with whom.</p>"
    )
    if similarity.unparsed:
        files = ", ".join(f"<code>{escape(f)}</code>" for f in similarity.unparsed)
        text += f"<p>These files do not parse, and were compared by the lexer's tokens instead: {files}.</p>"
    return text


def _sources(similarity: Similarity) -> str:
    """The known sources in a few words: the reference by its label, the others counted by folder."""
    reference = similarity.reference()
    folders = Counter(label.rpartition("/")[0] for label in similarity.sources if label != reference)
    named = [f"<code>{escape(reference)}</code>, the reference"] if reference else []
    named += [f"{count} from <code>{escape(folder)}/</code>" for folder, count in sorted(folders.items())]
    return "; ".join(named) or "none"


def _who(similarity: Similarity, name: dict[str, str]) -> Callable[[str], str]:
    """HTML naming one side: its shown name, and what it is when it is a known source."""
    marks = {
        SourceKind.REFERENCE: "the reference",
        SourceKind.AGAINST: "known source",
        SourceKind.AGAINST_STUDENT: "known source",
    }

    def shown(side: str) -> str:
        kind = similarity.sources.get(side)
        label = f' <span class="source">({marks[kind]})</span>' if kind else ""
        return escape(name[side]) + label

    return shown


def _clusters(clusters: tuple[Cluster, ...], who: Callable[[str], str], name: dict[str, str]) -> str:
    headings = ["cluster", "size", "members", "strongest pair", "its score", "held together", "pairs"]
    head = "".join(f"<th>{escape(h)}</th>" for h in headings)
    rows = []
    for number, cluster in enumerate(clusters, start=1):
        strongest = cluster.strongest
        pair = " and ".join(map(who, strongest.students))
        link = f'<a href="{PAIRS_DIR}/{pair_page_name(strongest, name)}">{pair}</a>'
        cells = [
            str(number),
            str(len(cluster.members)),
            ", ".join(map(who, cluster.members)),
            link,
            f"{100 * strongest.score:.0f}%",
            f"{100 * cluster.together:.0f}%",
            str(cluster.pairs),
        ]
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>\n")
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>\n{"".join(rows)}</tbody></table>'


def _row(pair: Pair, who: Callable[[str], str], name: dict[str, str], *, link: bool) -> list[str]:
    page_link = f'<a href="{PAIRS_DIR}/{pair_page_name(pair, name)}">side by side</a>' if link else ""
    shares = (f"{100 * share:.0f}%" for share in pair.shares)
    return [
        who(pair.students[0]),
        who(pair.students[1]),
        f"{100 * pair.score:.0f}%",
        *shares,
        str(pair.shared),
        page_link,
    ]


def _table(rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in PAIR_HEADINGS)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>\n" for row in rows)
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>'


# ---------------------------------------------------------------------------------------------------------
# a pair's page: each file side by side, matching code marked


def pair_page(pair: Pair, similarity: Similarity, name: dict[str, str], shown: Callable[[str], str]) -> str:
    """``shown``: ``code_shown(name)``, made once for all the pages."""
    a, b = (name[s] for s in pair.students)
    who = _who(similarity, name)
    lexer = " (compared by the lexer's tokens: a file does not parse)" if pair.lexed else ""
    sections = [
        f'<p><a href="../{SIMILARITY_PAGE}">&larr; similarity</a></p>',
        f"<h1>{who(pair.students[0])} and {who(pair.students[1])}: "
        f"exercise {escape(similarity.exercise.key)}</h1>",
        f'<p class="caution"><strong>{escape(CAUTION)}</strong></p>',
        f"<p>Score {100 * pair.score:.0f}% of their own code in common{lexer}: "
        f"{100 * pair.shares[0]:.0f}% of {escape(a)}'s is found in {escape(b)}'s, "
        f"{100 * pair.shares[1]:.0f}% of {escape(b)}'s in {escape(a)}'s. Marked: the lines holding code "
        "both have, once the course's own code is left out.</p>",
    ]
    for match in pair.files:
        sections.append(f"<h2>{escape(match.name)}</h2>")
        code = [_marked(match, side, similarity, shown) for side in (0, 1)]
        columns = "".join(
            f"<div><h3>{escape(side)}</h3><pre>{text}</pre></div>"
            for side, text in zip((a, b), code, strict=True)
        )
        sections.append(f'<div class="sides">{columns}</div>')
    return page(f"{a} and {b}: exercise {similarity.exercise.key}", sections, MARK_STYLE)


def _marked(match: FileMatch, side: int, similarity: Similarity, shown: Callable[[str], str]) -> str:
    """One side's text, as ``shown`` makes it, the code it shares with the other side in <mark> (not the
    given lines a match runs over)."""
    text, cursor, pieces = match.texts[side], 0, []
    for start, end in _spans(text, match.regions[side], similarity.given_lines):
        pieces.append(shown(text[cursor:start]))
        pieces.append(f"<mark>{shown(text[start:end])}</mark>")
        cursor = end
    pieces.append(shown(text[cursor:]))
    return "".join(pieces)


def _spans(text: str, regions: tuple[tuple[int, int], ...], given: frozenset[str]) -> list[tuple[int, int]]:
    """The parts of ``regions`` to mark, line by line, in order: not blank lines, not given lines."""
    spans: list[tuple[int, int]] = []
    ordered, first_open, start_of_line = sorted(regions), 0, 0
    for line in text.splitlines(keepends=True):
        end_of_line = start_of_line + len(line.rstrip("\r\n"))
        while first_open < len(ordered) and ordered[first_open][1] <= start_of_line:
            first_open += 1
        if line.strip() and line.strip() not in given:
            for start, end in ordered[first_open:]:
                if start >= end_of_line:
                    break
                first, last = max(start, start_of_line), min(end, end_of_line)
                if first < last and (not spans or first >= spans[-1][1]):
                    spans.append((first, last))
        start_of_line += len(line)
    return spans


def code_shown(name: dict[str, str]) -> Callable[[str], str]:
    """What shows a text on a pair's page: HTML-escaped, every id of the class in it (a comment may hold
    any) replaced as ``name`` says, whole, wherever no word character is on either side of it; in one
    pass, the longest first (so that ``ann`` takes nothing of ``ann-marie``)."""
    renamed = sorted((s for s in name if name[s] != s), key=len, reverse=True)
    if not renamed:
        return escape
    ids = re.compile(rf"(?<!\w)(?:{'|'.join(map(re.escape, renamed))})(?!\w)")
    return lambda text: escape(ids.sub(lambda found: name[found[0]], text))
