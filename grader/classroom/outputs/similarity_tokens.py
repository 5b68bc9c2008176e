"""A file's code as the similarity comparison sees it: tokens from its syntax tree, one run per function.

``tokenize`` parses the file with ``ast`` and walks the tree in source order, one token per node, so that
the layout, the comments and the docstrings (a statement that is only a string) never count:

- a name becomes its role and a number by first appearance within its unit: ``P1`` the first parameter
  named, ``V1`` the first local, ``F1`` the first function or class of the module, ``G1`` the first
  module-level variable; renaming changes nothing. Imported names become what they import
  (``dist`` of ``import torch.distributed as dist``, and ``torch.distributed`` itself, are
  ``torch.distributed``); builtins, attributes and keyword arguments keep their names, which are the API;
- a string is ``S``, a number or ``None`` itself; annotations are left out;
- each function (and each method) is its own unit, serialised on its own, and the rest of the module is
  one more: moving functions around changes nothing;
- within a block, a run of simple statements that commute (no one writes a name another reads or writes,
  and at most one of them is a bare call, done for its effect) is put in a canonical order, so that
  swapping them changes nothing either.

A file that does not parse falls back to the lexer (Pygments, normalized as copydetect did: every name
``V``, every string ``S``, comments and layout gone) in one unit; ``Tokens.parsed`` says which.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grader.classroom.outputs.similarity_commute import in_canonical_order, is_string, walk
from grader.classroom.outputs.similarity_lexer import Tokens, Unit, lexed

_EFFECTS = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)
"""What makes an expression do something besides computing a value."""
SKIPPED_FIELDS = frozenset({"ctx", "type_comment", "annotation", "returns", "type_params", "simple", "kind"})
"""Fields that do not count: load/store context, annotations, and flags of no meaning here."""
BUILTINS = frozenset(dir(builtins))


def tokenize(text: str, filename: str) -> Tokens:
    """The tokens of ``text`` (named ``filename`` for the fallback lexer), by unit."""
    try:
        tree = ast.parse(text, filename)
    except (SyntaxError, ValueError):  # ValueError: a null byte
        return lexed(text, filename)
    units = _units(tree)
    names = _ModuleNames(tree, units)
    written = [_Writer(names, names.scopes.get(node)).unit(node) for node in units]
    return Tokens(tuple(u for u in written if u.tokens), parsed=True)


# ---------------------------------------------------------------------------------------------------------
# what a name is


class _ModuleNames:
    """What the module's names are: imported (and from where), or the module's own functions and
    variables; and each function's scope. One walk over the tree finds it all."""

    def __init__(self, tree: ast.Module, units: list[ast.AST]) -> None:
        self.imported: dict[str, str] = {}
        self.functions = {
            n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        }
        self.scopes: dict[ast.AST, _Scope] = {}
        written: set[str] = set()
        for unit in units:
            if isinstance(unit, ast.Module):
                for node in walk(unit):
                    _imports(node, self.imported)
                    if node is not unit:
                        written.update(_bound_here(node))
            else:
                self.scopes[unit] = _Scope.of(unit, self.imported)
        self.variables = written - self.functions - set(self.imported)

    def role(self, name: str, scope: _Scope | None) -> str | None:
        """``P``, ``V``, ``F`` or ``G``; None for a name that stays as it is (builtin, or unknown)."""
        if scope is not None and name in scope.params:
            return "P"
        if scope is not None and name in scope.locals:
            return "V"
        if name in self.functions:
            return "F"
        if name in self.variables:
            return "G"
        return None


