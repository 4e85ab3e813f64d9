"""Every closed form equals the terms counted from its schedule, for N up to 64."""

import pytest

from ringtree.algorithms import BuildSpec, algorithms_for, build
from ringtree.collectives import Collective
from ringtree.cost.closed_forms import estimate, has_closed_form, registered
from ringtree.cost.model import max_bytes_sent, schedule_terms

COUNTS = [0, 1, 5, 64, 1000, 12345]


def shapes(n):
    """Build options worth checking for n ranks (hierarchical shapes where n factors)."""
    out = [BuildSpec(root=0), BuildSpec(root=n - 1), BuildSpec(root=n // 2, n_chunks=3)]
    for g in (2, 4, 8):
        if n % g == 0 and n > g:
            out.append(BuildSpec(ranks_per_node=g))
    return out


@pytest.mark.parametrize("key", registered(), ids=lambda k: f"{k[0].value}-{k[1]}")
def test_closed_form_equals_schedule(key):
    collective, algorithm = key
    for n in list(range(1, 18)) + [24, 31, 32, 33, 48, 63, 64]:
        for spec in shapes(n):
            try:
                s = build(collective, algorithm, n, root=spec.root, n_chunks=spec.n_chunks,
                          ranks_per_node=spec.ranks_per_node)  # fmt: skip
            except ValueError:
                continue  # a shape this algorithm does not take
            for count in COUNTS + [n * 3 + 1]:
                e = estimate(collective, algorithm, n, count, 4, spec)
                got = schedule_terms(s, count, 4)
                assert e.cost == got, (n, spec, count)
                assert e.max_bytes_sent == max_bytes_sent(s, count, 4), (n, spec, count)


def test_every_algorithm_has_a_closed_form():
    missing = [
        (c.value, a) for c in Collective for a in algorithms_for(c) if not has_closed_form(c, a)
    ]
    assert not missing
