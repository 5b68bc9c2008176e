"""Submissions of exercise 02 for the similarity tests and benchmark: solutions written independently, the
disguise a student puts on a copy, and synthetic classes of any size.

Shared by ``tests/test_similarity.py`` and ``benchmarks/bench_similarity.py``.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STUB = REPO / "exercises" / "02_ring_tree" / "allreduce.py"
REFERENCE = REPO / "solutions" / "02_ring_tree" / "allreduce.py"
VALIDITY = REPO / "tests" / "validity" / "02_ring_tree"
INDEPENDENT = ("alt-desc-mask-tree", "alt-nccl-btree")
"""Two alternative-correct solutions of tests/validity that share no function with each other nor with the
reference (each case.yml says how it was written)."""

# Two ring all-reduces and a recursive doubling written from the README, not from the reference.
CAROL_RING = """\
size = dist.get_world_size(group)
me = dist.get_rank(group)
if size < 2:
    return
nxt = _global(group, (me + 1) % size)
prv = _global(group, (me + size - 1) % size)
pieces = list(torch.tensor_split(tensor.view(-1), size))
for phase in ("reduce", "gather"):
    for step in range(size - 1):
        if phase == "reduce":
            out_idx, in_idx = (me - step) % size, (me - step - 1) % size
        else:
            out_idx, in_idx = (me - step + 1) % size, (me - step) % size
        got = torch.empty_like(pieces[in_idx])
        handle = dist.isend(pieces[out_idx], nxt, group=group)
        dist.recv(got, prv, group=group)
        handle.wait()
        if phase == "reduce":
            pieces[in_idx].add_(got)
        else:
            pieces[in_idx].copy_(got)
"""
DAVE_RING = """\
world, rank = dist.get_world_size(group), dist.get_rank(group)
if world == 1:
    return
flat = tensor.view(-1)
bounds = [len(c) for c in torch.tensor_split(torch.arange(flat.numel()), world)]
starts = [sum(bounds[:i]) for i in range(world)]
def part(i):
    i %= world
    return flat[starts[i] : starts[i] + bounds[i]]
send_to, recv_from = _global(group, (rank - 1) % world), _global(group, (rank + 1) % world)
for k in range(2 * (world - 1)):
    outgoing = part(rank + k).clone()
    incoming = torch.zeros_like(part(rank + k + 1))
    ops = [dist.P2POp(dist.isend, outgoing, send_to, group)]
    ops.append(dist.P2POp(dist.irecv, incoming, recv_from, group))
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    if k < world - 1:
        part(rank + k + 1).add_(incoming)
    else:
        part(rank + k + 1).copy_(incoming)
"""
ERIN_DOUBLING = """\
n, me = dist.get_world_size(group), dist.get_rank(group)
core = 1
while core * 2 <= n:
    core *= 2
spare = torch.empty_like(tensor)
if me >= core:
    dist.send(tensor, _global(group, me - core), group=group)
    dist.recv(tensor, _global(group, me - core), group=group)
    return
if me + core < n:
    dist.recv(spare, _global(group, me + core), group=group)
    tensor.add_(spare)
bit = 1
while bit < core:
    other = _global(group, me ^ bit)
    if me & bit:
        dist.recv(spare, other, group=group)
        dist.send(tensor, other, group=group)
    else:
        dist.send(tensor, other, group=group)
        dist.recv(spare, other, group=group)
    tensor.add_(spare)
    bit <<= 1
if me + core < n:
    dist.send(tensor, _global(group, me + core), group=group)
"""
HEAP_TREE = "return [(r - 1) // 2 if r else -1 for r in range(p)]\n"
"""The binary tree everyone writes: a heap's parents."""
NAMES = ("acc", "tmp", "cur", "val", "peer", "idx", "buf2", "part", "dst", "src", "step", "blk", "nb", "lo")


