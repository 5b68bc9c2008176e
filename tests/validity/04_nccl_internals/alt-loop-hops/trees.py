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
    # NCCL's ncclGetBtree, children listed in ascending rank order
    if rank == 0:
        bit = 1
        while bit < nranks:
            bit <<= 1
        return {"parent": -1, "children": [bit >> 1] if nranks > 1 else []}
    bit = rank & -rank
    up = (rank ^ bit) | (bit << 1)
    if up >= nranks:
        up = rank ^ bit
    low = bit >> 1
    kids = []
    if low:
        kids.append(rank - low)
        while low and rank + low >= nranks:
            low >>= 1
        if low:
            kids.append(rank + low)
    return {"parent": up, "children": sorted(kids)}


def dtree(nranks: int, rank: int) -> list[dict]:
    """ncclGetDtree: [tree 0, tree 1]. Tree 0 is btree. Tree 1, for an even nranks, mirrors it: run btree on
    nranks-1-rank and map every answer x to nranks-1-x. For an odd nranks it shifts it: run btree on
    (rank-1) mod nranks and map x to (x+1) mod nranks."""
    t0 = btree(nranks, rank)
    if nranks % 2 == 0:
        src = btree(nranks, nranks - 1 - rank)

        def back(x: int) -> int:
            return nranks - 1 - x
    else:
        src = btree(nranks, (rank - 1) % nranks)

        def back(x: int) -> int:
            return (x + 1) % nranks

    parent = -1 if src["parent"] == -1 else back(src["parent"])
    t1 = {"parent": parent, "children": sorted(back(x) for x in src["children"])}
    return [t0, t1]
