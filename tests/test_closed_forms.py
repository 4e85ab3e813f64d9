"""Every closed form equals the terms counted from its schedule, for N up to 64."""

import pytest

from ringtree.algorithms import BuildSpec, algorithms_for, build, registered
from ringtree.collectives import Collective
from ringtree.cost.forms import estimate, has_closed_form
from ringtree.cost.forms import registered as with_closed_forms
from ringtree.cost.terms import max_bytes_sent, schedule_terms
from ringtree.errors import RingtreeError

pytestmark = pytest.mark.slow  # heavy: out of `make test-fast`, in `make test`

COUNTS = [0, 1, 5, 64, 1000, 12345]
NS = list(range(1, 18)) + [24, 31, 32, 33, 48, 63, 64]


def shapes(n):
    """Build options worth checking for n ranks (hierarchical shapes where n factors)."""
    out = [BuildSpec(root=0), BuildSpec(root=n - 1), BuildSpec(root=n // 2, n_chunks=3)]
    for g in (2, 4, 8):
        if n % g == 0 and n > g:
            out.append(BuildSpec(ranks_per_node=g))
    return out


@pytest.mark.parametrize("algorithm", registered(), ids=lambda a: f"{a.collective.value}-{a.name}")
def test_closed_form_equals_schedule(algorithm):
    collective = algorithm.collective
    checked = set()
    for n in NS:
        for spec in shapes(n):
            args = dict(root=spec.root, n_chunks=spec.n_chunks, ranks_per_node=spec.ranks_per_node)
            if not algorithm.accepts(n, spec):  # a shape this algorithm does not take ...
                with pytest.raises(RingtreeError):  # ... and says so
                    build(collective, algorithm.name, n, **args)
                continue
            s = build(collective, algorithm.name, n, **args)
            for count in COUNTS + [n * 3 + 1]:
                e = estimate(collective, algorithm.name, n, count, 4, spec)
                got = schedule_terms(s, count, 4)
                assert e.cost == got, (n, spec, count)
                assert e.max_bytes_sent == max_bytes_sent(s, count, 4), (n, spec, count)
            checked.add(n)
    # not vacuous: every algorithm is checked on many N (hierarchical: the even ones, 11)
    assert len(checked) >= 10, (algorithm.name, sorted(checked))


def test_every_algorithm_has_a_closed_form():
    missing = [
        (c.value, a) for c in Collective for a in algorithms_for(c) if not has_closed_form(c, a)
    ]
    assert not missing
    # and every closed form belongs to an algorithm
    assert set(with_closed_forms()) == {a.key for a in registered()}