def fill(stub: str, function: str, body: str) -> str:
    """``stub`` with ``function``'s ``raise NotImplementedError`` replaced by ``body``."""
    head = stub.index(f"def {function}(")
    start = stub.index("    raise NotImplementedError", head)
    end = stub.index("\n", start) + 1
    return stub[:start] + "".join(f"    {line}\n" for line in body.splitlines()) + stub[end:]


def validity(case: str) -> str:
    return (VALIDITY / case / "allreduce.py").read_text()


def disguise(source: str, seed: int = 0, *, docstrings: bool = False) -> str:
    """The copy a student hands in, behaving as ``source`` does: every function's locals renamed (its
    parameters, which callers name, kept), the top-level functions in another order, the docstrings
    (unless ``docstrings``) and comments gone, the layout ``ast.unparse``'s."""
    tree = ast.parse(source)
    if not docstrings:
        _strip_docstrings(tree)
    for function in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        _rename_locals(function, random.Random(f"{seed}-{function.name}"))
    _reorder_functions(tree, random.Random(seed))
    return ast.unparse(tree) + "\n"


def _strip_docstrings(tree: ast.Module) -> None:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]


def _rename_locals(function: ast.FunctionDef, rng: random.Random) -> None:
    params = {a.arg for a in ast.walk(function) if isinstance(a, ast.arg)}
    stored = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    renamed = {old: f"{rng.choice(NAMES)}_{i}" for i, old in enumerate(sorted(stored - params))}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and node.id in renamed:
            node.id = renamed[node.id]


def _reorder_functions(tree: ast.Module, rng: random.Random) -> None:
    """The top-level functions shuffled (reversed when the shuffle changes nothing) in their own slots."""
    slots = [i for i, node in enumerate(tree.body) if isinstance(node, ast.FunctionDef)]
    functions = [tree.body[i] for i in slots]
    order = functions[:]
    rng.shuffle(order)
    if order == functions:
        order.reverse()
    for slot, function in zip(slots, order, strict=True):
        tree.body[slot] = function


def write_class(folder: Path, files: dict[str, str]) -> dict[str, Path]:
    """One folder per student holding allreduce.py."""
    for student, text in files.items():
        (folder / student).mkdir(parents=True)
        (folder / student / "allreduce.py").write_text(text)
    return {student: folder / student for student in files}


# ---------------------------------------------------------------------------------------------------------
# a synthetic class, for the benchmark


def synthetic_class(folder: Path, size: int, seed: int = 0) -> dict[str, Path]:
    """``size`` students: each takes every function from a solution drawn at random (the reference or an
    alternative-correct case) and leaves up to three debugging prints in it, renamed and reordered,
    docstrings kept; every tenth copies the student before them."""
    rng = random.Random(seed)
    variants = [ast.parse(REFERENCE.read_text())]
    variants += [ast.parse((case / "allreduce.py").read_text()) for case in sorted(VALIDITY.iterdir())]
    files: dict[str, str] = {}
    for number in range(size):
        student = f"s{number:03d}"
        if number % 10 == 9:
            files[student] = disguise(files[f"s{number - 1:03d}"], seed=number, docstrings=True)
            continue
        tree = ast.parse(STUB.read_text())
        for index, node in enumerate(tree.body):
            if isinstance(node, ast.FunctionDef):
                tree.body[index] = _debugged(_function(rng.choice(variants), node.name), rng)
        files[student] = disguise(ast.unparse(tree), seed=number, docstrings=True)
    return write_class(folder, files)


def _function(module: ast.Module, name: str) -> ast.FunctionDef:
    return next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _debugged(function: ast.FunctionDef, rng: random.Random) -> ast.FunctionDef:
    """A copy of ``function`` with up to three ``print`` calls among its top-level statements."""
    copy = ast.parse(ast.unparse(function)).body[0]
    assert isinstance(copy, ast.FunctionDef)
    for _ in range(rng.randint(0, 3)):
        line = ast.parse(f"print({rng.choice(['step', 'rank', 'len(tensor)', 'p'])!r})").body[0]
        copy.body.insert(rng.randint(1, len(copy.body)), line)
    return copy
