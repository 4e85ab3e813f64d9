"""Interval sets against a brute-force reference on a grid of whole microseconds."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ringtree.kineto import intervals as iv

SPANS = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 15)), max_size=12)


def _set(spans):
    return iv.merge([s for s, _ in spans], [s + d for s, d in spans])


def _grid(spans):
    g = np.zeros(80, dtype=bool)
    for s, d in spans:
        g[s:s + d] = True
    return g


@given(a=SPANS, b=SPANS, lo=st.integers(0, 80), hi=st.integers(0, 80))
def test_against_a_grid(a, b, lo, hi):
    A, B = _set(a), _set(b)
    ga, gb = _grid(a), _grid(b)
    assert np.all(A[1:, 0] > A[:-1, 1]) if len(A) > 1 else True  # disjoint, sorted
    assert iv.total(A) == ga.sum()
    assert iv.total(iv.union(A, B)) == (ga | gb).sum()
    assert iv.total(iv.subtract(A, B)) == (ga & ~gb).sum()
    window = np.zeros(80, dtype=bool)
    window[lo:hi] = True
    assert iv.total(iv.clip(A, lo, hi)) == (ga & window).sum()
