"""NCCL's double binary tree from the parent rule alone (an alternative-correct case for exercise 04)."""

from __future__ import annotations


def _parent(nranks: int, rank: int) -> int:
    if rank == 0:
        return -1
    low = rank & -rank  # lowest set bit
    up = (rank ^ low) | (low << 1)
    return up if up < nranks else rank ^ low


def btree(nranks: int, rank: int) -> dict:
    children = [r for r in range(nranks) if r != rank and _parent(nranks, r) == rank]
    return {"parent": _parent(nranks, rank), "children": children}


def dtree(nranks: int, rank: int) -> list[dict]:
    if nranks % 2 == 0:
        rename = {r: nranks - 1 - r for r in range(nranks)}
    else:
        rename = {r: (r - 1) % nranks for r in range(nranks)}
    back = {v: k for k, v in rename.items()}
    other = btree(nranks, rename[rank])
    tree1 = {
        "parent": -1 if other["parent"] < 0 else back[other["parent"]],
        "children": [back[c] for c in other["children"]],
    }
    return [btree(nranks, rank), tree1]