@dataclass(frozen=True)
class _Scope:
    """A function's parameters, locals and the names it reads, nested functions and lambdas included."""

    params: frozenset[str]
    locals: frozenset[str]
    reads: frozenset[str]

    @staticmethod
    def of(function: ast.AST, imported: dict[str, str]) -> _Scope:
        """``function``'s scope; the imports in it go into ``imported``."""
        params: set[str] = set()
        declared: set[str] = set()
        written: set[str] = set()
        reads: set[str] = set()
        for node in walk(function):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                _imports(node, imported)
            elif isinstance(node, ast.arguments):
                params.update(a.arg for a in _args(node))
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                declared.update(node.names)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                reads.add(node.id)
            elif node is not function:
                written.update(_bound_here(node))
        return _Scope(frozenset(params), frozenset(written - params - declared), frozenset(reads))

    def dead(self, statement: ast.stmt) -> bool:
        """A statement that does nothing: ``pass``, a bare constant, or an assignment without a call to
        locals never read (padding, as far as the code's meaning goes)."""
        if isinstance(statement, ast.Pass):
            return True
        if isinstance(statement, ast.Expr):
            return isinstance(statement.value, ast.Constant)
        if not isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or statement.value is None:
            return False
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        names = [n for target in targets for n in walk(target)]
        unread = all(
            isinstance(n, ast.Name) and n.id in self.locals and n.id not in self.reads
            for n in names
            if not isinstance(n, (ast.Tuple, ast.List, ast.Starred, ast.expr_context))
        )
        return unread and not any(isinstance(n, _EFFECTS) for n in walk(statement.value))


def _args(node: ast.arguments) -> list[ast.arg]:
    extra = [a for a in (node.vararg, node.kwarg) if a is not None]
    return [*node.posonlyargs, *node.args, *node.kwonlyargs, *extra]


def _bound_here(node: ast.AST) -> list[str]:
    """The names ``node`` itself binds (not those of its children)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return [node.id]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    return []


def _imports(node: ast.AST, imported: dict[str, str]) -> None:
    """Record what an import binds: ``dist`` of ``import torch.distributed as dist`` is
    ``torch.distributed``, ``torch`` of ``import torch.distributed`` is ``torch``."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            imported[bound] = alias.name if alias.asname else bound
    elif isinstance(node, ast.ImportFrom) and node.module:
        for alias in node.names:
            imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"


def _units(tree: ast.Module) -> list[ast.AST]:
    """Each function and method, then the rest of the module (class bodies without their methods) as one
    more unit."""
    units: list[ast.AST] = []
    rest: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            units.append(node)
        elif isinstance(node, ast.ClassDef):
            methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            units += methods
            body = [n for n in node.body if n not in methods]
            rest.append(ast.ClassDef(node.name, node.bases, node.keywords, body, node.decorator_list))
        else:
            rest.append(node)
    return [*units, ast.Module(rest, [])]


# ---------------------------------------------------------------------------------------------------------
# the walk


class _Writer:
    """Serialises one unit. ``anonymous``: a name is its role alone (the key statements are sorted by)."""

    def __init__(self, names: _ModuleNames, scope: _Scope | None, *, anonymous: bool = False) -> None:
        self.names, self.scope, self.anonymous = names, scope, anonymous
        self.numbers: dict[tuple[str, str], int] = {}
        self.counts: dict[str, int] = {}
        self.tokens: list[str] = []
        self.lines: list[int] = []
        self.line = 1

    def unit(self, node: ast.AST) -> Unit:
        self.visit(node)
        return Unit(tuple(self.tokens), tuple(self.lines))

    def anonymous_tokens(self, statement: ast.stmt) -> tuple[str, ...]:
        """``statement``'s tokens with each name reduced to its role: the order of statements that commute."""
        return _Writer(self.names, self.scope, anonymous=True).unit(statement).tokens

    def emit(self, token: str) -> None:
        self.tokens.append(token)
        self.lines.append(self.line)

    def name(self, name: str) -> str:
        """The token of ``name`` where it is used."""
        role = self.names.role(name, self.scope)
        if role is None:
            return self.names.imported.get(name, name)
        if self.anonymous:
            return role
        key = (role, name)
        if key not in self.numbers:
            self.counts[role] = self.numbers[key] = self.counts.get(role, 0) + 1
        return f"{role}{self.numbers[key]}"

    def visit(self, node: ast.AST) -> None:
        self.line = getattr(node, "lineno", self.line)
        special = _SPECIAL.get(type(node))
        if special is not None:
            special(self, node)
            return
        self.emit(type(node).__name__)
        self.fields(node)

    def fields(self, node: ast.AST, skip: tuple[str, ...] = ()) -> None:
        for field in node._fields:
            if field in SKIPPED_FIELDS or field in skip:
                continue
            value = getattr(node, field, None)
            if isinstance(value, ast.AST):
                self.visit(value)
            elif isinstance(value, list):
                self.block(value)
            elif isinstance(value, str):
                self.emit(value)

    def block(self, items: list[ast.AST]) -> None:
        statements = [s for s in items if isinstance(s, ast.stmt)]
        if len(statements) == len(items) and statements:
            kept = [s for s in statements if self.scope is None or not self.scope.dead(s)]
            items = list(in_canonical_order(kept, self.anonymous_tokens))
        for item in items:
            if isinstance(item, ast.AST):
                self.visit(item)
            elif isinstance(item, str):
                self.emit(self.name(item))


