"""Statements that commute, put in one order: swapping them must not change a file's tokens.

Two simple statements (an assignment, or an expression statement) commute when neither writes a name the
other reads or writes, and at most one of them is a bare expression statement: a call made for its effect
keeps its place among the others (a send before a receive is not a receive before a send). Writing
``x[i] = ...`` or ``x.y = ...`` writes ``x``. A run of statements that pairwise commute is sorted by their
tokens with each name reduced to its role; a tie keeps the order written.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node``, itself included: ``ast.walk``'s nodes in another order, twice as fast."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for name in current._fields:
            value = getattr(current, name, None)
            if type(value) is list:
                stack.extend([v for v in value if isinstance(v, ast.AST)])
            elif isinstance(value, ast.AST):
                stack.append(value)


def is_string(node: ast.Expr) -> bool:
    """A statement that is only a string: a docstring, or a string used as a comment."""
    return isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def in_canonical_order(
    statements: list[ast.stmt], key: Callable[[ast.stmt], tuple[str, ...]]
) -> Iterator[ast.stmt]:
    """``statements`` with each run of simple statements that commute sorted by their tokens with names
    reduced to roles (ties keep their order)."""
    run: list[tuple[ast.stmt, _Effects]] = []
    for statement in statements:
        effects = _Effects.of(statement)
        if effects is not None and all(effects.commutes(other) for _, other in run):
            run.append((statement, effects))
            continue
        yield from _sorted_run([s for s, _ in run], key)
        run = [(statement, effects)] if effects is not None else []
        if effects is None:
            yield statement
    yield from _sorted_run([s for s, _ in run], key)


def _sorted_run(run: list[ast.stmt], key: Callable[[ast.stmt], tuple[str, ...]]) -> list[ast.stmt]:
    return sorted(run, key=key) if len(run) > 1 else run


@dataclass(frozen=True)
class _Effects:
    reads: frozenset[str]
    writes: frozenset[str]
    call: bool
    """A bare expression statement: done for its effect, so it keeps its place among the others."""

    @staticmethod
    def of(statement: ast.stmt) -> _Effects | None:
        """What a simple statement reads and writes; None for any other statement."""
        if not isinstance(statement, SIMPLE) or (isinstance(statement, ast.Expr) and is_string(statement)):
            return None
        targets: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
            targets = [statement.target]
        writes = {name for target in targets for name in _bases(target)}
        reads = {n.id for n in walk(statement) if isinstance(n, ast.Name)}
        return _Effects(frozenset(reads), frozenset(writes), isinstance(statement, ast.Expr))

    def commutes(self, other: _Effects) -> bool:
        clash = self.writes & (other.reads | other.writes) or other.writes & self.reads
        return not clash and not (self.call and other.call)


def _bases(target: ast.expr) -> list[str]:
    """The names an assignment to ``target`` changes: ``x``, ``a, b``, and ``x`` of ``x[i]`` or ``x.y``."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _bases(element)]
    if isinstance(target, (ast.Starred, ast.Subscript, ast.Attribute)):
        return _bases(target.value)
    return []
