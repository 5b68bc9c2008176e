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
    """`rank`'s place in NCCL's binary tree over `nranks` ranks, as ncclGetBtree (src/graph/trees.cc) builds
    it: {"parent": its parent, or -1 for the root (rank 0), "children": its 0, 1 or 2 children}. The tree
    for 14 ranks is drawn above."""
    raise NotImplementedError("TODO(04.trees): not implemented yet")


def dtree(nranks: int, rank: int) -> list[dict]:
    """`rank`'s place in NCCL's double binary tree (ncclGetDtree, src/graph/trees.cc): [tree 0, tree 1], each
    in btree's format. Tree 0 is btree's tree; tree 1 is the second tree NCCL derives from it (README.md,
    "The double binary tree": mirrored for an even nranks, shifted by one for an odd one)."""
    raise NotImplementedError("TODO(04.trees): not implemented yet")
