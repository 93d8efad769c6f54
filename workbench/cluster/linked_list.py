"""Intrusive doubly linked lists in integer arrays (numba), shared by the HET cache and LAIA.

Nodes and lists are rows of two integer arrays whose first two columns hold the links; other
columns belong to the caller (keys, versions, bucket ids, ...):

    nodes[s, PREV], nodes[s, NEXT]   neighbours of node s in its list (-1: none)
    lists[l, HEAD], lists[l, TAIL]   first and last node of list l (-1: empty)

    lists[l]:  HEAD -> s0 <-> s1 <-> ... <-> sk <- TAIL

Both kernels are allocation-free (compiled without NRT) and O(1).
"""

from __future__ import annotations

import numba as nb

PREV, NEXT = 0, 1  # nodes[] columns
HEAD, TAIL = 0, 1  # lists[] columns


@nb.njit(cache=True, _nrt=False)
def unlink(nodes, lists, lst, s):
    """Remove node ``s`` from list ``lst``; its links become -1."""
    p, n = nodes[s, PREV], nodes[s, NEXT]
    if p >= 0:
        nodes[p, NEXT] = n
    else:
        lists[lst, HEAD] = n
    if n >= 0:
        nodes[n, PREV] = p
    else:
        lists[lst, TAIL] = p
    nodes[s, PREV] = -1
    nodes[s, NEXT] = -1


@nb.njit(cache=True, _nrt=False)
def push_front(nodes, lists, lst, s):
    """Insert the unlinked node ``s`` at the head of list ``lst``."""
    h = lists[lst, HEAD]
    nodes[s, PREV] = -1
    nodes[s, NEXT] = h
    if h >= 0:
        nodes[h, PREV] = s
    else:
        lists[lst, TAIL] = s
    lists[lst, HEAD] = s