def _function(w: _Writer, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    w.emit(type(node).__name__)
    w.emit(w.name(node.name))
    w.fields(node, skip=("name",))


def _class(w: _Writer, node: ast.ClassDef) -> None:
    w.emit("ClassDef")
    w.emit(w.name(node.name))
    w.fields(node, skip=("name",))


def _name(w: _Writer, node: ast.Name) -> None:
    w.emit(w.name(node.id))


def _arg(w: _Writer, node: ast.arg) -> None:
    w.emit(w.name(node.arg))


def _attribute(w: _Writer, node: ast.Attribute) -> None:
    """``a.b.c``: the value's tokens, then ``.c``; one dotted token when the chain starts at an import."""
    dotted = _dotted(node, w.names)
    if dotted is not None:
        w.emit(dotted)
        return
    w.visit(node.value)
    w.emit(f".{node.attr}")


def _dotted(node: ast.expr, names: _ModuleNames) -> str | None:
    if isinstance(node, ast.Name) and node.id in names.imported:
        return names.imported[node.id]
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, names)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _constant(w: _Writer, node: ast.Constant) -> None:
    value = node.value
    w.emit("S" if isinstance(value, str) else "B" if isinstance(value, bytes) else repr(value))


def _keyword(w: _Writer, node: ast.keyword) -> None:
    w.emit(f"{node.arg or '**'}=")
    w.visit(node.value)


def _alias(w: _Writer, node: ast.alias) -> None:
    w.emit(f"import {node.name}")


def _import_from(w: _Writer, node: ast.ImportFrom) -> None:
    w.emit(f"from {node.module}")
    w.block(list(node.names))


def _expr(w: _Writer, node: ast.Expr) -> None:
    if not is_string(node):  # a docstring, or a string used as a comment
        w.emit("Expr")
        w.visit(node.value)


def _string(w: _Writer, node: ast.JoinedStr) -> None:
    w.emit("S")


def _annotated(w: _Writer, node: ast.AnnAssign) -> None:
    """``x: int = 1`` is ``x = 1``; a bare ``x: int`` declares nothing that runs."""
    if node.value is not None:
        w.emit("Assign")
        w.visit(node.target)
        w.visit(node.value)


def _handler(w: _Writer, node: ast.ExceptHandler) -> None:
    w.emit("ExceptHandler")
    if node.type is not None:
        w.visit(node.type)
    if node.name:
        w.emit(w.name(node.name))
    w.block(list(node.body))


_SPECIAL: dict[type[ast.AST], Callable[[_Writer, Any], None]] = {
    ast.FunctionDef: _function,
    ast.AsyncFunctionDef: _function,
    ast.ClassDef: _class,
    ast.Name: _name,
    ast.arg: _arg,
    ast.Attribute: _attribute,
    ast.Constant: _constant,
    ast.keyword: _keyword,
    ast.alias: _alias,
    ast.ImportFrom: _import_from,
    ast.Expr: _expr,
    ast.JoinedStr: _string,
    ast.AnnAssign: _annotated,
    ast.ExceptHandler: _handler,
}
