r"""NCCL's double binary tree: two binary trees over the same ranks, each rank a leaf in (at least) one.

A binary tree halves its bandwidth at the interior nodes, which send to two children. Two trees, each carrying
half the data, with the interior ranks of one being leaves of the other, give every rank the same load.
Sanders, Speck and Traff 2009, "Two-tree algorithms for full bandwidth broadcast, reduction and scan";
NCCL 2.4 ("Massively Scale Your Deep Learning Training with NCCL 2.4", NVIDIA blog, 2019).
Source: NVIDIA/nccl src/graph/trees.cc, ncclGetBtree and ncclGetDtree. Check: `grade exercise 04`.
Each function returns {"parent": rank or -1 at the root, "children": [child0, child1] without the -1s}.

    tree 0, 14 ranks:            0---------------8
                                          ______/ \______
                                         4               12
                                       /   \            /  \
                                     2       6       10     13
                                    / \     / \     /  \
                                   1   3   5   7   9   11
"""

from __future__ import annotations

# ------------------------------------------------------------------------------------------------------------
# 04.trees


def btree(nranks: int, rank: int) -> dict:
    """ncclGetBtree. bit = the lowest set bit of rank (for rank 0: the first power of two >= nranks).
    Root 0: no parent, one child bit >> 1 (none if nranks == 1).
    Others: parent (rank ^ bit) | (bit << 1), or rank ^ bit if that is >= nranks; lowbit = bit >> 1;
    children rank - lowbit, and rank + lowbit halving lowbit until it is < nranks (none when lowbit is 0)."""
    if rank == 0:
        top = 1 << max(nranks - 1, 0).bit_length()  # first power of two >= nranks
        return {"parent": -1, "children": [top >> 1] if nranks > 1 else []}
    bit = 1
    while not rank & bit:
        bit <<= 1
    parent = (rank ^ bit) | (bit << 1)
    if parent >= nranks:
        parent = rank ^ bit
    children = []
    lowbit = bit >> 1
    if lowbit:
        children.append(rank - lowbit)
    while lowbit and rank + lowbit >= nranks:
        lowbit >>= 1
    if lowbit:
        children.append(rank + lowbit)
    return {"parent": parent, "children": children}


def dtree(nranks: int, rank: int) -> list[dict]:
    """ncclGetDtree: [tree 0, tree 1]. Tree 0 is btree. Tree 1, for an even nranks, mirrors it: run btree on
    nranks-1-rank and map every answer x to nranks-1-x. For an odd nranks it shifts it: run btree on
    (rank-1) mod nranks and map x to (x+1) mod nranks."""
    if nranks % 2:
        to_src, from_src = (lambda r: (r - 1) % nranks), (lambda x: (x + 1) % nranks)
    else:
        to_src, from_src = (lambda r: nranks - 1 - r), (lambda x: nranks - 1 - x)
    base = btree(nranks, to_src(rank))
    other = {
        "parent": base["parent"] if base["parent"] == -1 else from_src(base["parent"]),
        "children": [from_src(x) for x in base["children"]],
    }
    return [btree(nranks, rank), other]
